package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nddmilter/nddmilter/internal/store"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/daemon"
)

// apiFlags select the running daemon's API instead of the store directory.
type apiFlags struct {
	url   string
	token string
}

func (af *apiFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&af.url, "api", os.Getenv("NDDMILTER_API"),
		"talk to a running daemon's HTTP API at this URL (e.g. "+daemon.DefaultAPIURL+") instead of opening the store; env NDDMILTER_API")
	cmd.Flags().StringVar(&af.token, "token", "", "bearer token of the API (default: env NDDMILTER_API_TOKEN)")
}

func (af *apiFlags) tokenOrEnv() string {
	if af.token != "" {
		return af.token
	}
	return os.Getenv("NDDMILTER_API_TOKEN")
}

func newCampaignsCmd(gf *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "campaigns",
		Short: "List, inspect, delete or allow known campaigns; show and undo what zero-hour purge took back",
		Long: `Statistics and administration of the campaigns in the store.

While 'nddmilter serve' runs it holds the store; these commands then go
through its HTTP API (--api URL --token TOKEN, or env NDDMILTER_API and
NDDMILTER_API_TOKEN).`,
	}
	cmd.AddCommand(newCampaignsListCmd(gf), newCampaignsWatchCmd(gf), newCampaignsShowCmd(gf), newCampaignsDeleteCmd(gf), newCampaignsAllowCmd(gf),
		newCampaignsPurgesCmd(gf), newCampaignsUndoPurgeCmd(gf))
	return cmd
}

func newCampaignsListCmd(gf *globalFlags) *cobra.Command {
	var (
		af            apiFlags
		since, sortBy string
		limit, offset int
		asJSON        bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List campaigns (most recent first by default)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sinceD, err := api.ParseSince(since)
			if err != nil {
				return fmt.Errorf("--since: %w", err)
			}
			sortBy, err := api.ParseSort(sortBy)
			if err != nil {
				return fmt.Errorf("--sort: %w", err)
			}
			if limit < 0 || offset < 0 {
				return errors.New("--limit and --offset must be ≥ 0")
			}
			be, err := openBackend(cmd.Context(), gf, &af, cmd.ErrOrStderr(), false)
			if err != nil {
				return err
			}
			defer be.Close()
			cs, err := be.List(cmd.Context(), api.ListQuery{Since: sinceD, Sort: sortBy, Limit: limit, Offset: offset})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return jsonLines(out, cs)
			}
			printSummaries(out, cs)
			return nil
		},
	}
	af.register(cmd)
	cmd.Flags().StringVar(&since, "since", "", "only campaigns seen within this window (e.g. 24h, 7d); default all")
	cmd.Flags().StringVar(&sortBy, "sort", "recent", "order: recent (last seen), volume (messages), reports (distinct spam reporters), hour or day (messages in the last hour or day), ham (not-spam reports: the false-positive watch)")
	cmd.Flags().IntVar(&limit, "limit", 50, "page size: at most this many campaigns (0 for the most, 10000)")
	cmd.Flags().IntVar(&offset, "offset", 0, "skip this many campaigns of the order (the next page)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

func newCampaignsWatchCmd(gf *globalFlags) *cobra.Command {
	var (
		af            apiFlags
		limit, offset int
		asJSON        bool
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "The false-positive watch: campaigns that may be catching legitimate mail, and why",
		Long: `Lists first the campaigns whose copies came from sender domains that
also send much accepted mail (counted by the daemon from the mail it
checks), then the campaigns with not-spam reports, each with the reason:
the campaigns to look at, and allow, when legitimate mail is caught.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 || offset < 0 {
				return errors.New("--limit and --offset must be ≥ 0")
			}
			be, err := openBackend(cmd.Context(), gf, &af, cmd.ErrOrStderr(), false)
			if err != nil {
				return err
			}
			defer be.Close()
			ws, err := be.Watch(cmd.Context(), limit, offset)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return jsonLines(out, ws)
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tMESSAGES\tSPAM REPORTERS\tHAM REPORTERS\tWHY\tSUBJECT")
			for _, w := range ws {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\t%s\n", w.ID, w.State, w.Messages, w.SpamReporters, w.HamReporters,
					strings.Join(w.Reasons, "; "), truncate(oneLine(w.SampleSubject), 50))
			}
			tw.Flush()
			if len(ws) == 0 {
				fmt.Fprintln(out, "(no campaigns)")
			}
			return nil
		},
	}
	af.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "page size")
	cmd.Flags().IntVar(&offset, "offset", 0, "skip this many campaigns (the next page)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

// jsonLines writes one JSON object per line.
func jsonLines[T any](w io.Writer, xs []T) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, x := range xs {
		if err := enc.Encode(x); err != nil {
			return err
		}
	}
	return nil
}

func printSummaries(w io.Writer, cs []api.Summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tLAST SEEN (UTC)\tMESSAGES\tHOUR/DAY\tSPAM REPORTERS (REPORTS)\tHAM REPORTERS (REPORTS)\tACTIONS\tSUBJECT")
	for _, c := range cs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d/%d\t%d (%d)\t%d (%d)\t%s\t%s\n",
			c.ID, c.State, c.LastSeen.UTC().Format("2006-01-02 15:04"), c.Messages, c.HourMessages, c.DayMessages,
			c.SpamReporters, c.SpamReports, c.HamReporters, c.HamReports,
			formatActions(c.Actions), truncate(oneLine(c.SampleSubject), 60))
	}
	tw.Flush()
	if len(cs) == 0 {
		fmt.Fprintln(w, "(no campaigns)")
	}
}

func formatActions(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		ai, _ := action.Parse(names[i])
		aj, _ := action.Parse(names[j])
		if ai != aj {
			return ai > aj
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return strings.Join(parts, ", ")
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func newCampaignsShowCmd(gf *globalFlags) *cobra.Command {
	var (
		af      apiFlags
		asJSON  bool
		allKeys bool
		names   []string
	)
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one campaign: timeline, reports, reporters, sample, signatures, state",
		Long: `Show one campaign: timeline, reports, distinct reporters, sample, signatures
and state. The store keeps no reporter ids, only a hash of each (the first
16 hex digits of its SHA-256: printf %s ID | sha256sum | cut -c1-16);
--reporter ID names a reporter among them (ids are counted trimmed and in
lower case, and without the domain of reports.realm).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := api.ParseID(args[0])
			if err != nil {
				return err
			}
			be, err := openBackend(cmd.Context(), gf, &af, cmd.ErrOrStderr(), false)
			if err != nil {
				return err
			}
			defer be.Close()
			d, err := be.Get(cmd.Context(), id)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				return enc.Encode(d)
			}
			printDetail(cmd.OutOrStdout(), d, allKeys, names)
			return nil
		},
	}
	af.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&allKeys, "keys", false, "print every signature key")
	cmd.Flags().StringSliceVar(&names, "reporter", nil, "name the reporter with this id among the hashes listed (repeatable)")
	return cmd
}

// maxKeysShown is how many signature keys campaigns show prints by default.
const maxKeysShown = 12

// maxReportersShown is how many reporters campaigns show prints.
const maxReportersShown = 20

func printDetail(w io.Writer, d api.Detail, allKeys bool, names []string) {
	ts := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
	fmt.Fprintf(w, "campaign %d (%s)\n", d.ID, d.State)
	fmt.Fprintf(w, "  first seen     %s\n", ts(d.FirstSeen))
	fmt.Fprintf(w, "  last seen      %s\n", ts(d.LastSeen))
	fmt.Fprintf(w, "  messages       %d (actions: %s)\n", d.Messages, formatActions(d.Actions))
	fmt.Fprintf(w, "  spam reports   %d from %d distinct reporters\n", d.SpamReports, d.SpamReporters)
	fmt.Fprintf(w, "  not-spam       %d from %d distinct reporters\n", d.HamReports, d.HamReporters)
	fmt.Fprintf(w, "  reputation     %.4f (probability that the campaign is spam)\n", d.Reputation)
	fmt.Fprintf(w, "  exact copy     %s\n", d.DecisionRule)
	fmt.Fprintf(w, "  sample from    %s\n", oneLine(d.SampleFrom))
	fmt.Fprintf(w, "  sample subject %s\n", oneLine(d.SampleSubject))
	if d.SampleText != "" {
		fmt.Fprintf(w, "  sample text    %s\n", truncate(oneLine(d.SampleText), 200))
	}
	if len(d.MergedFrom) > 0 {
		ids := make([]string, len(d.MergedFrom))
		for i, m := range d.MergedFrom {
			ids[i] = fmt.Sprint(m)
		}
		fmt.Fprintf(w, "  merged from    %s\n", strings.Join(ids, ", "))
	}
	fmt.Fprintf(w, "  signatures     %d index keys, %d representative sketches\n", len(d.SignatureKeys), d.Sketches)
	for i, k := range d.SignatureKeys {
		if i == maxKeysShown && !allKeys {
			fmt.Fprintf(w, "    … %d more (--keys or --json for all)\n", len(d.SignatureKeys)-i)
			break
		}
		fmt.Fprintf(w, "    %s\n", k)
	}
	fmt.Fprintln(w, "  reporters (hash of the id: first 16 hex digits of its SHA-256; kind, first and last report; a spam reporter's weight from its record)")
	named := map[string]string{}
	for _, n := range names {
		// Reports are counted under the normalized id (reports.realm
		// aside: give the id without the realm's domain).
		named[api.ReporterHash(campaign.NormalizeReporter(n, ""))] = n
		named[api.ReporterHash(n)] = n
	}
	for i, r := range d.Reporters {
		if i == maxReportersShown && len(named) == 0 {
			fmt.Fprintf(w, "    … %d more (--json for all)\n", len(d.Reporters)-i)
			break
		}
		if i >= maxReportersShown && named[r.Hash] == "" {
			continue
		}
		line := fmt.Sprintf("    %s  %-4s  %s  %s", r.Hash, r.Kind, ts(r.First), ts(r.Last))
		if tr := r.Trust; tr != nil {
			line += fmt.Sprintf("  weight %.2f (%d agreed, %d contradicted of %d)", tr.Weight, tr.Agreed, tr.Contradicted, tr.Judged)
		}
		if n := named[r.Hash]; n != "" {
			line += "  = " + oneLine(n)
		}
		fmt.Fprintln(w, line)
	}
	if len(d.Reporters) == 0 {
		fmt.Fprintln(w, "    (none)")
	}
	fmt.Fprintln(w, "  timeline (UTC day: messages, spam reports, not-spam reports)")
	for _, day := range d.Timeline {
		fmt.Fprintf(w, "    %s  %8d  %6d  %6d\n", day.Day, day.Messages, day.SpamReports, day.HamReports)
	}
	if len(d.Timeline) == 0 {
		fmt.Fprintln(w, "    (none)")
	}
}

func newCampaignsDeleteCmd(gf *globalFlags) *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "delete ID...",
		Short: "Delete campaigns and every signature pointing at them",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return eachCampaign(cmd, gf, &af, args, func(be backend, id store.CampaignID) (string, error) {
				if err := be.Delete(cmd.Context(), id); err != nil {
					return "", err
				}
				return "deleted", nil
			})
		},
	}
	af.register(cmd)
	return cmd
}

func newCampaignsAllowCmd(gf *globalFlags) *cobra.Command {
	var (
		af   apiFlags
		undo bool
	)
	cmd := &cobra.Command{
		Use:   "allow ID...",
		Short: "Never act on these campaigns again (--undo: act on them again)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return eachCampaign(cmd, gf, &af, args, func(be backend, id store.CampaignID) (string, error) {
				s, err := be.Allow(cmd.Context(), id, undo)
				if err != nil {
					return "", err
				}
				return "is now " + s.State, nil
			})
		},
	}
	af.register(cmd)
	cmd.Flags().BoolVar(&undo, "undo", false, "make the campaigns active again")
	return cmd
}

// eachCampaign applies do to every campaign named in args, going on past
// failures: one line per campaign ("campaign 42 deleted", or the error on
// standard error), and an error at the end when any failed.
func eachCampaign(cmd *cobra.Command, gf *globalFlags, af *apiFlags, args []string,
	do func(be backend, id store.CampaignID) (string, error)) error {
	ids, err := parseIDs(args)
	if err != nil {
		return err
	}
	be, err := openBackend(cmd.Context(), gf, af, cmd.ErrOrStderr(), false)
	if err != nil {
		return err
	}
	defer be.Close()
	failed := 0
	for _, id := range ids {
		what, err := do(be, id)
		if err != nil {
			failed++
			fmt.Fprintf(cmd.ErrOrStderr(), "nddmilter: %v\n", err)
			continue
		}
		fmt.Fprintf(cmd.OutOrStdout(), "campaign %d %s\n", id, what)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d campaigns failed (see above)", failed, len(ids))
	}
	return nil
}

func parseIDs(args []string) ([]store.CampaignID, error) {
	ids := make([]store.CampaignID, 0, len(args))
	for _, a := range args {
		id, err := api.ParseID(a)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}
