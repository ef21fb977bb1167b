package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/ledger"
)

func newCampaignsPurgesCmd(gf *globalFlags) *cobra.Command {
	var (
		af     apiFlags
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "purges ID",
		Short: "What zero-hour purge took back of a campaign: moves to Junk and back, by outcome, and the latest jobs",
		Long: `Shows what zero-hour purge (the zap section, docs/ZAP.md) did for one
campaign: when it reached the trigger, the moves to Junk and back counted
by outcome (moved, skipped by reason, failed, pending), and the latest
jobs (user, Message-ID, from → to, time, outcome).

While 'nddmilter serve' runs it holds the delivery ledger; the command
then goes through its HTTP API (a read token is enough).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := api.ParseID(args[0])
			if err != nil {
				return err
			}
			if limit < 0 || limit > api.MaxPurgeJobs {
				return fmt.Errorf("--limit: want 0 to %d", api.MaxPurgeJobs)
			}
			pb, err := openPurges(cmd, gf, &af)
			if err != nil {
				return err
			}
			defer pb.Close()
			n := limit
			if n == 0 {
				n = -1 // the most
			}
			p, err := pb.Purge(cmd.Context(), id, n)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				return enc.Encode(p)
			}
			printPurge(cmd.OutOrStdout(), p)
			return nil
		},
	}
	af.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "jobs listed, the latest first (0 for the most)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printPurge(w io.Writer, p api.Purge) {
	ts := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
	fmt.Fprintf(w, "campaign %d: zero-hour purge\n", p.Campaign)
	if p.Triggered.IsZero() {
		fmt.Fprintln(w, "  triggered   not now")
	} else {
		fmt.Fprintf(w, "  triggered   %s\n", ts(p.Triggered))
	}
	if !p.Undone.IsZero() {
		by := ""
		if p.HeldBy != "" {
			by = " by " + oneLine(p.HeldBy) + " (no copy moves again while the campaign stays at the trigger)"
		}
		fmt.Fprintf(w, "  undone      %s%s\n", ts(p.Undone), by)
	}
	fmt.Fprintf(w, "  to Junk     %s\n", formatTally(p.Moves))
	fmt.Fprintf(w, "  back        %s\n", formatTally(p.Undos))
	if len(p.Jobs) == 0 {
		fmt.Fprintln(w, "  (no jobs)")
		return
	}
	fmt.Fprintf(w, "  jobs, the latest first (%d of %d)\n", len(p.Jobs), p.TotalJobs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    WHEN (UTC)\tJOB\tUSER\tMESSAGE-ID\tFROM → TO\tOUTCOME")
	for _, j := range p.Jobs {
		out := j.Outcome
		if j.Status == string(ledger.Pending) {
			out = fmt.Sprintf("pending (%d tries)", j.Attempts)
		}
		if j.Reason != "" {
			out += ": " + oneLine(j.Reason)
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s → %s\t%s\n", j.At.UTC().Format("2006-01-02 15:04:05"), j.Kind,
			truncate(oneLine(j.User), 40), truncate(oneLine(j.MessageID), 60), dash(j.From), dash(j.To), out)
	}
	tw.Flush()
}

// formatTally is e.g. "10 jobs: 7 moved, 2 skipped (read 1, gone 1), 0 failed, 1 pending".
func formatTally(t api.Tally) string {
	s := fmt.Sprintf("%d jobs: %d moved, %d skipped", t.Jobs, t.Moved, skips(t))
	var parts []string
	for _, c := range ledger.SkipClasses {
		if n := t.Skipped[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	s += fmt.Sprintf(", %d failed, %d pending", t.Failed, t.Pending)
	if t.Logged > 0 {
		s += fmt.Sprintf(", %d only logged (mode log)", t.Logged)
	}
	return s
}

func skips(t api.Tally) int {
	n := 0
	for _, v := range t.Skipped {
		n += v
	}
	return n
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return oneLine(s)
}

func newCampaignsUndoPurgeCmd(gf *globalFlags) *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "undo-purge ID...",
		Short: "Move back what zero-hour purge moved to Junk, without allowing the campaigns",
		Long: `Moves back to where they were the copies zero-hour purge moved to Junk
for these campaigns, as an allow does, but leaves the campaigns as they
are: the policy still acts on new copies, and no copy already delivered
moves again while a campaign stays at the trigger. A copy the user moved
since stays where it is.

While 'nddmilter serve' runs it holds the delivery ledger; the command
then goes through its HTTP API (an admin token). While it is stopped, the
moves back are queued in the ledger and run when it starts.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			pb, err := openPurges(cmd, gf, &af)
			if err != nil {
				return err
			}
			defer pb.Close()
			_, local := pb.(localPurges)
			failed := 0
			for _, id := range ids {
				a, err := pb.UndoPurge(cmd.Context(), id)
				if err != nil {
					failed++
					fmt.Fprintf(cmd.ErrOrStderr(), "nddmilter: %v\n", err)
					continue
				}
				when := "now"
				if local {
					when = "when the daemon starts"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "campaign %d: purge undone, %d copies to move back (%s)\n", id, a.UndoJobs, when)
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d campaigns failed (see above)", failed, len(ids))
			}
			return nil
		},
	}
	af.register(cmd)
	return cmd
}
