package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/reportclient"
)

// ReportCLIOptions configure ReportCLI. Zero values select the defaults.
type ReportCLIOptions struct {
	// Binary is the nddmilter binary run for each report. Default: the
	// nddmilter beside this process's executable, else the one in PATH.
	Binary string
	// Pipe, when set, is the small pipe program (cmd/nddmilter-pipe) run
	// for each report instead of `Binary report`.
	Pipe string
	// Socket is a running daemon's report socket (api.socket). Default:
	// a daemon started in this process over a fresh store in a temporary
	// directory, with a report socket and a spool.
	Socket string
	// Spool is passed as --spool. Default: the in-process daemon's spool.
	Spool string
	// Calls is the number of reports. Default 200.
	Calls int
	// Reporters is the number of distinct reporters. Default 20.
	Reporters int
	// Seed varies the messages. Default 1.
	Seed uint64
}

// ReportCLI measures `nddmilter report --socket` as the Dovecot pipe runs
// it: one process per report, the message on its standard input, one
// after the other; the time of each call is the process's wall time, from
// its start to its exit. The messages are randomized copies of a few
// campaigns, each with its own Message-ID, reported by rotating
// reporters. It prints the latency percentiles and how many reports the
// daemon did not take in time (spooled).
func ReportCLI(ctx context.Context, o ReportCLIOptions, w io.Writer) error {
	if o.Calls <= 0 {
		o.Calls = 200
	}
	if o.Reporters <= 0 {
		o.Reporters = 20
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Binary == "" {
		bin, err := productBinary()
		if err != nil {
			return fmt.Errorf("bench report-cli: %w", err)
		}
		o.Binary = bin
	}
	if o.Socket == "" {
		stop, sock, spool, err := startReportDaemon(ctx)
		if err != nil {
			return err
		}
		defer stop()
		o.Socket = sock
		if o.Spool == "" {
			o.Spool = spool
		}
	}
	campaigns := []struct{ subject, body string }{
		{"Your account has been selected for a luxury watch giveaway", "Congratulations! Your email address was randomly chosen among our loyal customers to receive a genuine Swiss luxury chronograph, absolutely free of charge, as part of our anniversary celebration. To claim your reward you only need to confirm your shipping details and cover a small handling fee. Quantities are strictly limited and unclaimed prizes will be offered to the next winner on our waiting list."},
		{"Refinance your mortgage at record low rates", "Homeowners across the country are saving hundreds of dollars every month by refinancing at today's historically low rates. Approval takes less than two days for most applicants. Simply visit our secure website, answer a few short questions about your property and your income, and a specialist will contact you with several tailored proposals."},
	}
	message := func(i int) ([]byte, error) {
		c := campaigns[i%len(campaigns)]
		msg, err := spamgen.Mutate(spamgen.NewMessage(c.subject, c.body, false),
			spamgen.Options{Kinds: []spamgen.Kind{spamgen.Reencode}, Seed: o.Seed + uint64(i), Strength: 0.05})
		if err != nil {
			return nil, fmt.Errorf("bench report-cli: %w", err)
		}
		return append([]byte(fmt.Sprintf("Message-ID: <bench-%d-%d@report-cli.example>\r\n", o.Seed, i)), msg...), nil
	}
	lat := make([]time.Duration, 0, o.Calls)
	cpu := make([]time.Duration, 0, o.Calls) // the process's user + system time
	spooled, failed := 0, 0
	for i := range o.Calls {
		if err := ctx.Err(); err != nil {
			return err
		}
		msg, err := message(i)
		if err != nil {
			return err
		}
		args := []string{"report", "--socket", o.Socket, "--reporter", fmt.Sprintf("user%d@example.org", i%o.Reporters), "-v"}
		if o.Spool != "" {
			args = append(args, "--spool", o.Spool)
		}
		prog := o.Binary
		if o.Pipe != "" { // the same flags, without the subcommand
			prog, args = o.Pipe, args[1:]
		}
		cmd := exec.CommandContext(ctx, prog, args...)
		cmd.Stdin = bytes.NewReader(msg)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		start := time.Now()
		err = cmd.Run()
		lat = append(lat, time.Since(start))
		if ps := cmd.ProcessState; ps != nil {
			cpu = append(cpu, ps.UserTime()+ps.SystemTime())
		}
		switch {
		case err != nil:
			failed++
			if failed == 1 {
				fmt.Fprintf(w, "call %d failed: %v: %s\n", i, err, strings.TrimSpace(errb.String()))
			}
		case strings.Contains(out.String(), "spooled"):
			spooled++
		}
	}
	fmt.Fprintf(w, "report --socket: %d calls, %d spooled, %d failed\n", len(lat), spooled, failed)
	fmt.Fprintf(w, "latency per call (process start to exit): %s\n", fmtLatency(lat))
	if len(cpu) > 0 {
		fmt.Fprintf(w, "CPU time of the report process per call:  %s\n", fmtLatency(cpu))
	}
	// The same number of other messages over the socket from this process,
	// through the client the report command runs: the daemon's share
	// (request, signing, the store's fsync), without a process start.
	in := make([]time.Duration, 0, o.Calls)
	for i := range o.Calls {
		msg, err := message(o.Calls + i)
		if err != nil {
			return err
		}
		start := time.Now()
		res, err := reportclient.Send(ctx, reportclient.Options{Socket: o.Socket, Timeout: 10 * time.Second,
			Reporter: fmt.Sprintf("user%d@example.org", i%o.Reporters)}, bytes.NewReader(msg))
		if err == nil && res.Status != reportclient.Reported {
			err = fmt.Errorf("%s: %s", res.Status, res.Detail)
		}
		if err != nil {
			return fmt.Errorf("bench report-cli: in-process report: %w", err)
		}
		in = append(in, time.Since(start))
	}
	fmt.Fprintf(w, "in-process socket client (the daemon's share): %s\n", fmtLatency(in))
	if failed > 0 {
		return fmt.Errorf("bench report-cli: %d of %d calls failed", failed, len(lat))
	}
	return nil
}

// productBinary is the nddmilter program beside this executable (both
// built into one directory), else nddmilter in PATH.
func productBinary() (string, error) {
	if exe, err := os.Executable(); err == nil {
		bin := filepath.Join(filepath.Dir(exe), "nddmilter")
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	bin, err := exec.LookPath("nddmilter")
	if err != nil {
		return "", fmt.Errorf("no nddmilter beside this program nor in PATH (--binary): %w", err)
	}
	return bin, nil
}

// startReportDaemon runs a daemon over a fresh store in a temporary
// directory, with a report socket and a spool, until stop.
func startReportDaemon(ctx context.Context) (stop func(), sock, spoolDir string, err error) {
	dir, err := os.MkdirTemp("", "nddmilter-bench-report-cli-")
	if err != nil {
		return nil, "", "", fmt.Errorf("bench report-cli: %w", err)
	}
	sock, spoolDir = filepath.Join(dir, "report.sock"), filepath.Join(dir, "spool")
	cfg := fmt.Sprintf("milter:\n  listen: unix:%s\nhttp:\n  listen: \"\"\napi:\n  socket: %s\n  spool_dir: %s\nstore:\n  dir: %s\n  min_free_bytes: -1\n",
		filepath.Join(dir, "milter.sock"), sock, spoolDir, filepath.Join(dir, "store"))
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, "", "", fmt.Errorf("bench report-cli: %w", err)
	}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- daemon.Run(dctx, daemon.Options{ConfigPath: cfgPath, LogOutput: io.Discard}) }()
	stop = func() {
		cancel()
		<-done
		os.RemoveAll(dir)
	}
	for range 500 {
		if _, err := os.Stat(sock); err == nil {
			return stop, sock, spoolDir, nil
		}
		select {
		case err := <-done:
			cancel()
			os.RemoveAll(dir)
			return nil, "", "", fmt.Errorf("bench report-cli: daemon: %w", errors.Join(err, errors.New("stopped")))
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	return nil, "", "", errors.New("bench report-cli: the daemon's report socket did not appear within 10s")
}
