package eval

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/store"
)

// AccuracyOptions configure RunAccuracy. The zero value selects the
// defaults, which reproduce the paper's protocol.
type AccuracyOptions struct {
	// Seeds is the number of random report sets averaged over (seeds 1..Seeds).
	// Default 5.
	Seeds int
	// ReportShare is the share of the usable spam reported per seed. Default 0.1.
	ReportShare float64
	// K lists the numbers of bagged lexicons of the I-Match rows.
	// Default 0, 1, 2, 5, 10. 0 means the original lexicon only.
	K []int
	// Cosine is the ground-truth near-duplicate threshold (eq. 2). Default 0.9.
	Cosine float64
	// Cost is the cost of a false positive in the utility (eq. 5). Default 100.
	Cost float64
	// SkipEngine leaves out the rows that run the real campaign engine.
	SkipEngine bool
	// SkipSeeds leaves out the SpotSigs and PPJoin rows.
	SkipSeeds bool
	// Engine configures the engine rows (default: the daemon's defaults).
	Engine campaign.Options
	// Lexicon and Model default to the embedded ones.
	Lexicon *imatchbag.Lexicon
	Model   *andd.Model
	// TempDir holds the temporary stores. Default os.TempDir().
	TempDir string
	// Workers run checks in parallel. Default GOMAXPROCS.
	Workers int
	// Log receives progress. Default: discard.
	Log *slog.Logger
}

func (o *AccuracyOptions) defaults() error {
	if o.Seeds <= 0 {
		o.Seeds = 5
	}
	if o.ReportShare <= 0 || o.ReportShare > 1 {
		o.ReportShare = 0.1
	}
	if len(o.K) == 0 {
		o.K = []int{0, 1, 2, 5, 10}
	}
	if o.Cosine <= 0 {
		o.Cosine = 0.9
	}
	if o.Cost <= 0 {
		o.Cost = 100
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Lexicon == nil {
		lex, err := imatchbag.DefaultLexicon()
		if err != nil {
			return fmt.Errorf("load lexicon: %w", err)
		}
		o.Lexicon = lex
	}
	if o.Model == nil {
		m, err := andd.DefaultModel()
		if err != nil {
			return fmt.Errorf("load model: %w", err)
		}
		o.Model = m
	}
	return nil
}

// Row is one configuration's result, averaged over seeds.
type Row struct {
	Name string `json:"name"`
	// K is the number of bagged lexicons (I-Match rows), -1 otherwise.
	K int `json:"k"`
	// Recall is the paper's near-duplicate recall (eq. 3): per reported
	// query with at least one checked neighbour of cosine ≥ 0.9, the share
	// of those neighbours found as duplicates of the query, averaged.
	Recall float64 `json:"recall"`
	// RecallStd is the standard deviation of Recall across seeds.
	RecallStd float64 `json:"recall_std"`
	// RecallFlagged is the share of those neighbours flagged at all (by any
	// campaign), averaged like Recall.
	RecallFlagged float64 `json:"recall_flagged"`
	// SpamFlagged and HamFlagged count checked messages flagged (mean over
	// seeds); SpamChecked and HamChecked are the numbers checked.
	SpamFlagged float64 `json:"spam_flagged"`
	SpamChecked float64 `json:"spam_checked"`
	HamFlagged  float64 `json:"ham_flagged"`
	HamChecked  float64 `json:"ham_checked"`
	// Utility is SpamFlagged − Cost × HamFlagged.
	Utility float64 `json:"utility"`
	// QueryUtility is the paper's utility (eq. 5) per reported query:
	// spam found as its duplicates − Cost × ham found, averaged.
	QueryUtility float64 `json:"query_utility"`
	// Actions counts checked messages by action (engine rows only), mean
	// over seeds, split by class: "spam/tag", "ham/accept", ...
	Actions map[string]float64 `json:"actions,omitempty"`
	// FalsePositives lists every ham message flagged under any seed, with
	// the number of seeds that flagged it.
	FalsePositives []FalsePositive `json:"false_positives,omitempty"`
}

// FalsePositive is a ham message flagged, and by how many seeds.
type FalsePositive struct {
	Path  string `json:"path"`
	Seeds int    `json:"seeds"`
}

// AccuracyResult is the outcome of RunAccuracy.
type AccuracyResult struct {
	Corpus       string  `json:"corpus"`
	Messages     int     `json:"messages"`
	Spam         int     `json:"spam"`
	Ham          int     `json:"ham"`
	UsableSpam   int     `json:"usable_spam"` // ≥ 5 unique terms, not a trivial duplicate
	TrivialDups  int     `json:"trivial_duplicates"`
	ShortSpam    int     `json:"short_spam"`
	Seeds        int     `json:"seeds"`
	ReportShare  float64 `json:"report_share"`
	Queries      float64 `json:"queries"`        // reported per seed
	QueriesWithN float64 `json:"queries_with_n"` // of which with ≥ 1 cosine neighbour
	Neighbours   float64 `json:"neighbours"`     // mean neighbours per such query
	Cosine       float64 `json:"cosine"`
	Cost         float64 `json:"cost"`
	Rows         []Row   `json:"rows"`
	Elapsed      string  `json:"elapsed"`
}

// experiment is the per-seed split shared by all rows.
type experiment struct {
	queries []int         // reported documents
	checked []int         // every other document taking part
	isQuery []bool        // by document
	nbrs    map[int][]int // query → checked neighbours (cosine ≥ threshold)
}

// outcome is one row's result for one seed.
type outcome struct {
	recall, recallFlagged   float64
	spamFlagged, hamFlagged int
	spamChecked, hamChecked int
	queryUtility            float64
	actions                 map[string]int
	fps                     []string
}

// RunAccuracy runs the near-duplicate experiment on c.
func RunAccuracy(ctx context.Context, c *Corpus, opts AccuracyOptions) (*AccuracyResult, error) {
	start := time.Now()
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	res := &AccuracyResult{Corpus: c.Dir, Messages: len(c.Docs), Spam: c.Count(Spam), Ham: c.Count(Ham),
		Seeds: opts.Seeds, ReportShare: opts.ReportShare, Cosine: opts.Cosine, Cost: opts.Cost}
	var usableSpam []int
	for i := range c.Docs {
		d := &c.Docs[i]
		if d.Class != Spam {
			continue
		}
		switch {
		case d.Dup >= 0:
			res.TrivialDups++
		case len(d.Terms) < MinUnique:
			res.ShortSpam++
		default:
			usableSpam = append(usableSpam, i)
		}
	}
	res.UsableSpam = len(usableSpam)
	if len(usableSpam) == 0 {
		return nil, fmt.Errorf("corpus %s: no usable spam", c.Dir)
	}
	opts.Log.Info("ground truth: cosine neighbours", "usable_spam", len(usableSpam))
	nbrAll := neighbours(c, usableSpam, opts.Cosine, opts.Workers)

	exps := make([]*experiment, opts.Seeds)
	for s := range exps {
		exps[s] = split(c, usableSpam, nbrAll, uint64(s+1), opts.ReportShare)
		res.Queries += float64(len(exps[s].queries)) / float64(opts.Seeds)
		n, tot := 0, 0
		for _, q := range exps[s].queries {
			if k := len(exps[s].nbrs[q]); k > 0 {
				n++
				tot += k
			}
		}
		res.QueriesWithN += float64(n) / float64(opts.Seeds)
		if n > 0 {
			res.Neighbours += float64(tot) / float64(n) / float64(opts.Seeds)
		}
	}

	// I-Match rows: signatures in memory.
	for _, k := range opts.K {
		kk := k
		if kk == 0 {
			kk = -1 // imatchbag: negative = no bags
		}
		signer, err := imatchbag.NewSigner(opts.Lexicon, imatchbag.Options{K: kk})
		if err != nil {
			return nil, fmt.Errorf("I-Match signer K=%d: %w", k, err)
		}
		keys := make([][]string, len(c.Docs))
		parallel(len(c.Docs), opts.Workers, func(i int) {
			for _, s := range signer.Sign(c.Docs[i].Terms).Signatures {
				keys[i] = append(keys[i], string(s.Key()))
			}
		})
		name := "I-Match, original lexicon"
		if k > 0 {
			name = fmt.Sprintf("I-Match, 1 + %d bagged lexicons", k)
		}
		opts.Log.Info("row", "name", name)
		row := averageRows(name, k, opts, exps, func(e *experiment) outcome { return keyMatch(c, e, keys, nil, opts.Cost) })
		res.Rows = append(res.Rows, row)
	}

	// ANDD alone: band keys, candidates verified by the estimated cosine.
	as, err := andd.NewSigner(opts.Model, opts.Lexicon)
	if err != nil {
		return nil, fmt.Errorf("ANDD signer: %w", err)
	}
	sketches := make([]andd.Sketch, len(c.Docs))
	bkeys := make([][]string, len(c.Docs))
	parallel(len(c.Docs), opts.Workers, func(i int) {
		doc := mime.Parse(c.Docs[i].Raw, opts.Engine.Mime)
		toks := mime.Tokenize(doc, opts.Engine.Tokens)
		v := as.Weigh(doc, toks)
		if len(v) == 0 {
			return
		}
		sk := as.Sketch(v)
		sketches[i] = sk
		for _, k := range as.BandKeys(sk) {
			bkeys[i] = append(bkeys[i], string(k))
		}
	})
	th := as.Threshold()
	verify := func(a, b int) bool { return andd.Cosine(sketches[a], sketches[b]) >= th }
	opts.Log.Info("row", "name", "ANDD alone")
	res.Rows = append(res.Rows, averageRows(fmt.Sprintf("ANDD alone (band keys, est. cosine ≥ %.2f)", th), -1, opts, exps,
		func(e *experiment) outcome { return keyMatch(c, e, bkeys, verify, opts.Cost) }))
	if !opts.SkipSeeds {
		res.Rows = append(res.Rows, seedRows(c, exps, opts)...)
		res.Rows = append(res.Rows, qgramRows(c, exps, opts)...)
	}

	if !opts.SkipEngine {
		for _, cfg := range []struct {
			name string
			mod  func(o *campaign.Options)
		}{
			{"daemon defaults, I-Match only (engine + Badger)", func(o *campaign.Options) { o.DisableANDD, o.DisableQGram = true, true }},
			{"daemon defaults without q-grams: I-Match + ANDD (engine + Badger)", func(o *campaign.Options) { o.DisableQGram = true }},
			{"daemon defaults: I-Match + ANDD + q-grams (engine + Badger)", func(o *campaign.Options) {}},
		} {
			eo := opts.Engine
			cfg.mod(&eo)
			opts.Log.Info("row", "name", cfg.name)
			var firstErr error
			var mu sync.Mutex
			row := averageRows(cfg.name, -1, opts, exps, func(e *experiment) outcome {
				o, err := engineMatch(ctx, c, e, eo, opts)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
				return o
			})
			if firstErr != nil {
				return nil, firstErr
			}
			res.Rows = append(res.Rows, row)
		}
	}
	res.Elapsed = time.Since(start).Round(time.Second).String()
	return res, nil
}

// reportedSplit picks the reported share of the corpus's usable spam
// (split, without neighbours), for the experiments that make copies of
// the reported messages.
func reportedSplit(c *Corpus, seed uint64, share float64) (*experiment, error) {
	var usable []int
	for i := range c.Docs {
		if c.Docs[i].Class == Spam && c.Docs[i].usable() {
			usable = append(usable, i)
		}
	}
	if len(usable) == 0 {
		return nil, fmt.Errorf("corpus %s: no usable spam", c.Dir)
	}
	return split(c, usable, nil, seed, share), nil
}

// split draws seed's reported queries and the checked documents. Checked
// are the other usable spam and every ham message (short or duplicate ham
// included: a false positive on any of them counts).
func split(c *Corpus, usableSpam []int, nbrAll map[int][]int, seed uint64, share float64) *experiment {
	rng := rand.New(rand.NewPCG(seed, 0x6e64646d696c7465))
	perm := slices.Clone(usableSpam)
	rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	nq := max(1, int(math.Round(share*float64(len(perm)))))
	e := &experiment{queries: perm[:nq], isQuery: make([]bool, len(c.Docs)), nbrs: map[int][]int{}}
	slices.Sort(e.queries)
	for _, q := range e.queries {
		e.isQuery[q] = true
	}
	usable := make([]bool, len(c.Docs))
	for _, i := range usableSpam {
		usable[i] = true
	}
	for i := range c.Docs {
		if e.isQuery[i] {
			continue
		}
		if c.Docs[i].Class == Ham || usable[i] {
			e.checked = append(e.checked, i)
		}
	}
	for _, q := range e.queries {
		for _, j := range nbrAll[q] {
			if !e.isQuery[j] {
				e.nbrs[q] = append(e.nbrs[q], j)
			}
		}
	}
	return e
}

// neighbours returns, for each document of from, the usable spam and the
// ham with ≥ MinUnique terms whose cosine with it is at least th.
func neighbours(c *Corpus, from []int, th float64, workers int) map[int][]int {
	post := map[string][]int32{}
	var cand []int
	for i := range c.Docs {
		d := &c.Docs[i]
		if len(d.Terms) < MinUnique || (d.Class == Spam && d.Dup >= 0) {
			continue
		}
		cand = append(cand, i)
		for _, t := range d.Terms {
			post[t] = append(post[t], int32(i))
		}
	}
	out := make([][]int, len(from))
	parallel(len(from), workers, func(k int) {
		q := from[k]
		qt := c.Docs[q].Terms
		common := map[int32]int{}
		for _, t := range qt {
			for _, j := range post[t] {
				common[j]++
			}
		}
		for j, n := range common {
			if int(j) == q {
				continue
			}
			if float64(n)/math.Sqrt(float64(len(qt))*float64(len(c.Docs[j].Terms))) >= th {
				out[k] = append(out[k], int(j))
			}
		}
		slices.Sort(out[k])
	})
	m := make(map[int][]int, len(from))
	for k, q := range from {
		m[q] = out[k]
	}
	return m
}

// keyMatch finds, for each query, the checked documents sharing a key
// with it (verified by verify when not nil).
func keyMatch(c *Corpus, e *experiment, keys [][]string, verify func(a, b int) bool, cost float64) outcome {
	index := map[string][]int{}
	for _, j := range e.checked {
		for _, k := range keys[j] {
			index[k] = append(index[k], j)
		}
	}
	return findMatch(c, e, func(q int, f map[int]bool) {
		for _, k := range keys[q] {
			for _, j := range index[k] {
				if f[j] || (verify != nil && !verify(q, j)) {
					continue
				}
				f[j] = true
			}
		}
	}, cost)
}

// findMatch scores an experiment whose reported message q is found to
// match the checked messages that find adds to its set.
func findMatch(c *Corpus, e *experiment, find func(q int, found map[int]bool), cost float64) outcome {
	flagged := map[int]bool{}
	found := make(map[int]map[int]bool, len(e.queries))
	var o outcome
	for _, q := range e.queries {
		f := map[int]bool{}
		find(q, f)
		for j := range f {
			flagged[j] = true
		}
		found[q] = f
		spam, ham := 0, 0
		for j := range f {
			if c.Docs[j].Class == Spam {
				spam++
			} else {
				ham++
			}
		}
		o.queryUtility += float64(spam) - cost*float64(ham)
	}
	o.queryUtility /= float64(len(e.queries))
	o.recall, o.recallFlagged = recalls(e, func(q, j int) bool { return found[q][j] }, func(j int) bool { return flagged[j] })
	for _, j := range e.checked {
		count(&o, c, j, flagged[j])
	}
	return o
}

func count(o *outcome, c *Corpus, j int, flagged bool) {
	if c.Docs[j].Class == Spam {
		o.spamChecked++
		if flagged {
			o.spamFlagged++
		}
		return
	}
	o.hamChecked++
	if flagged {
		o.hamFlagged++
		o.fps = append(o.fps, c.Docs[j].Path)
	}
}

// recalls computes eq. 3 averaged over queries with neighbours, with
// "found as a duplicate of q" given by found, and the looser share of
// neighbours flagged at all.
func recalls(e *experiment, found func(q, j int) bool, flagged func(j int) bool) (recall, anyFlag float64) {
	n := 0
	for _, q := range e.queries {
		nb := e.nbrs[q]
		if len(nb) == 0 {
			continue
		}
		f, a := 0, 0
		for _, j := range nb {
			if found(q, j) {
				f++
			}
			if flagged(j) {
				a++
			}
		}
		recall += float64(f) / float64(len(nb))
		anyFlag += float64(a) / float64(len(nb))
		n++
	}
	if n == 0 {
		return 0, 0
	}
	return recall / float64(n), anyFlag / float64(n)
}

// engineMatch reports the queries to a real engine over a fresh Badger
// store and evaluates every checked message (Evaluate: the verdict of
// Check without counting hits, so the order of checks does not matter).
func engineMatch(ctx context.Context, c *Corpus, e *experiment, eo campaign.Options, opts AccuracyOptions) (outcome, error) {
	var o outcome
	dir, err := os.MkdirTemp(opts.TempDir, "nddmilter-eval-")
	if err != nil {
		return o, fmt.Errorf("temp store: %w", err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(dir, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return o, fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	model := opts.Model
	if eo.DisableANDD {
		model = nil
	}
	eng, err := campaign.New(st, opts.Lexicon, model, eo, nil)
	if err != nil {
		return o, fmt.Errorf("engine: %w", err)
	}
	for n, q := range e.queries {
		if _, err := eng.Ingester.Report(ctx, c.Docs[q].Raw, store.KindSpam, fmt.Sprintf("user%d@eval.example", n)); err != nil {
			return o, fmt.Errorf("report %s: %w", c.Docs[q].Path, err)
		}
	}
	verdicts := make([]campaign.Verdict, len(c.Docs))
	var mu sync.Mutex
	var firstErr error
	todo := append(slices.Clone(e.queries), e.checked...)
	parallel(len(todo), opts.Workers, func(k int) {
		i := todo[k]
		v, err := eng.Checker.Evaluate(ctx, c.Docs[i].Raw)
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = fmt.Errorf("check %s: %w", c.Docs[i].Path, err)
			}
			mu.Unlock()
		}
		verdicts[i] = v
	})
	if firstErr != nil {
		return o, firstErr
	}
	flagged := func(j int) bool { return verdicts[j].Action != action.Accept }
	// found as a duplicate of q: flagged as a member of q's campaign
	found := func(q, j int) bool {
		return flagged(j) && verdicts[q].Campaign != 0 && verdicts[j].Campaign == verdicts[q].Campaign
	}
	o.recall, o.recallFlagged = recalls(e, found, flagged)
	o.actions = map[string]int{}
	for _, j := range e.checked {
		count(&o, c, j, flagged(j))
		o.actions[c.Docs[j].Class.String()+"/"+verdicts[j].Action.String()]++
	}
	for _, q := range e.queries {
		spam, ham := 0, 0
		for _, j := range e.checked {
			if found(q, j) {
				if c.Docs[j].Class == Spam {
					spam++
				} else {
					ham++
				}
			}
		}
		o.queryUtility += float64(spam) - opts.Cost*float64(ham)
	}
	o.queryUtility /= float64(len(e.queries))
	return o, nil
}

// averageRows runs f for every seed and averages.
func averageRows(name string, k int, opts AccuracyOptions, exps []*experiment, f func(*experiment) outcome) Row {
	r := Row{Name: name, K: k}
	n := float64(len(exps))
	var recalls []float64
	fps := map[string]int{}
	for _, e := range exps {
		o := f(e)
		recalls = append(recalls, o.recall)
		r.Recall += o.recall / n
		r.RecallFlagged += o.recallFlagged / n
		r.SpamFlagged += float64(o.spamFlagged) / n
		r.SpamChecked += float64(o.spamChecked) / n
		r.HamFlagged += float64(o.hamFlagged) / n
		r.HamChecked += float64(o.hamChecked) / n
		r.QueryUtility += o.queryUtility / n
		if o.actions != nil {
			if r.Actions == nil {
				r.Actions = map[string]float64{}
			}
			for a, v := range o.actions {
				r.Actions[a] += float64(v) / n
			}
		}
		for _, p := range o.fps {
			fps[p]++
		}
	}
	for p, n := range fps {
		r.FalsePositives = append(r.FalsePositives, FalsePositive{Path: p, Seeds: n})
	}
	slices.SortFunc(r.FalsePositives, func(a, b FalsePositive) int { return strings.Compare(a.Path, b.Path) })
	r.Utility = r.SpamFlagged - opts.Cost*r.HamFlagged
	for _, x := range recalls {
		r.RecallStd += (x - r.Recall) * (x - r.Recall) / n
	}
	r.RecallStd = math.Sqrt(r.RecallStd)
	return r
}

// parallel calls f(0..n-1) on workers goroutines.
func parallel(n, workers int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
