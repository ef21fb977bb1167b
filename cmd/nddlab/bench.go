package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/lab/bench"
)

func newBenchCmd(gf *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure speed: store lookups and ingestion, the milter under load",
	}
	cmd.AddCommand(newBenchStoreCmd(gf), newBenchMilterCmd(gf), newBenchQueryCmd(gf), newBenchFloodCmd(), newBenchHostileCmd(), newBenchServeCmd(gf), newBenchReportCLICmd(), newBenchFleetCmd())
	return cmd
}

func newBenchMilterCmd(gf *globalFlags) *cobra.Command {
	var o bench.MilterOptions
	cmd := &cobra.Command{
		Use:   "milter",
		Short: "Drive the milter with concurrent go-milter sessions and measure throughput and latency",
		Long: `Starts the milter in-process over a store of --campaigns campaigns (or drives
a running daemon with --addr), and sends --messages messages over --sessions
concurrent milter sessions on loopback, the way Postfix does (MAIL, RCPT,
each header, body chunks, end of message with the queue id macro).

The store holds --templates real campaigns, each reported by five users
(so that the default policy rejects their copies), and synthetic campaigns
(one spam report and the I-Match signatures of one message, one per bag,
with random hashes) up to --campaigns, built with the store's bulk
ReportBatch and cached in --dir for the next run. The message mix is
--spam randomized copies of the real campaigns (words replaced, text
appended, paragraphs shuffled) and legitimate messages of random text.

Prints messages/s, latency percentiles (MAIL FROM to the final reply),
the actions taken and the resident memory of the process (VmRSS, VmHWM).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(gf)
			if err != nil {
				return err
			}
			o.Config = cfg
			return bench.Milter(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Sessions, "sessions", 8, "concurrent milter sessions (the SMTP sessions receiving mail at once)")
	fl.IntVar(&o.Messages, "messages", 20000, "messages to send")
	fl.IntVar(&o.Campaigns, "campaigns", 1_000_000, "campaigns in the store")
	fl.IntVar(&o.Templates, "templates", 50, "real campaigns whose copies are sent")
	fl.Float64Var(&o.Spam, "spam", 0.2, "fraction of messages that are campaign copies")
	fl.StringVar(&o.Dir, "dir", "", "store directory, reused when it holds the same shape (default .cache/bench-milter-v3-CAMPAIGNS-TEMPLATES)")
	fl.StringVar(&o.Addr, "addr", "", "drive a running milter at inet:HOST:PORT or unix:/path instead (its store is used as is)")
	fl.IntVar(&o.DaemonPID, "daemon-pid", 0, "with --addr: the daemon's process id, whose own CPU per message and memory are printed")
	fl.Uint64Var(&o.Seed, "seed", 1, "random seed of the message mix")
	fl.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the measured run to this file")
	fl.StringVar(&o.MemProfile, "memprofile", "", "write an allocation profile (allocations of the whole process) to this file")
	fl.BoolVar(&o.ReplyEachStep, "reply-each-step", false, "offer no milter protocol flags, so that the milter replies to every step (an MTA at protocol version 2)")
	fl.StringVar(&o.Network, "network", "tcp", `socket of the in-process milter: "tcp" (loopback) or "unix"`)
	fl.StringVar(&o.Server, "server", "own", `protocol server of the in-process milter: "own" (internal/milter, the daemon's), "d--j" (github.com/d--j/go-milter relaying to the own server in this process, for comparison) or "d--j-buffered" (the same with buffered socket I/O)`)
	return cmd
}

func newBenchQueryCmd(gf *globalFlags) *cobra.Command {
	var o bench.QueryOptions
	cmd := &cobra.Command{
		Use:   "query",
		Short: "Measure the campaign queries (lists, now view, one campaign, stats, readiness) on a large store",
		Long: `Uses the store of 'nddlab bench milter' (--dir; built when it is not
complete, --campaigns campaigns of which --templates real; a schema 1 store is
upgraded in place once), and measures:

  readiness   the daemon started on the store: time until /readyz answers
              200, then the latency of /readyz
  hits        --hits matched messages counted over the last 24 hours on
              campaigns drawn with a Zipf law (and --ham-reports not-spam
              reports), so that the windowed rankings have something to rank
  queries     median and slowest of --runs runs of each: list by volume,
              recent since 24h, volume since 24h, reports, day volume, a
              far page (offset 10,000), the now view (hour and day, 50
              campaigns with sparklines), one campaign's page (the API's
              detail), the false-positive watch and the store's counts
  memory      VmRSS and VmHWM of the process`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(gf)
			if err != nil {
				return err
			}
			o.Config, o.ConfigPath = cfg, gf.config
			return bench.Query(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Dir, "dir", "", "store directory (default: bench milter's, .cache/bench-milter-v3-CAMPAIGNS-TEMPLATES)")
	fl.IntVar(&o.Campaigns, "campaigns", 1_000_000, "campaigns of a store built here")
	fl.IntVar(&o.Templates, "templates", 50, "real campaigns of a store built here")
	fl.IntVar(&o.Hits, "hits", 200_000, "matched messages counted before the queries")
	fl.IntVar(&o.HamReports, "ham-reports", 1000, "not-spam reports made before the queries")
	fl.IntVar(&o.Runs, "runs", 5, "runs of each query")
	return cmd
}

func newBenchStoreCmd(gf *globalFlags) *cobra.Command {
	var o bench.StoreOptions
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Build a store of synthetic signatures and measure lookups, ingestion and disk use",
		Long: `Builds a store holding --signatures index keys through bulk ingestion
(campaigns of --imatch-keys 22-byte I-Match keys and --andd-keys 12-byte ANDD
band keys, one spam report each, plus --repeat of reports joining an existing
campaign), then measures:

  ingestion   reports/s and signatures/s through ReportBatch (fsync per batch)
  disk        bytes on disk per signature
  lookup      latency of Store.Lookup for one message's --lookup-keys keys:
              messages of a known campaign and unknown messages (p50/p99)
  report      latency of single atomic Report calls (fsync each)

Without --dir the store is built in a temporary directory and removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return bench.Store(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Signatures, "signatures", 10_000_000, "number of index keys (signatures) to build")
	fl.StringVar(&o.Dir, "dir", "", "store directory (default: a temporary directory, removed afterwards)")
	fl.BoolVar(&o.Reuse, "reuse", false, "measure an existing store built earlier by this command in --dir, skip ingestion")
	fl.IntVar(&o.Append, "append", 0, "with --reuse: first ingest this many more signatures (new campaigns numbered after the --signatures ones) into the existing store")
	fl.IntVar(&o.IMatchKeys, "imatch-keys", 6, "I-Match keys (22 bytes) per campaign")
	fl.IntVar(&o.ANDDKeys, "andd-keys", 5, "ANDD band keys (12 bytes) per campaign")
	fl.IntVar(&o.Batch, "batch", 1000, "reports per ReportBatch call")
	fl.IntVar(&o.Workers, "workers", 4, "concurrent ingesting goroutines (their commits share fsyncs)")
	fl.Float64Var(&o.Repeat, "repeat", 0.1, "fraction of reports that repeat a known campaign (joins)")
	fl.IntVar(&o.Lookups, "lookups", 50_000, "messages to look up")
	fl.IntVar(&o.LookupKeys, "lookup-keys", 16, "keys per looked-up message (11+b)")
	fl.IntVar(&o.SingleReports, "single-reports", 500, "single atomic reports to time")
	fl.BoolVar(&o.Warm, "warm", true, "read the table files into the page cache before timing lookups")
	fl.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the lookup phase to FILE")
	fl.StringVar(&o.IngestProfile, "ingest-cpuprofile", "", "write a CPU profile of the ingestion phase to FILE")
	fl.BoolVar(&o.Compact, "compact", false, "compact the store after building it (and measure its size again)")
	fl.BoolVar(&o.NoSync, "no-sync", false, "do not fsync commits (faster, not crash-safe)")
	fl.DurationVar(&o.Progress, "progress", 10*time.Second, "progress report period on stderr (0: none)")
	return cmd
}

func newBenchServeCmd(gf *globalFlags) *cobra.Command {
	var o bench.ServeOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon behind another milter protocol server, for comparison (test/e2e/postfix.sh)",
		Long: `Runs the daemon exactly as 'nddmilter serve' does (same configuration, flags,
engine, API, reload and shutdown), but speaks the milter protocol to the MTA
through --server: "d--j" is github.com/d--j/go-milter relaying every
connection to the daemon's own server on a private socket
(internal/lab/djmilter), "d--j-buffered" the same with buffered socket I/O,
"own" the daemon's own server alone. For measuring one against the other
through a real MTA: NDD_E2E_SERVER=d--j test/e2e/postfix.sh.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Daemon.ConfigPath, o.Daemon.StoreDir = gf.config, gf.store
			return bench.Serve(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Server, "server", "d--j", `milter protocol server: "d--j", "d--j-buffered" or "own"`)
	cmd.Flags().StringVar(&o.Daemon.MilterListen, "listen", "", "milter socket, inet:HOST:PORT or unix:/path (overrides milter.listen; default "+config.DefaultMilterListen+")")
	cmd.Flags().StringVar(&o.Daemon.HTTPListen, "http", "", "HTTP listener HOST:PORT, \"off\" to disable (overrides http.listen; default "+config.DefaultHTTPListen+")")
	return cmd
}

func newBenchFleetCmd() *cobra.Command {
	var o bench.FleetOptions
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Three embedded JetStream servers and three nodes on loopback: report→protection, throughput, checks, sizes",
		Long: `Runs three clustered embedded JetStream servers (R=3) and three fleet
nodes (store, engine, node) in this process on loopback ports, and measures:

  report → protection  p50/p99 per node of the time from a report on one
                       node until each node applied it (round robin)
  throughput           reports/s through the three nodes at once (batches),
                       with the process's CPU per report
  sizes                stream bytes per report, snapshot bytes per campaign
  checks               checks/s and latency standalone, in the fleet and
                       with every NATS server down
  memory               the process's VmRSS and VmHWM

Directories are temporary unless --dir is given. Not a timed test: quote
figures with the load average (uptime).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return bench.Fleet(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Latency, "latency-reports", 200, "single reports timed from report to protection on every node")
	fl.IntVar(&o.Reports, "reports", 6000, "reports sent through the three nodes for the throughput")
	fl.IntVar(&o.Batch, "batch", 200, "reports per ReportBatch call (events hold up to the NATS payload)")
	fl.IntVar(&o.Senders, "senders", 1, "goroutines per node sending batches at once (--batch 1 --senders 32: reports arriving one by one, as through the API)")
	fl.DurationVar(&o.CheckFor, "check-for", time.Second, "how long checks are measured in each mode of each round")
	fl.IntVar(&o.CheckRounds, "check-rounds", 5, "rounds of checks: each runs fleet on (then NATS down) beside standalone, in alternating order")
	fl.IntVar(&o.Checkers, "checkers", 2, "goroutines checking at once")
	fl.BoolVar(&o.NoSync, "no-sync", false, "do not fsync the stores' commits")
	fl.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the throughput phase to FILE")
	fl.StringVar(&o.ChecksProfile, "checks-cpuprofile", "", "write a CPU profile of the check rounds (every mode) to FILE")
	fl.StringVar(&o.CatchUpProfile, "catchup-cpuprofile", "", "write a CPU profile of the catch-up phase (one node applying the stream alone) to FILE")
	fl.IntVar(&o.Copies, "copies", 1, "reports per campaign in the throughput phase (randomized copies; 1: every report starts a campaign)")
	fl.StringVar(&o.Dir, "dir", "", "directory of the servers and stores (default: temporary, removed)")
	return cmd
}

func newBenchReportCLICmd() *cobra.Command {
	var o bench.ReportCLIOptions
	cmd := &cobra.Command{
		Use:   "report-cli",
		Short: "Measure `nddmilter report --socket` as the Dovecot pipe runs it: one process per report",
		Long: `Runs this binary's 'report --socket' --calls times, one after the other, each
with a randomized campaign copy (its own Message-ID) on standard input and
one of --reporters reporters, against a daemon started in this process over
a fresh store (or the running daemon's --socket), and prints the latency
per call from the process's start to its exit, and how many calls spooled
their report instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return bench.ReportCLI(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Calls, "calls", 200, "reports (processes) to run")
	fl.IntVar(&o.Reporters, "reporters", 20, "distinct reporters")
	fl.StringVar(&o.Socket, "socket", "", "a running daemon's report socket (default: a daemon in this process over a fresh store)")
	fl.StringVar(&o.Spool, "spool", "", "spool directory passed to report --spool (default: the in-process daemon's)")
	fl.StringVar(&o.Binary, "binary", "", "the nddmilter binary to run (default: the nddmilter beside nddlab, else in PATH)")
	fl.StringVar(&o.Pipe, "pipe", "", "run this nddmilter-pipe program (contrib/dovecot's pipe) instead of `nddmilter report`")
	fl.Uint64Var(&o.Seed, "seed", 1, "random seed of the messages")
	return cmd
}
