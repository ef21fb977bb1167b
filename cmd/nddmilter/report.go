package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/mailbox"
	"github.com/nddmilter/nddmilter/internal/store"
)

// reportSummary counts what a batch of reports did.
type reportSummary struct {
	Kind     string         `json:"kind"`
	Read     int            `json:"messages_read"`
	Created  int            `json:"campaigns_created"`
	Joined   int            `json:"joined_existing"`
	Merged   int            `json:"campaigns_merged"`
	Repeated int            `json:"repeated_by_reporter"`
	NoMatch  int            `json:"matched_nothing"`
	Revoked  int            `json:"campaigns_revoked"`
	ARF      int            `json:"arf_unwrapped"`
	Skipped  map[string]int `json:"skipped"`
	Errors   int            `json:"errors"`
}

func (s *reportSummary) add(o api.Outcome) {
	switch {
	case o.Skipped != "":
		// Group by the reason's category, before its details.
		reason := o.Skipped
		if i := strings.IndexAny(reason, "(:;"); i > 0 {
			reason = strings.TrimSpace(reason[:i])
		}
		s.Skipped[reason]++
	case o.Created:
		s.Created++
	case o.Campaign != 0:
		s.Joined++
	default:
		s.NoMatch++
	}
	s.Merged += len(o.Merged)
	if o.Repeated {
		s.Repeated++
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
	fmt.Fprintf(w, "repeated by reporter: %d (counted once per campaign)\n", s.Repeated)
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
}

func newReportCmd(gf *globalFlags) *cobra.Command {
	var (
		af        apiFlags
		reporter  string
		notSpam   bool
		filesFrom string
		verbose   bool
		asJSON    bool
		batch     int
	)
	cmd := &cobra.Command{
		Use:   "report [--reporter ID] [--not-spam] [--files-from FILE] PATH...",
		Short: "Feed junk (or not-junk) reports: .eml files, directories, mbox, Maildir or - for stdin",
		Long: `Report messages as junk (default) or, with --not-spam, as legitimate.

A junk report creates a campaign or joins the campaign(s) the message
matches (merging them when it matches several). A not-spam report counts
against the campaigns it matches and revokes them past the policy's
threshold. One reporter counts once per campaign. ARF feedback reports
(multipart/report; report-type=feedback-report) are unwrapped.

PATH is a message file, a directory (read recursively), an mbox, a Maildir,
or - for standard input; --files-from FILE reads paths one per line.`,
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
			opts := mailbox.Options{OnSkip: func(path string, reason error) error {
				sum.Skipped[reason.Error()]++
				fmt.Fprintf(errw, "%s: skipped: %v\n", path, reason)
				return nil
			}}
			// Reports go to the store in batches: one transaction and one
			// fsync for many reports (each report stays atomic).
			if batch < 1 {
				batch = 1
			}
			var (
				raws  [][]byte
				names []string
			)
			flush := func() {
				if len(raws) == 0 {
					return
				}
				outs, err := be.ReportBatch(cmd.Context(), raws, kind, reporter)
				for i, o := range outs {
					sum.add(o)
					if verbose {
						fmt.Fprintf(out, "%s\t%s\n", names[i], describeOutcome(o))
					}
				}
				if err != nil && len(outs) < len(raws) {
					// The batch stopped at message len(outs): report the rest one by one.
					fmt.Fprintf(errw, "%s: %v\n", names[len(outs)], err)
					sum.Errors++
					for i := len(outs) + 1; i < len(raws); i++ {
						o, err := be.Report(cmd.Context(), raws[i], kind, reporter)
						if err != nil {
							sum.Errors++
							fmt.Fprintf(errw, "%s: %v\n", names[i], err)
							continue
						}
						sum.add(o)
						if verbose {
							fmt.Fprintf(out, "%s\t%s\n", names[i], describeOutcome(o))
						}
					}
				}
				if err != nil && len(outs) >= len(raws) {
					fmt.Fprintf(errw, "nddmilter: %v\n", err)
					sum.Errors++
				}
				raws, names = raws[:0], names[:0]
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
			walkErr := mailbox.Walk(cmd.Context(), paths, opts, func(m mailbox.Message) error {
				sum.Read++
				raws = append(raws, bytes.Clone(m.Raw))
				names = append(names, m.Path)
				if len(raws) >= batch {
					flush()
				}
				return cmd.Context().Err()
			})
			if cmd.Context().Err() == nil {
				flush()
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
	cmd.Flags().StringVar(&reporter, "reporter", "", "who reports (an account or address); each reporter counts once per campaign")
	cmd.Flags().BoolVar(&notSpam, "not-spam", false, "the messages are legitimate (evidence against their campaigns)")
	cmd.Flags().StringVar(&filesFrom, "files-from", "", "read more paths from FILE, one per line (- for stdin)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print one line per message")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().IntVar(&batch, "batch", 256, "reports applied per store transaction (bulk ingestion)")
	return cmd
}

func describeOutcome(o api.Outcome) string {
	var b strings.Builder
	switch {
	case o.Skipped != "":
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
	if o.Repeated {
		b.WriteString(", repeated by this reporter")
	}
	if o.Revoked {
		b.WriteString(", campaign revoked")
	}
	if o.ARF {
		b.WriteString(" (ARF)")
	}
	return b.String()
}
