package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/nddmilter/nddmilter/internal/store"
	"io"
	"os"
	"os/user"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/mailbox"
	"github.com/nddmilter/nddmilter/internal/spool"
)

// reportSummary counts what a batch of reports did.
type reportSummary struct {
	Kind     string `json:"kind"`
	Read     int    `json:"messages_read"`
	Created  int    `json:"campaigns_created"`
	Joined   int    `json:"joined_existing"`
	Merged   int    `json:"campaigns_merged"`
	VoteOnly int    `json:"vote_only"`
	Apart    int    `json:"started_apart"`
	Repeated int    `json:"repeated_by_reporter"`
	// Withdrawn: reports that withdrew the reporter's earlier vote of the
	// other kind on their campaign.
	Withdrawn int            `json:"withdrew_own_vote"`
	NoMatch   int            `json:"matched_nothing"`
	Revoked   int            `json:"campaigns_revoked"`
	ARF       int            `json:"arf_unwrapped"`
	Skipped   map[string]int `json:"skipped"`
	Errors    int            `json:"errors"`
	// In a fleet: reports in the replicated stream, and reports queued
	// in the node's outbox while NATS is unreachable (their campaign is
	// known once they are published and applied).
	Replicated int `json:"replicated,omitempty"`
	Queued     int `json:"queued,omitempty"`
}

func (s *reportSummary) add(o api.Outcome) {
	switch o.Replication {
	case campaign.Replicated:
		s.Replicated++
	case campaign.Queued:
		s.Queued++
		return // no outcome yet
	}
	switch {
	case o.SkipReason != campaign.NotSkipped:
		s.Skipped[o.SkipReason.String()]++
	case o.Created:
		s.Created++
	case o.Campaign != 0:
		s.Joined++
	default:
		s.NoMatch++
	}
	s.Merged += len(o.Merged)
	if o.VoteOnly != "" {
		s.VoteOnly++
	}
	if o.Apart {
		s.Apart++
	}
	if o.Repeated {
		s.Repeated++
	}
	if o.Withdrawn {
		s.Withdrawn++
	}
	if o.Revoked {
		s.Revoked++
	}
	if o.ARF {
		s.ARF++
	}
}

func (s *reportSummary) skipped() int {
	n := 0
	for _, v := range s.Skipped {
		n += v
	}
	return n
}

func (s *reportSummary) print(w io.Writer) {
	fmt.Fprintf(w, "messages read:        %d (%s reports)\n", s.Read, s.Kind)
	if s.Kind == "spam" {
		fmt.Fprintf(w, "campaigns created:    %d\n", s.Created)
	}
	fmt.Fprintf(w, "joined a campaign:    %d\n", s.Joined)
	fmt.Fprintf(w, "campaigns merged:     %d\n", s.Merged)
	if s.VoteOnly > 0 || s.Apart > 0 {
		fmt.Fprintf(w, "merge rule:           %d counted as votes only, %d started apart (docs/SECURITY.md)\n", s.VoteOnly, s.Apart)
	}
	fmt.Fprintf(w, "repeated by reporter: %d (counted once per campaign)\n", s.Repeated)
	if s.Withdrawn > 0 || s.Kind == "ham" {
		fmt.Fprintf(w, "withdrew own vote:    %d (the reporter had reported the campaign as the other kind)\n", s.Withdrawn)
	}
	if s.Kind == "ham" {
		fmt.Fprintf(w, "matched no campaign:  %d\n", s.NoMatch)
		fmt.Fprintf(w, "campaigns revoked:    %d\n", s.Revoked)
	}
	if s.ARF > 0 {
		fmt.Fprintf(w, "ARF reports unwrapped: %d\n", s.ARF)
	}
	fmt.Fprintf(w, "skipped:              %d\n", s.skipped())
	reasons := make([]string, 0, len(s.Skipped))
	for r := range s.Skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(w, "  %s: %d\n", r, s.Skipped[r])
	}
	fmt.Fprintf(w, "errors:               %d\n", s.Errors)
	if s.Replicated > 0 || s.Queued > 0 {
		fmt.Fprintf(w, "fleet:                %d replicated, %d queued", s.Replicated, s.Queued)
		if s.Queued > 0 {
			fmt.Fprint(w, " (NATS unreachable: they wait in this node's outbox and are applied once published)")
		}
		fmt.Fprintln(w)
	}
}

func newReportCmd(gf *globalFlags) *cobra.Command {
	var (
		af         apiFlags
		reporter   string
		notSpam    bool
		filesFrom  string
		verbose    bool
		asJSON     bool
		batch      int
		cpuProfile string
		sock       socketReport
		kindName   string
	)
	cmd := &cobra.Command{
		Use:   "report [--reporter ID] [--not-spam] [--files-from FILE] PATH... | report --socket PATH --reporter ID [--kind spam|ham] [--spool DIR] < MESSAGE",
		Short: "Feed junk (or not-junk) reports: .eml files, directories, mbox, Maildir or - for stdin",
		Long: `Report messages as junk (default) or, with --not-spam, as legitimate.

A junk report creates a campaign or joins the campaign(s) the message
matches (merging them when it matches several). A not-spam report counts
against the campaigns it matches and revokes them past the policy's
threshold. One reporter counts once per campaign. ARF feedback reports
(multipart/report; report-type=feedback-report) are unwrapped.

PATH is a message file, a directory (read recursively), an mbox, a Maildir,
or - for standard input; --files-from FILE reads paths one per line.

With --socket, one message is read from standard input and reported over
the daemon's report socket (api.socket), as the Dovecot IMAPSieve pipe of
contrib/dovecot does: no token, the caller's user must be allowed by
api.allow_users or api.allow_groups. It never fails or holds up the
caller: after --timeout it gives up on the daemon and, with --spool DIR
(api.spool_dir), leaves the report there for the daemon to ingest; it
exits 0 except for a bad command line, and says on stderr what went
wrong.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if sock.socket != "" {
				if len(args) > 1 || (len(args) == 1 && args[0] != "-") || filesFrom != "" {
					return fmt.Errorf("report --socket reads one message from standard input: no PATH")
				}
				k, err := socketKind(kindName, notSpam)
				if err != nil {
					return err
				}
				// Over the socket the reporter is the mailbox user: no default.
				if !cmd.Flags().Changed("reporter") {
					reporter = ""
				}
				sock.kind, sock.reporter, sock.verbose = k, reporter, verbose
				return sock.run(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if sock.spoolDir != "" {
				return fmt.Errorf("--spool goes with --socket")
			}
			if kindName != "" {
				k, err := api.ParseKind(kindName)
				if err != nil {
					return err
				}
				notSpam = notSpam || k == store.KindHam
			}
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
			kind := store.KindSpam
			if notSpam {
				kind = store.KindHam
			}
			be, err := openBackend(cmd.Context(), gf, &af, cmd.ErrOrStderr(), true)
			if err != nil {
				return err
			}
			defer be.Close()
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			sum := &reportSummary{Kind: api.KindName(kind), Skipped: map[string]int{}}
			var mu sync.Mutex // guards sum, out and errw: results arrive from another goroutine
			opts := mailbox.Options{OnSkip: func(path string, reason error) error {
				mu.Lock()
				defer mu.Unlock()
				sum.Skipped[reason.Error()]++
				fmt.Fprintf(errw, "%s: skipped: %v\n", path, reason)
				return nil
			}}
			onResult := func(name string, o api.Outcome, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					sum.Errors++
					fmt.Fprintf(errw, "%s: %v\n", name, err)
					return
				}
				sum.add(o)
				if verbose {
					fmt.Fprintf(out, "%s\t%s\n", name, describeOutcome(o))
				}
			}
			// Check every path before reporting anything, so that a typo
			// does not leave half of a command line reported.
			for _, p := range paths {
				if p == "-" {
					continue
				}
				if _, err := os.Stat(p); err != nil {
					return fmt.Errorf("report: nothing reported: %w", err)
				}
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			// Reports go to the store in batches: one transaction and one
			// fsync for many reports (each report stays atomic).
			sink := be.newReportSink(cmd.Context(), kind, reporter, max(batch, 1), onResult)
			walkErr := mailbox.Walk(cmd.Context(), paths, opts, func(m mailbox.Message) error {
				mu.Lock()
				sum.Read++
				mu.Unlock()
				raw := m.Raw
				if m.Reused {
					raw = bytes.Clone(raw)
				}
				if err := sink.add(raw, m.Path); err != nil {
					return err
				}
				return cmd.Context().Err()
			})
			if err := sink.close(); err != nil && cmd.Context().Err() == nil {
				fmt.Fprintf(errw, "nddmilter: %v\n", err)
				sum.Errors++
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(sum); err != nil {
					return err
				}
			} else {
				sum.print(out)
			}
			if walkErr != nil {
				return fmt.Errorf("report: %w", walkErr)
			}
			if sum.Errors > 0 {
				return fmt.Errorf("%d of %d messages could not be reported", sum.Errors, sum.Read)
			}
			return nil
		},
	}
	af.register(cmd)
	cmd.Flags().StringVar(&reporter, "reporter", defaultReporter(), "who reports (an account or address); each reporter counts once per campaign")
	cmd.Flags().BoolVar(&notSpam, "not-spam", false, "the messages are legitimate (evidence against their campaigns)")
	cmd.Flags().StringVar(&filesFrom, "files-from", "", "read more paths from FILE, one per line (- for stdin)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print one line per message")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().IntVar(&batch, "batch", 256, "reports applied per store transaction (bulk ingestion)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to FILE (go tool pprof)")
	cmd.Flags().StringVar(&kindName, "kind", "", "spam (default) or ham (as --not-spam)")
	cmd.Flags().StringVar(&sock.socket, "socket", "", "report one message from stdin over the daemon's report socket (api.socket), e.g. /run/nddmilter/report.sock")
	cmd.Flags().StringVar(&sock.spoolDir, "spool", "", "with --socket: spool the report in DIR (api.spool_dir) when the daemon does not take it")
	cmd.Flags().DurationVar(&sock.timeout, "timeout", defaultSocketTimeout, "with --socket: give up on the daemon after this long (then spool)")
	cmd.Flags().Int64Var(&sock.maxBytes, "max-size", spool.DefaultMaxMessage, "with --socket: largest message reported (bytes)")
	return cmd
}

func describeOutcome(o api.Outcome) string {
	var b strings.Builder
	switch {
	case o.Replication == campaign.Queued:
		b.WriteString("queued: the fleet's NATS is unreachable; the report waits in this node's outbox and is applied once it is published")
		return b.String()
	case o.SkipReason != campaign.NotSkipped:
		b.WriteString("skipped: " + o.Skipped)
	case o.Created:
		fmt.Fprintf(&b, "created campaign %d", o.Campaign)
	case o.Campaign != 0:
		fmt.Fprintf(&b, "joined campaign %d", o.Campaign)
	default:
		b.WriteString("matched no campaign")
	}
	if len(o.Merged) > 0 {
		fmt.Fprintf(&b, ", merged %v into it", o.Merged)
	}
	if o.Duplicate {
		b.WriteString(", repeated by this reporter (this very message: counted once)")
	} else if o.Repeated {
		b.WriteString(", repeated by this reporter")
	}
	if o.Withdrawn {
		b.WriteString(", withdrew this reporter's earlier vote on it")
	}
	if o.Revoked {
		b.WriteString(", campaign revoked")
	}
	if o.ARF {
		b.WriteString(" (ARF)")
	}
	if o.Replication == campaign.Replicated {
		b.WriteString(" (replicated to the fleet)")
	}
	return b.String()
}

// reportSink takes the messages to report, in order, and calls its
// onResult for each, in order.
type reportSink interface {
	add(raw []byte, name string) error
	// close reports what is pending and waits for the results.
	close() error
}

// streamSink reports to the local store through a campaign.ReportStream:
// messages are parsed and signed on every core ahead of the store, and
// applied in order, batch after batch, with the outcomes of ReportBatch.
type streamSink struct {
	s     *campaign.ReportStream
	kind  store.Kind
	rep   string
	mu    sync.Mutex
	names map[int]string // by sequence number, until the result arrives
	seq   int
}

func newStreamSink(ctx context.Context, ing *campaign.Ingester, kind store.Kind, reporter string, batch int,
	onResult func(name string, o api.Outcome, err error)) *streamSink {
	ss := &streamSink{kind: kind, rep: reporter, names: map[int]string{}}
	ss.s = ing.NewReportStream(ctx, campaign.StreamOptions{Batch: batch}, func(r campaign.StreamResult) {
		ss.mu.Lock()
		name := ss.names[r.Seq]
		delete(ss.names, r.Seq)
		ss.mu.Unlock()
		onResult(name, api.NewOutcome(kind, r.Outcome), r.Err)
	})
	return ss
}

func (ss *streamSink) add(raw []byte, name string) error {
	ss.mu.Lock()
	ss.names[ss.seq] = name
	ss.mu.Unlock()
	if err := ss.s.Add(campaign.ReportRequest{Raw: raw, Kind: ss.kind, Reporter: ss.rep}); err != nil {
		return err
	}
	ss.seq++
	return nil
}

func (ss *streamSink) close() error { return ss.s.Close() }

// apiSink reports through a running daemon's API, one message per
// request (the daemon applies each at once).
type apiSink struct {
	ctx      context.Context
	be       backend
	kind     store.Kind
	reporter string
	onResult func(name string, o api.Outcome, err error)
}

func (as *apiSink) add(raw []byte, name string) error {
	o, err := as.be.Report(as.ctx, raw, as.kind, as.reporter)
	as.onResult(name, o, err)
	return nil
}

func (as *apiSink) close() error { return nil }

// defaultReporter is the reporter of `nddmilter report` without
// --reporter: "cli:" and the Unix user running it, so that every report
// names a reporter (the API refuses one without).
func defaultReporter() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}
