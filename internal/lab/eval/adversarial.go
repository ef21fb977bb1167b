package eval

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/lab/spotsigs"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/ppjoin"
	"github.com/nddmilter/nddmilter/internal/store"
)

// AdversarialOptions configure RunAdversarial. The zero value selects the
// defaults.
type AdversarialOptions struct {
	// Kinds are the randomizations measured. Default spamgen.AllKinds().
	Kinds []spamgen.Kind
	// Strengths are the spamgen strengths measured. Default 0.05, 0.1, 0.2, 0.3.
	Strengths []float64
	// Copies is the number of copies per reported message, kind and
	// strength. Default 1.
	Copies int
	// Seed selects the reported messages (as in RunAccuracy) and the
	// randomization. Default 1.
	Seed uint64
	// ReportShare is the share of the usable spam reported. Default 0.1.
	ReportShare float64
	// Accuracy carries the engine options, lexicon, model, workers, temp
	// dir and logger (only those fields are used).
	Accuracy AccuracyOptions
}

// AdvCell is the detection rate of one kind at one strength.
type AdvCell struct {
	Kind     spamgen.Kind `json:"kind"`
	Strength float64      `json:"strength"`
	Copies   int          `json:"copies"`
	Detected int          `json:"detected"`
	Rate     float64      `json:"rate"`
	// ByIMatch and ByANDD count detected copies whose verdict has evidence
	// of that family (a copy may have both).
	ByIMatch int `json:"by_imatch"`
	ByANDD   int `json:"by_andd"`
	// ByShort counts detected copies with a short-message key (a lead key,
	// for most: internal/shortsig).
	ByShort int `json:"by_short"`
	// ByQGram counts detected copies with q-gram evidence (internal/qgram).
	ByQGram int `json:"by_qgram"`
	// QGramAlone counts the copies the q-gram sketches alone find: a band
	// key shared with their original and an estimated docq at the
	// engine's threshold (see qgramAlone).
	QGramAlone int `json:"qgram_alone"`
	// MeanCosine is the mean cosine over unique terms (the ground truth's
	// measure) between the copies and their originals; NearDup counts the
	// copies that are still near-duplicates (cosine ≥ 0.9) and
	// NearDupDetected those of them detected.
	MeanCosine      float64 `json:"mean_cosine"`
	NearDup         int     `json:"near_dup"`
	NearDupDetected int     `json:"near_dup_detected"`
	// BySpotSigs and ByPPJoin count the copies (detected by the engine or
	// not) that SpotSigs alone (its index of the reported messages, the
	// paper's best τ) and PPJoin alone (exact cosine over unique terms ≥
	// seedCosine) find their original for.
	BySpotSigs int `json:"by_spotsigs"`
	ByPPJoin   int `json:"by_ppjoin"`
	// Errors counts copies spamgen could not produce.
	Errors int `json:"errors,omitempty"`
}

// AdversarialResult is the outcome of RunAdversarial.
type AdversarialResult struct {
	Corpus string `json:"corpus"`
	Seed   uint64 `json:"seed"`
	// Reported is the number of spam messages reported; Skipped of them had
	// no signature; Baseline is the share of the reported messages whose
	// unmodified copy is flagged. Copies are made of the flagged ones.
	Reported   int       `json:"reported"`
	Skipped    int       `json:"skipped"`
	Baseline   float64   `json:"baseline"`
	Cells      []AdvCell `json:"cells"`
	HamChecked int       `json:"ham_checked"`
	HamFlagged int       `json:"ham_flagged"`
	FalsePos   []string  `json:"false_positives,omitempty"`
	// SpotSigsHam and PPJoinHam count the ham that SpotSigs alone and
	// PPJoin alone find a reported message for.
	SpotSigsHam int    `json:"spotsigs_ham"`
	PPJoinHam   int    `json:"ppjoin_ham"`
	Elapsed     string `json:"elapsed"`
}

// Cell returns the cell of kind k at strength s.
func (r *AdversarialResult) Cell(k spamgen.Kind, s float64) *AdvCell {
	for i := range r.Cells {
		if r.Cells[i].Kind == k && r.Cells[i].Strength == s {
			return &r.Cells[i]
		}
	}
	return nil
}

// Strengths returns the strengths measured, in order.
func (r *AdversarialResult) Strengths() []float64 {
	var s []float64
	for _, c := range r.Cells {
		if !slices.Contains(s, c.Strength) {
			s = append(s, c.Strength)
		}
	}
	return s
}

// Kinds returns the kinds measured, in order.
func (r *AdversarialResult) Kinds() []spamgen.Kind {
	var s []spamgen.Kind
	for _, c := range r.Cells {
		if !slices.Contains(s, c.Kind) {
			s = append(s, c.Kind)
		}
	}
	return s
}

// RunAdversarial reports a random share of the spam to the default engine
// over a real Badger store, then checks spamgen copies of every reported
// message per kind and strength, and every ham message.
func RunAdversarial(ctx context.Context, c *Corpus, opts AdversarialOptions) (*AdversarialResult, error) {
	start := time.Now()
	ao := opts.Accuracy
	if err := ao.defaults(); err != nil {
		return nil, err
	}
	if len(opts.Kinds) == 0 {
		opts.Kinds = spamgen.AllKinds()
	}
	if len(opts.Strengths) == 0 {
		opts.Strengths = []float64{0.05, 0.1, 0.2, 0.3}
	}
	if opts.Copies <= 0 {
		opts.Copies = 1
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.ReportShare <= 0 || opts.ReportShare > 1 {
		opts.ReportShare = 0.1
	}
	e, err := reportedSplit(c, opts.Seed, opts.ReportShare)
	if err != nil {
		return nil, err
	}
	words, paras := legitText(c)
	qa := newQGramAlone(c, e.queries, ao)
	res := &AdversarialResult{Corpus: c.Dir, Seed: opts.Seed, Reported: len(e.queries)}

	dir, err := os.MkdirTemp(ao.TempDir, "nddmilter-adv-")
	if err != nil {
		return nil, fmt.Errorf("temp store: %w", err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(dir, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	eng, err := campaign.New(st, ao.Lexicon, ao.Model, ao.Engine, nil)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	for n, q := range e.queries {
		out, err := eng.Ingester.Report(ctx, c.Docs[q].Raw, store.KindSpam, fmt.Sprintf("user%d@eval.example", n))
		if err != nil {
			return nil, fmt.Errorf("report %s: %w", c.Docs[q].Path, err)
		}
		if out.Skip != campaign.NotSkipped {
			res.Skipped++
		}
	}
	var detectable []int
	for _, q := range e.queries {
		v, err := eng.Checker.Evaluate(ctx, c.Docs[q].Raw)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", c.Docs[q].Path, err)
		}
		if v.Action != action.Accept {
			detectable = append(detectable, q)
		}
	}
	res.Baseline = float64(len(detectable)) / float64(len(e.queries))
	ao.Log.Info("adversarial", "reported", len(e.queries), "flagged_unmodified", len(detectable))

	// The seed methods alone, on the same copies.
	ex := spotsigs.NewExtractor(spotsigs.Options{})
	sx := spotsigs.NewIndex(spotsigs.MatchOptions{})
	for _, q := range e.queries {
		sx.Add(q, ex.Extract(wordTokens(c.Docs[q].Raw, ao)))
	}
	type job struct {
		cell int
		q    int
		copy int
	}
	for _, k := range opts.Kinds {
		for _, s := range opts.Strengths {
			res.Cells = append(res.Cells, AdvCell{Kind: k, Strength: s})
		}
	}
	var jobs []job
	for ci := range res.Cells {
		for _, q := range detectable {
			for cp := 0; cp < opts.Copies; cp++ {
				jobs = append(jobs, job{ci, q, cp})
			}
		}
	}
	var mu sync.Mutex
	var firstErr error
	var done atomic.Int64
	parallel(len(jobs), ao.Workers, func(i int) {
		j := jobs[i]
		cell := &res.Cells[j.cell]
		raw, err := spamgen.Mutate(c.Docs[j.q].Raw, spamgen.Options{
			Kinds: []spamgen.Kind{cell.Kind}, Strength: cell.Strength,
			Seed:  copySeed(opts.Seed, c.Docs[j.q].Path, cell.Kind, cell.Strength, j.copy),
			Words: words, Paragraphs: paras,
		})
		if err != nil {
			mu.Lock()
			cell.Errors++
			mu.Unlock()
			return
		}
		v, err := eng.Checker.Evaluate(ctx, raw)
		copyDoc := mime.Parse(raw, ao.Engine.Mime)
		terms := mime.UniqueTerms(mime.Tokenize(copyDoc, ao.Engine.Tokens))
		cos := Cosine(c.Docs[j.q].Terms, terms)
		qAlone := qa.found(j.q, copyDoc)
		ms, _ := sx.Query(ex.Extract(wordTokens(raw, ao)))
		bySpot := slices.ContainsFunc(ms, func(m spotsigs.Match) bool { return m.ID == j.q })
		_, byPP := ppjoin.Verify(ppjoin.Cosine, seedCosine, terms, c.Docs[j.q].Terms) // both sorted
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("check copy of %s: %w", c.Docs[j.q].Path, err)
			}
			return
		}
		cell.Copies++
		cell.MeanCosine += cos
		if qAlone {
			cell.QGramAlone++
		}
		if bySpot {
			cell.BySpotSigs++
		}
		if byPP {
			cell.ByPPJoin++
		}
		near := cos >= ao.Cosine
		if near {
			cell.NearDup++
		}
		if v.Action != action.Accept {
			if near {
				cell.NearDupDetected++
			}
			cell.Detected++
			im, an, sh, qg := false, false, false, false
			for _, ev := range v.Evidence {
				im = im || ev.Family == campaign.FamilyIMatch
				an = an || ev.Family == campaign.FamilyANDD
				sh = sh || ev.Family == campaign.FamilyShort
				qg = qg || ev.Family == campaign.FamilyQGram
			}
			if qg {
				cell.ByQGram++
			}
			if sh {
				cell.ByShort++
			}
			if im {
				cell.ByIMatch++
			}
			if an {
				cell.ByANDD++
			}
		}
		if n := done.Add(1); n%2000 == 0 {
			ao.Log.Info("adversarial", "copies_checked", n, "of", len(jobs))
		}
	})
	if firstErr != nil {
		return nil, firstErr
	}
	for i := range res.Cells {
		if res.Cells[i].Copies > 0 {
			res.Cells[i].Rate = float64(res.Cells[i].Detected) / float64(res.Cells[i].Copies)
			res.Cells[i].MeanCosine /= float64(res.Cells[i].Copies)
		}
	}
	var hams []int
	for i := range c.Docs {
		if c.Docs[i].Class == Ham {
			hams = append(hams, i)
		}
	}
	flagged := make([]bool, len(c.Docs))
	parallel(len(hams), ao.Workers, func(k int) {
		v, err := eng.Checker.Evaluate(ctx, c.Docs[hams[k]].Raw)
		if err == nil && v.Action != action.Accept {
			flagged[hams[k]] = true
		}
	})
	res.HamChecked = len(hams)
	res.SpotSigsHam, res.PPJoinHam = seedHam(c, ao, e.queries, hams, sx, ex)
	for _, i := range hams {
		if flagged[i] {
			res.HamFlagged++
			res.FalsePos = append(res.FalsePos, c.Docs[i].Path)
		}
	}
	res.Elapsed = time.Since(start).Round(time.Second).String()
	return res, nil
}

// seedCosine is the exact cosine over unique terms of the PPJoin columns.
const seedCosine = 0.7

// seedHam counts the ham that the SpotSigs index of the reported messages
// finds a match for, and the ham within seedCosine of a reported message
// (a PPJoin+ join of the reported messages and the ham).
func seedHam(c *Corpus, ao AccuracyOptions, reported, hams []int, sx *spotsigs.Index, ex *spotsigs.Extractor) (spot, pp int) {
	var n atomic.Int64
	parallel(len(hams), ao.Workers, func(k int) {
		if ms, _ := sx.Query(ex.Extract(wordTokens(c.Docs[hams[k]].Raw, ao))); len(ms) > 0 {
			n.Add(1)
		}
	})
	recs := make([][]string, 0, len(reported)+len(hams))
	for _, i := range reported {
		recs = append(recs, c.Docs[i].Terms)
	}
	for _, i := range hams {
		recs = append(recs, c.Docs[i].Terms)
	}
	pairs, _ := ppjoin.Join(recs, ppjoin.Options{Measure: ppjoin.Cosine, Threshold: seedCosine})
	flagged := map[int]bool{}
	for _, p := range pairs {
		if p.A < len(reported) && p.B >= len(reported) {
			flagged[p.B] = true
		}
	}
	return int(n.Load()), len(flagged)
}

// copySeed derives the spamgen seed of one copy from its coordinates, so
// that a copy does not change when other kinds or strengths are added.
func copySeed(seed uint64, path string, k spamgen.Kind, s float64, cp int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%d\x00%d", seed, path, k, int(math.Round(s*1000)), cp)
	return h.Sum64()
}

// legitText collects the vocabulary (unique terms of the ham) and a pool
// of ham paragraphs (15 to 120 words) that spammers' insertions and
// appended text are drawn from.
func legitText(c *Corpus) (words, paras []string) {
	seen := map[string]bool{}
	for i := range c.Docs {
		d := &c.Docs[i]
		if d.Class != Ham {
			continue
		}
		for _, t := range d.Terms {
			if !seen[t] {
				seen[t] = true
				words = append(words, t)
			}
		}
		if len(paras) >= 4000 {
			continue
		}
		doc := mime.Parse(d.Raw, mime.Options{})
		for _, p := range strings.Split(strings.ReplaceAll(doc.Text, "\r\n", "\n"), "\n\n") {
			n := len(strings.Fields(p))
			if n >= 15 && n <= 120 && !strings.Contains(p, ">") && !strings.Contains(p, "@") {
				paras = append(paras, p)
			}
		}
	}
	slices.Sort(words)
	return words, paras
}
