// Command compare measures nddmilter side by side with rspamd's fuzzy_check
// on a labelled corpus and prints Markdown tables (docs/design/methods.md). It is run
// by scripts/peers/compare.sh, which starts the private rspamd and passes
// its addresses through the environment (RSPAMD_NORMAL, RSPAMD_CONTROLLER).
//
//	go run ./scripts/peers/compare -corpus .cache/spamassassin [flags]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nddmilter/nddmilter/internal/lab/eval/peers"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		corpus   = fs.String("corpus", ".cache/spamassassin", "corpus directory with spam/, easy_ham/, hard_ham/")
		share    = fs.Float64("share", 0.1, "share of the spam reported")
		seed     = fs.Uint64("seed", 1, "seed of the split and of the randomized copies")
		parallel = fs.Int("parallel", 4, "concurrent clients in the batch runs")
		runs     = fs.Int("runs", 5, "speed repetitions (medians are quoted)")
		sample   = fs.Int("sample", 1000, "messages per throughput run")
		latN     = fs.Int("latency-sample", 1000, "messages per latency run (one client; the first of the throughput sample)")
		kinds    = fs.String("kinds", "", "randomization kinds, comma-separated (default: all)")
		tools    = fs.String("tools", "rspamd-milter,nddmilter-milter,rspamd,nddmilter,rspamd-fuzzy", "tools to run, in table order: rspamd-milter, nddmilter-milter (both through the milter protocol), rspamd (HTTP /checkv2, full scan), nddmilter (engine in-process), rspamd-fuzzy (HTTP, fuzzy group only)")
		scanner  = fs.String("rspamd-scanner", os.Getenv("RSPAMD_NORMAL"), "rspamd scanner host:port")
		ctrl     = fs.String("rspamd-controller", os.Getenv("RSPAMD_CONTROLLER"), "rspamd controller host:port")
		rmilter  = fs.String("rspamd-milter", os.Getenv("RSPAMD_MILTER"), "rspamd milter (rspamd_proxy) host:port")
		symbol   = fs.String("rspamd-symbol", envOr("RSPAMD_FUZZY_SYMBOL", "LOCAL_FUZZY_DENIED"), "rspamd fuzzy symbol of reported spam")
		fflag    = fs.Int("rspamd-flag", envInt("RSPAMD_FUZZY_FLAG", 11), "rspamd fuzzy flag of reported spam")
		workdir  = fs.String("workdir", "", "scratch directory for nddmilter stores (default: a temporary one, removed)")
		cli      = fs.String("ndd-cli", "", "also run the detection pass through this nddmilter binary (report/check commands)")
		pyzor    = fs.String("pyzor-server", os.Getenv("PYZOR_SERVER"), "also run the detection pass with Pyzor against this pyzord host:port")
		pyScript = fs.String("pyzor-script", "scripts/peers/pyzor_batch.py", "the Pyzor batch client")
		python   = fs.String("pyzor-python", "/usr/bin/python3", "the Python that has the pyzor module")
		maxMsgs  = fs.Int("max", 0, "use at most this many corpus messages (0 = all; a seeded sample keeps class shares)")
		record   = fs.Bool("ndd-record", false, "in-process nddmilter checks record hits like the milter (Engine.Check) instead of the dry run of `nddmilter check` (Engine.Evaluate)")
		verbose  = fs.Bool("v", false, "log progress")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	opts := peers.Options{
		Share: *share, Seed: *seed, Parallel: *parallel, SpeedRuns: *runs,
		SpeedSample: *sample, LatencySample: *latN, Log: log,
	}
	if *kinds != "" {
		for _, k := range strings.Split(*kinds, ",") {
			kind, err := spamgen.ParseKind(k)
			if err != nil {
				return err
			}
			opts.Kinds = append(opts.Kinds, kind)
		}
	}

	t0 := time.Now()
	msgs, err := peers.LoadCorpus(*corpus, 0)
	if err != nil {
		return err
	}
	if *maxMsgs > 0 {
		msgs = peers.Sample(msgs, *maxMsgs, *seed)
	}
	log.Info("corpus loaded", "messages", len(msgs), "elapsed", time.Since(t0))
	setup, err := peers.Prepare(ctx, msgs, opts)
	if err != nil {
		return err
	}
	log.Info("ground truth and copies ready", "copies", len(setup.Copies), "elapsed", time.Since(t0))

	wd := *workdir
	if wd == "" {
		wd, err = os.MkdirTemp("", "nddmilter-peers-")
		if err != nil {
			return fmt.Errorf("workdir: %w", err)
		}
		defer os.RemoveAll(wd)
	} else if err := os.MkdirAll(wd, 0o755); err != nil {
		return fmt.Errorf("workdir: %w", err)
	}

	var results []*peers.Result
	for _, tool := range strings.Split(*tools, ",") {
		var d peers.Detector
		newRspamd := func(label, settings string) (*peers.Rspamd, error) {
			if *scanner == "" || *ctrl == "" {
				return nil, fmt.Errorf("rspamd: no address; run through scripts/peers/rspamd.sh or give -rspamd-scanner and -rspamd-controller")
			}
			return peers.NewRspamd(peers.Rspamd{Scanner: *scanner, Controller: *ctrl, Symbol: *symbol, Flag: *fflag,
				Label: label, Settings: settings}, *parallel), nil
		}
		newNDD := func() (*peers.NDD, error) {
			dir, err := os.MkdirTemp(wd, "store-")
			if err != nil {
				return nil, fmt.Errorf("nddmilter store: %w", err)
			}
			return peers.OpenNDD(dir, log)
		}
		switch strings.TrimSpace(tool) {
		case "rspamd":
			r, err := newRspamd("", "")
			if err != nil {
				return err
			}
			d = r
		case "rspamd-fuzzy":
			r, err := newRspamd("rspamd (HTTP, fuzzy only)", peers.FuzzyOnly)
			if err != nil {
				return err
			}
			d = r
		case "rspamd-milter":
			r, err := newRspamd("", "")
			if err != nil {
				return err
			}
			if *rmilter == "" {
				return fmt.Errorf("rspamd-milter: no address; run through scripts/peers/rspamd.sh or give -rspamd-milter")
			}
			d = &peers.MilterCheck{Label: "rspamd (milter)", Addr: *rmilter, Learner: r, Flagged: peers.RspamdFlagged(*symbol)}
		case "nddmilter":
			n, err := newNDD()
			if err != nil {
				return err
			}
			n.Record = *record
			d = n
		case "nddmilter-milter":
			n, err := newNDD()
			if err != nil {
				return err
			}
			addr, stop, err := peers.ServeNDDMilter(n)
			if err != nil {
				n.Close()
				return err
			}
			d = &peers.MilterCheck{Label: "nddmilter (milter)", Addr: addr, Learner: n, Flagged: peers.NDDFlagged, Closer: stop}
		default:
			return fmt.Errorf("unknown tool %q (rspamd-milter, nddmilter-milter, rspamd, nddmilter, rspamd-fuzzy)", tool)
		}
		r, err := peers.Run(ctx, setup, d)
		if cerr := d.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if r.FirstError != nil {
			log.Warn("errors during the run", "tool", r.Name, "count", r.Errors, "first", r.FirstError)
		}
		results = append(results, r)
	}
	var cliResult *peers.Result
	if *cli != "" {
		dir, err := os.MkdirTemp(wd, "cli-")
		if err != nil {
			return fmt.Errorf("cli workdir: %w", err)
		}
		cliResult, err = peers.RunCLI(ctx, *cli, setup, dir)
		if err != nil {
			return err
		}
		if cliResult.FirstError != nil {
			log.Warn("errors during the CLI run", "count", cliResult.Errors, "first", cliResult.FirstError)
		}
	}

	var pyzorResult *peers.Result
	if *pyzor != "" {
		dir, err := os.MkdirTemp(wd, "pyzor-")
		if err != nil {
			return fmt.Errorf("pyzor workdir: %w", err)
		}
		log.Info("detection pass", "tool", "Pyzor", "server", *pyzor)
		pyzorResult, err = peers.RunPyzor(ctx, *python, *pyScript, *pyzor, setup, dir)
		if err != nil {
			return err
		}
		if pyzorResult.FirstError != nil {
			log.Warn("errors during the Pyzor run", "count", pyzorResult.Errors, "first", pyzorResult.FirstError)
		}
	}

	fmt.Fprintf(stdout, "## Detection\n\n")
	det := results[:len(results):len(results)]
	for _, r := range []*peers.Result{cliResult, pyzorResult} {
		if r != nil {
			det = append(det, r)
		}
	}
	peers.WriteDetection(stdout, setup, det)
	peers.WriteFalsePositives(stdout, setup, det, 10)
	fmt.Fprintf(stdout, "## Speed\n\n")
	peers.WriteSpeedIntro(stdout, setup)
	// Side by side in pairs that take the same path: milter against
	// milter, direct against direct; anything else in one table.
	byName := map[string]*peers.Result{}
	for _, r := range results {
		byName[r.Name] = r
	}
	pairs := [][2]string{{"rspamd (milter)", "nddmilter (milter)"}, {"rspamd (HTTP)", "nddmilter (in-process)"},
		{"rspamd (HTTP, fuzzy only)", "nddmilter (in-process)"}}
	shown := 0
	for _, p := range pairs {
		a, b := byName[p[0]], byName[p[1]]
		if a == nil || b == nil {
			continue
		}
		peers.WriteSpeed(stdout, setup, []*peers.Result{a, b})
		shown++
	}
	if shown == 0 {
		peers.WriteSpeed(stdout, setup, results)
	}
	if cliResult != nil {
		fmt.Fprintf(stdout, "nddmilter CLI, one process per command (start-up and store opening included): `report` %.0f reports/s, `check --json` %.0f messages/s (one client).\n\n",
			cliResult.Detection.LearnRate, cliResult.Detection.CheckRate)
	}
	if pyzorResult != nil {
		fmt.Fprintf(stdout, "Pyzor (Python batch client, one process, one client; UDP to a local pyzord): report %.0f reports/s, check %.0f messages/s.\n\n",
			pyzorResult.Detection.LearnRate, pyzorResult.Detection.CheckRate)
	}
	fmt.Fprintf(stdout, "Run: %s, %d cores, Go driver %s, total %s.\n", time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), filepath.Base(os.Args[0]), time.Since(t0).Round(time.Second))
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}
