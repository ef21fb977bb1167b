package eval

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// MistakenOptions configure RunMistaken. The zero value selects the
// defaults.
type MistakenOptions struct {
	// Seeds is the number of random report sets averaged over (seeds
	// 1..Seeds). Default 5.
	Seeds int
	// Share is the share of the legitimate mail each mistaken reporter
	// reports as junk. Default 0.1.
	Share float64
	// Reporters lists the numbers of mistaken reporters measured, each
	// reporting its own random Share of the legitimate mail. Default 1, 3.
	Reporters []int
	// Allowed lists the shares of each mistaken reporter's campaigns that
	// an administrator allows after the reports, each measured: the
	// corrections reporter trust learns from (docs/POLICY.md). Default
	// 0 and 0.05.
	Allowed []float64
	// NearCopy is the cosine over unique terms (the ground truth's measure)
	// from which a checked message is a near-copy of a reported one.
	// Default 0.7.
	NearCopy float64
	// ColdSenders leaves the ham-senders table empty. By default every
	// legitimate message is first checked and counted (Check) before the
	// reports, as a server delivers mail before anyone reports it: the
	// sender domains of legitimate bulk mail are then known
	// (graymail.go).
	ColdSenders bool
	// FirstDay measures every row a second time with ColdSenders: a
	// server's first day, whose tables of accepted mail are empty.
	FirstDay bool
	// InOrder checks the legitimate mail nobody reported one message at a
	// time, in a random order, as delivered mail (Check): each accepted
	// message counts for its list and sender domain before the next one,
	// as on a server. By default the checks are a dry run (Evaluate).
	InOrder bool
	// Accuracy carries the engine options, lexicon, model, workers, temp
	// dir and logger (only those fields are used).
	Accuracy AccuracyOptions
}

// MistakenRow is the outcome for one number of mistaken reporters,
// averaged over seeds.
type MistakenRow struct {
	Reporters int `json:"reporters"`
	// Cold is set for a row measured without legitimate mail delivered
	// first (ColdSenders, or the FirstDay rows).
	Cold bool `json:"cold,omitempty"`
	// Allowed is the share of each mistaken reporter's campaigns allowed
	// by an administrator before the checks; AllowedCampaigns their
	// number (mean per seed).
	Allowed          float64 `json:"allowed"`
	AllowedCampaigns float64 `json:"allowed_campaigns"`
	// Reported is the number of distinct legitimate messages reported,
	// Checked the other legitimate messages checked (means per seed).
	Reported float64 `json:"reported"`
	Checked  float64 `json:"checked"`
	// Near counts the checked messages that are near-copies of a reported
	// one (best cosine ≥ NearCopy); Far the others.
	Near float64 `json:"near"`
	Far  float64 `json:"far"`
	// NearActions and FarActions count the checked messages by action
	// ("tag", "quarantine", ...), means per seed.
	NearActions map[string]float64 `json:"near_actions"`
	FarActions  map[string]float64 `json:"far_actions"`
	// FarFlagged lists the messages that are not near-copies and were
	// flagged under some seed, with the verdict of the first such seed.
	FarFlagged []MistakenFlag `json:"far_flagged,omitempty"`
	// NearAboveTag lists the near-copies quarantined or rejected.
	NearAboveTag []MistakenFlag `json:"near_above_tag,omitempty"`
}

// MistakenFlag is one legitimate message flagged after mistaken reports.
type MistakenFlag struct {
	Path   string  `json:"path"`
	Seeds  int     `json:"seeds"`
	Cosine float64 `json:"cosine"` // best cosine with a reported message
	Action string  `json:"action"`
	P      float64 `json:"p"`
	Rule   string  `json:"rule"`
}

// Flagged is the mean number of near (or far) messages not accepted.
func (r *MistakenRow) Flagged(near bool) float64 {
	m := r.FarActions
	if near {
		m = r.NearActions
	}
	n := 0.0
	for a, v := range m {
		if a != action.Accept.String() {
			n += v
		}
	}
	return n
}

// MistakenResult is the outcome of RunMistaken.
type MistakenResult struct {
	Corpus   string  `json:"corpus"`
	Seeds    int     `json:"seeds"`
	Share    float64 `json:"share"`
	NearCopy float64 `json:"near_copy"`
	// ColdSenders: the ham-senders table was left empty.
	ColdSenders bool `json:"cold_senders,omitempty"`
	// InOrder: the checks were delivered mail, one at a time.
	InOrder bool          `json:"in_order,omitempty"`
	Ham     int           `json:"ham"`
	Rows    []MistakenRow `json:"rows"`
	Elapsed string        `json:"elapsed"`
}

// RunMistaken measures what reports of legitimate mail do to the rest of
// it: per seed and number of reporters, each mistaken reporter reports its
// own random share of the corpus's legitimate mail as junk into a fresh
// Badger store, then every legitimate message nobody reported is checked
// (Evaluate). The checked messages are split into near-copies of a
// reported message (best cosine over unique terms ≥ NearCopy) and the
// others, with the actions taken on each.
func RunMistaken(ctx context.Context, c *Corpus, opts MistakenOptions) (*MistakenResult, error) {
	start := time.Now()
	ao := opts.Accuracy
	if err := ao.defaults(); err != nil {
		return nil, err
	}
	if opts.Seeds <= 0 {
		opts.Seeds = 5
	}
	if opts.Share <= 0 || opts.Share > 1 {
		opts.Share = 0.1
	}
	if len(opts.Reporters) == 0 {
		opts.Reporters = []int{1, 3}
	}
	if len(opts.Allowed) == 0 {
		opts.Allowed = []float64{0, 0.05}
	}
	if opts.NearCopy <= 0 {
		opts.NearCopy = 0.7
	}
	var hams []int
	for i := range c.Docs {
		if c.Docs[i].Class == Ham {
			hams = append(hams, i)
		}
	}
	if len(hams) == 0 {
		return nil, fmt.Errorf("corpus %s: no legitimate mail", c.Dir)
	}
	res := &MistakenResult{Corpus: c.Dir, Seeds: opts.Seeds, Share: opts.Share, NearCopy: opts.NearCopy, ColdSenders: opts.ColdSenders, InOrder: opts.InOrder, Ham: len(hams)}
	colds := []bool{opts.ColdSenders}
	if opts.FirstDay && !opts.ColdSenders {
		colds = append(colds, true)
	}
	for _, cold := range colds {
		for _, nr := range opts.Reporters {
			for _, allowed := range opts.Allowed {
				row, err := mistakenRow(ctx, c, hams, nr, allowed, cold, opts, ao)
				if err != nil {
					return nil, err
				}
				res.Rows = append(res.Rows, row)
			}
		}
	}
	res.Elapsed = time.Since(start).Round(time.Second).String()
	return res, nil
}

// mistakenRow measures nr mistaken reporters with a share allowed of
// their campaigns allowed, over every seed, without legitimate mail
// delivered first when cold.
func mistakenRow(ctx context.Context, c *Corpus, hams []int, nr int, allowed float64, cold bool, opts MistakenOptions, ao AccuracyOptions) (MistakenRow, error) {
	row := MistakenRow{Reporters: nr, Cold: cold, NearActions: map[string]float64{}, FarActions: map[string]float64{}, Allowed: allowed}
	far, near := map[string]*MistakenFlag{}, map[string]*MistakenFlag{}
	for s := 1; s <= opts.Seeds; s++ {
		ao.Log.Info("mistaken reports", "reporters", nr, "allowed", allowed, "cold", cold, "seed", s)
		if err := mistakenSeed(ctx, c, hams, nr, allowed, cold, uint64(s), opts, ao, &row, far, near); err != nil {
			return MistakenRow{}, err
		}
	}
	n := float64(opts.Seeds)
	row.AllowedCampaigns /= n
	row.Reported /= n
	row.Checked /= n
	row.Near /= n
	row.Far /= n
	for k := range row.NearActions {
		row.NearActions[k] /= n
	}
	for k := range row.FarActions {
		row.FarActions[k] /= n
	}
	row.FarFlagged = sortedFlags(far)
	row.NearAboveTag = sortedFlags(near)
	return row, nil
}

func sortedFlags(m map[string]*MistakenFlag) []MistakenFlag {
	out := make([]MistakenFlag, 0, len(m))
	for _, f := range m {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b MistakenFlag) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// mistakenSeed runs one seed with nr mistaken reporters and adds its
// counts (sums over seeds) to row.
func mistakenSeed(ctx context.Context, c *Corpus, hams []int, nr int, allowed float64, cold bool, seed uint64, opts MistakenOptions, ao AccuracyOptions,
	row *MistakenRow, far, near map[string]*MistakenFlag) error {
	rng := rand.New(rand.NewPCG(seed, 0x6d697374616b656e+uint64(nr)))
	k := max(1, int(math.Round(opts.Share*float64(len(hams)))))
	reported := make([]bool, len(c.Docs))
	type rep struct {
		doc      int
		reporter string
	}
	var reps []rep
	for r := range nr {
		perm := slices.Clone(hams)
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		for _, i := range perm[:k] {
			reps = append(reps, rep{i, fmt.Sprintf("mistaken%d@eval.example", r+1)})
			reported[i] = true
		}
	}
	var rdocs, checked []int
	for _, i := range hams {
		if reported[i] {
			rdocs = append(rdocs, i)
		} else {
			checked = append(checked, i)
		}
	}
	row.Reported += float64(len(rdocs))
	row.Checked += float64(len(checked))
	best := bestCosines(c, rdocs, checked, ao.Workers)

	dir, err := os.MkdirTemp(ao.TempDir, "nddmilter-mistaken-")
	if err != nil {
		return fmt.Errorf("temp store: %w", err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(dir, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	model := ao.Model
	if ao.Engine.DisableANDD {
		model = nil
	}
	eng, err := campaign.New(st, ao.Lexicon, model, ao.Engine, nil)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if !cold {
		for _, i := range hams {
			if _, err := eng.Checker.Check(ctx, c.Docs[i].Raw); err != nil {
				return fmt.Errorf("check %s: %w", c.Docs[i].Path, err)
			}
		}
	}
	byReporter := map[string][]store.CampaignID{}
	for _, r := range reps {
		o, err := eng.Ingester.Report(ctx, c.Docs[r.doc].Raw, store.KindSpam, r.reporter)
		if err != nil {
			return fmt.Errorf("report %s: %w", c.Docs[r.doc].Path, err)
		}
		if o.Campaign != 0 && !slices.Contains(byReporter[r.reporter], o.Campaign) {
			byReporter[r.reporter] = append(byReporter[r.reporter], o.Campaign)
		}
	}
	// An administrator allows a random share of each reporter's campaigns
	// (in reporter order, so that the same seed allows the same ones).
	for r := range nr {
		ids := byReporter[fmt.Sprintf("mistaken%d@eval.example", r+1)]
		n := int(math.Round(allowed * float64(len(ids))))
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		for _, id := range ids[:n] {
			if err := eng.Ingester.SetState(ctx, id, store.StateAllowed); err != nil {
				return fmt.Errorf("allow campaign %d: %w", id, err)
			}
			row.AllowedCampaigns++
		}
	}
	verdicts := make([]campaign.Verdict, len(checked))
	if opts.InOrder {
		for _, k := range rng.Perm(len(checked)) {
			v, err := eng.Checker.Check(ctx, c.Docs[checked[k]].Raw)
			if err != nil {
				return fmt.Errorf("check %s: %w", c.Docs[checked[k]].Path, err)
			}
			verdicts[k] = v
		}
	} else if err := evaluateAll(ctx, eng.Checker, c, checked, verdicts, ao.Workers); err != nil {
		return err
	}
	for k, i := range checked {
		v := &verdicts[k]
		isNear := best[k] >= opts.NearCopy
		acts, list := row.FarActions, far
		if isNear {
			row.Near++
			acts, list = row.NearActions, near
		} else {
			row.Far++
		}
		acts[v.Action.String()]++
		if v.Action == action.Accept || (isNear && v.Action <= action.Tag) {
			continue
		}
		if f := list[c.Docs[i].Path]; f != nil {
			f.Seeds++
			continue
		}
		list[c.Docs[i].Path] = &MistakenFlag{Path: c.Docs[i].Path, Seeds: 1, Cosine: best[k], Action: v.Action.String(), P: v.Score, Rule: v.Rule}
	}
	return nil
}

// evaluateAll fills verdicts with the dry-run verdicts of the messages
// checked, in parallel.
func evaluateAll(ctx context.Context, ch *campaign.Checker, c *Corpus, checked []int, verdicts []campaign.Verdict, workers int) error {
	var mu sync.Mutex
	var firstErr error
	parallel(len(checked), workers, func(k int) {
		v, err := ch.Evaluate(ctx, c.Docs[checked[k]].Raw)
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = fmt.Errorf("check %s: %w", c.Docs[checked[k]].Path, err)
			}
			mu.Unlock()
		}
		verdicts[k] = v
	})
	return firstErr
}

// bestCosines returns, for each message of checked, its best cosine over
// unique terms with a message of reported (0 when it shares no term).
func bestCosines(c *Corpus, reported, checked []int, workers int) []float64 {
	post := map[string][]int32{}
	for _, i := range reported {
		for _, t := range c.Docs[i].Terms {
			post[t] = append(post[t], int32(i))
		}
	}
	out := make([]float64, len(checked))
	parallel(len(checked), workers, func(k int) {
		qt := c.Docs[checked[k]].Terms
		common := map[int32]int{}
		for _, t := range qt {
			for _, j := range post[t] {
				common[j]++
			}
		}
		for j, n := range common {
			cos := float64(n) / math.Sqrt(float64(len(qt))*float64(len(c.Docs[j].Terms)))
			out[k] = max(out[k], cos)
		}
	})
	return out
}

// WriteMarkdown prints the mistaken-reports table and the messages behind
// its failures.
func (r *MistakenResult) WriteMarkdown(w io.Writer) {
	warm := "all legitimate mail is first delivered (checked, filling the table of senders of accepted mail), then "
	if r.ColdSenders {
		warm = ""
	}
	how := "a dry run"
	if r.InOrder {
		how = "one at a time in a random order, each accepted message counted as delivered mail"
	}
	fmt.Fprintf(w, "Per seed, %seach mistaken reporter reports its own random %.0f%% of the %d legitimate messages into a fresh store, an administrator allows the given share of each one's campaigns (reporter trust), and the legitimate mail nobody reported is checked (%s). Near-copy: best cosine over unique terms ≥ %.2f with a reported message. Means over %d seeds:\n\n",
		warm, 100*r.Share, r.Ham, how, r.NearCopy, r.Seeds)
	fmt.Fprintln(w, "| mistaken reporters | campaigns allowed | reported | checked | not near-copies | flagged (tag / quarantine / reject) | near-copies | flagged (tag / quarantine / reject) |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	acts := func(m map[string]float64) string {
		return fmt.Sprintf("%g / %g / %g", m[action.Tag.String()], m[action.Quarantine.String()], m[action.Reject.String()])
	}
	for _, row := range r.Rows {
		first := ""
		if row.Cold && !r.ColdSenders {
			first = ", first day"
		}
		fmt.Fprintf(w, "| %d%s | %g%% (%g) | %g | %g | %g | %g (%s) | %g | %g (%s) |\n", row.Reporters, first, 100*row.Allowed, row.AllowedCampaigns, row.Reported, row.Checked,
			row.Far, row.Flagged(false), acts(row.FarActions), row.Near, row.Flagged(true), acts(row.NearActions))
	}
	fmt.Fprintln(w)
	if !r.ColdSenders && len(r.Rows) > 0 && r.Rows[len(r.Rows)-1].Cold {
		fmt.Fprintln(w, "First day: no mail delivered before the reports, so no list or sender is known from accepted mail (`--json` lists what is flagged).")
		fmt.Fprintln(w)
	}
	for _, row := range r.Rows {
		for _, l := range []struct {
			what string
			fs   []MistakenFlag
		}{{"not near-copies flagged", row.FarFlagged}, {"near-copies quarantined or rejected", row.NearAboveTag}} {
			if len(l.fs) == 0 || row.Cold && !r.ColdSenders {
				// The first day's failures: in --json, and in eval
				// mistaken --cold-senders.
				continue
			}
			fmt.Fprintf(w, "With %d mistaken reporter(s), %g%% allowed, %s:\n\n", row.Reporters, 100*row.Allowed, l.what)
			for i, f := range l.fs {
				if i == 3 {
					fmt.Fprintf(w, "- and %d more (--json lists them all)\n", len(l.fs)-i)
					break
				}
				// The rule from its basis on ("p = match … × reputation …").
				rule := f.Rule
				if _, basis, ok := strings.Cut(rule, "; p = "); ok {
					rule = fmt.Sprintf("%s at p=%.4f = %s", f.Action, f.P, basis)
				}
				fmt.Fprintf(w, "- `%s` (%d of %d seeds, cosine %.2f): %s\n", rel(r.Corpus, f.Path), f.Seeds, r.Seeds, f.Cosine, strings.ReplaceAll(rule, "|", "/"))
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "Run time: %s.\n", r.Elapsed)
}
