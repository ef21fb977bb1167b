package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/mailbox"
)

// checkLine is the JSON form of one checked message.
type checkLine struct {
	Path string `json:"path"`
	campaign.Verdict
	Error string `json:"error,omitempty"`
}

func newCheckCmd(gf *globalFlags) *cobra.Command {
	var (
		af         apiFlags
		asJSON     bool
		filesFrom  string
		record     bool
		jobs       int
		cpuProfile string
	)
	cmd := &cobra.Command{
		Use:   "check [--json] [--files-from FILE] PATH...",
		Short: "Tell what the milter would do with messages, and why",
		Long: `Check messages against the known campaigns: one line per message,
"path action campaign score rule", or with --json one JSON object per line
with path, action (accept|tag|quarantine|reject), campaign, score, rule,
evidence (the matched signatures) and warnings, and the parts the rule is
rendered from: decision (p, match, reputation and its factors, the
threshold and cost that chose the action, the policy's caps), skip (why a
message has no usable signature), cap, deferred, footer_note, footer_only
and other_campaigns. Messages are checked --jobs at once; the output stays
in input order.

PATH is a message file, a directory (read recursively), an mbox, a Maildir,
or - for standard input; --files-from FILE reads paths one per line. By
default the check is a dry run; --record counts matched messages in the
campaigns' statistics as the milter does.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths := args
			if filesFrom != "" {
				more, err := mailbox.ReadFilesFrom(filesFrom)
				if err != nil {
					return err
				}
				paths = append(paths, more...)
			}
			if len(paths) == 0 {
				return fmt.Errorf("no message given: name files, directories, mboxes, Maildirs or - (stdin)")
			}
			be, err := openBackend(cmd.Context(), gf, &af, cmd.ErrOrStderr(), false)
			if err != nil {
				return err
			}
			defer be.Close()
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			out, errw := bufio.NewWriter(cmd.OutOrStdout()), cmd.ErrOrStderr()
			defer out.Flush()
			enc := json.NewEncoder(out)
			enc.SetEscapeHTML(false)
			nerr, n := 0, 0
			print := func(c *checked) error {
				n++
				if c.err != nil {
					nerr++
				}
				if asJSON {
					line := checkLine{Path: c.path, Verdict: c.v}
					if line.Evidence == nil {
						line.Evidence = []campaign.Evidence{}
					}
					if c.err != nil {
						line.Error = c.err.Error()
					}
					return enc.Encode(line)
				}
				if c.err != nil {
					out.Flush() // keep the error next to its line
					fmt.Fprintf(errw, "%s: %v\n", c.path, c.err)
				}
				_, err := fmt.Fprintf(out, "%s\t%s\t%d\t%.4f\t%s\n", c.path, c.v.Action, c.v.Campaign, c.v.Score, oneLine(c.v.Rule))
				return err
			}
			opts := mailbox.Options{OnSkip: func(path string, reason error) error {
				fmt.Fprintf(errw, "%s: skipped: %v\n", path, reason)
				return nil
			}}
			walkErr := checkAll(cmd.Context(), paths, opts, max(jobs, 1), func(ctx context.Context, raw []byte) (campaign.Verdict, error) {
				return be.Check(ctx, raw, record)
			}, print)
			if walkErr != nil {
				return fmt.Errorf("check: %w", walkErr)
			}
			if nerr > 0 {
				return fmt.Errorf("%d of %d messages could not be checked", nerr, n)
			}
			return nil
		},
	}
	af.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	cmd.Flags().StringVar(&filesFrom, "files-from", "", "read more paths from FILE, one per line (- for stdin)")
	cmd.Flags().BoolVar(&record, "record", false, "count matched messages in the campaigns' statistics (default: dry run)")
	cmd.Flags().IntVarP(&jobs, "jobs", "j", runtime.GOMAXPROCS(0), "messages checked at once (the output stays in input order)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to FILE (go tool pprof)")
	return cmd
}

// checked is one message's check, printed once done, in input order.
type checked struct {
	path string
	done chan struct{}
	v    campaign.Verdict
	err  error
}

// checkAll checks the messages of paths, jobs at once, and prints each
// result in input order: a bounded window of messages is in flight while
// the printer waits for the oldest.
func checkAll(ctx context.Context, paths []string, opts mailbox.Options, jobs int,
	check func(context.Context, []byte) (campaign.Verdict, error), print func(*checked) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// jobs long-lived workers, not a goroutine per message: a worker's
	// stack, grown by its first message, serves the next ones.
	type job struct {
		c   *checked
		raw []byte
	}
	work := make(chan job)
	var pool errgroup.Group
	for range max(jobs, 1) {
		pool.Go(func() error {
			for j := range work {
				j.c.v, j.c.err = check(ctx, j.raw)
				close(j.c.done)
			}
			return nil
		})
	}
	inOrder := make(chan *checked, 4*jobs) // the window: bounds the messages held
	printed := make(chan error, 1)
	go func() {
		var err error
		for c := range inOrder {
			<-c.done
			if err == nil {
				if err = print(c); err != nil {
					cancel()
				}
			}
		}
		printed <- err
	}()
	walkErr := mailbox.Walk(ctx, paths, opts, func(m mailbox.Message) error {
		c := &checked{path: m.Path, done: make(chan struct{})}
		raw := m.Raw
		if m.Reused {
			raw = bytes.Clone(raw)
		}
		select {
		case inOrder <- c:
		case <-ctx.Done():
			return ctx.Err()
		}
		work <- job{c, raw} // waits for a free worker
		return nil
	})
	close(work)
	_ = pool.Wait() // errors are per message
	close(inOrder)
	if err := <-printed; err != nil {
		return err
	}
	if walkErr == nil {
		walkErr = ctx.Err()
	}
	return walkErr
}

// startCPUProfile writes a CPU profile to path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
