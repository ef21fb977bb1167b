package peers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/lab/stats"
)

// Detector is one tool under comparison: it learns reported spam and flags
// messages.
type Detector interface {
	Name() string
	// Report learns raw as reported spam.
	Report(ctx context.Context, raw []byte) error
	// Check tells whether raw is flagged as a known campaign.
	Check(ctx context.Context, raw []byte) (bool, error)
	// Settle waits until the reports made so far are visible to Check.
	Settle(ctx context.Context) error
	Close() error
}

// Options configure a comparison. Zero values select the defaults.
type Options struct {
	// Share of the spam reported. Default 0.1.
	Share float64
	// Seed of the split and of the randomized copies. Default 1.
	Seed uint64
	// Parallel is the client parallelism of the batch runs (concurrent
	// requests to rspamd, concurrent Engine calls in nddmilter, like
	// concurrent milter sessions). Default 4 (twice the cores here).
	Parallel int
	// NearDupCosine is the ground-truth threshold. Default 0.9.
	NearDupCosine float64
	// Kinds of randomized copies; one copy per reported spam and kind.
	// Default spamgen.AllKinds(). Strength is spamgen's default.
	Kinds []spamgen.Kind
	// SpeedRuns is the number of speed repetitions; figures are medians.
	// Default 3.
	SpeedRuns int
	// SpeedSample is the number of checked messages of each throughput
	// run. Default 1000.
	SpeedSample int
	// LatencySample is the number of messages checked one at a time in
	// each latency run, the first of the throughput sample. Default 1000.
	LatencySample int
	// Log receives progress. Default: discard.
	Log *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Share <= 0 {
		o.Share = 0.1
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.NearDupCosine <= 0 {
		o.NearDupCosine = DefaultNearDupCosine
	}
	if len(o.Kinds) == 0 {
		o.Kinds = spamgen.AllKinds()
	}
	if o.SpeedRuns <= 0 {
		o.SpeedRuns = 3
	}
	if o.SpeedSample <= 0 {
		o.SpeedSample = 1000
	}
	if o.LatencySample <= 0 {
		o.LatencySample = 1000
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Copy is a randomized copy of a reported spam.
type Copy struct {
	Kind   spamgen.Kind
	Source int // corpus index of the reported spam
	Raw    []byte
	Cosine float64 // similarity to the source (unique terms)
}

// Setup is everything both tools are run on: the corpus, the split, the
// ground truth and the randomized copies.
type Setup struct {
	Corpus []Message
	Split  Split
	// BestCosine[i] is the highest cosine similarity of Corpus[Split.Checked[i]]
	// to any reported spam.
	BestCosine []float64
	Copies     []Copy
	Opts       Options
}

// Prepare splits the corpus, computes the near-duplicate ground truth and
// generates the randomized copies.
func Prepare(ctx context.Context, corpus []Message, opts Options) (*Setup, error) {
	opts = opts.withDefaults()
	s := &Setup{Corpus: corpus, Opts: opts}
	s.Split = SplitReported(corpus, opts.Share, opts.Seed)
	if len(s.Split.Reported) == 0 {
		return nil, errors.New("no spam to report in the corpus")
	}
	terms := make([][]string, len(corpus))
	var firstErr error
	var mu sync.Mutex
	runPool(ctx, len(corpus), opts.Parallel, func(_ context.Context, i int) error {
		t, err := safeTerms(corpus[i].Raw)
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", corpus[i].Path, err)
			}
			mu.Unlock()
		}
		terms[i] = t
		return nil
	})
	if firstErr != nil {
		return nil, fmt.Errorf("ground truth: %w", firstErr)
	}
	refs := make([][]string, len(s.Split.Reported))
	for j, i := range s.Split.Reported {
		refs[j] = terms[i]
	}
	ix := NewNearDupIndex(refs)
	s.BestCosine = make([]float64, len(s.Split.Checked))
	for k, i := range s.Split.Checked {
		_, s.BestCosine[k] = ix.Best(terms[i])
	}
	for j, i := range s.Split.Reported {
		for ki, kind := range opts.Kinds {
			raw, err := spamgen.Mutate(corpus[i].Raw, spamgen.Options{
				Kinds: []spamgen.Kind{kind},
				Seed:  opts.Seed*1_000_003 + uint64(j)*97 + uint64(ki),
			})
			if errors.Is(err, spamgen.ErrEmpty) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("randomize %s (%s): %w", corpus[i].Path, kind, err)
			}
			ct, err := safeTerms(raw)
			if err != nil {
				return nil, fmt.Errorf("ground truth of a copy of %s: %w", corpus[i].Path, err)
			}
			s.Copies = append(s.Copies, Copy{Kind: kind, Source: i, Raw: raw, Cosine: Cosine(terms[i], ct)})
		}
	}
	return s, nil
}

// safeTerms turns a panic of the parser (a bug) into an error, so that one
// message cannot end a 20-minute run.
func safeTerms(raw []byte) (t []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parser panic: %v", r)
		}
	}()
	return Terms(raw), nil
}

// Speed holds one speed repetition.
type Speed struct {
	LearnRate float64       // reports per second (Parallel clients)
	CheckRate float64       // checks per second (Parallel clients)
	P50, P99  time.Duration // latency of one check, one client
	Max       time.Duration // the slowest check, one client
}

// Result is what one Detector did.
type Result struct {
	Name string
	// Learned counts the reports the tool accepted; Lost those it could
	// not use (rspamd: no fuzzy hash; nddmilter: no signature).
	Learned, Lost int
	// Checked[i] tells whether Setup.Corpus[Setup.Split.Checked[i]] was flagged.
	Checked []bool
	// Copies[i] tells whether Setup.Copies[i] was flagged.
	Copies []bool
	// Errors counts failed checks (counted as not flagged) and failed reports.
	Errors int
	// FirstError is the first error seen, for the log.
	FirstError error
	// Detection is the throughput of the detection pass (all checks).
	Detection Speed
	Speeds    []Speed
	// Slowest is the corpus path of the slowest message of the last
	// latency run, SlowestBytes its size.
	Slowest      string
	SlowestBytes int
}

// Run measures d on s: the detection pass (report all, settle, check all
// checked messages and copies), then Opts.SpeedRuns speed repetitions
// (report the reported set again, check a sample with Parallel clients,
// check LatencySample messages one at a time).
func Run(ctx context.Context, s *Setup, d Detector) (*Result, error) {
	o := s.Opts
	r := &Result{Name: d.Name()}
	note := func(err error) {
		r.Errors++
		if r.FirstError == nil {
			r.FirstError = err
		}
	}
	reported := make([][]byte, len(s.Split.Reported))
	for j, i := range s.Split.Reported {
		reported[j] = s.Corpus[i].Raw
	}
	learn := func() (float64, error) {
		var learned, lost atomic.Int64
		var mu sync.Mutex
		el := runPool(ctx, len(reported), o.Parallel, func(ctx context.Context, j int) error {
			err := d.Report(ctx, reported[j])
			switch {
			case err == nil:
				learned.Add(1)
			case errors.Is(err, ErrNotHashable) || errors.Is(err, ErrSkipped):
				lost.Add(1)
			default:
				mu.Lock()
				note(err)
				mu.Unlock()
			}
			return nil
		})
		r.Learned, r.Lost = int(learned.Load()), int(lost.Load())
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if err := d.Settle(ctx); err != nil {
			return 0, err
		}
		return rate(len(reported), el), nil
	}
	check := func(raws [][]byte, parallel int) ([]bool, []time.Duration, time.Duration) {
		flags := make([]bool, len(raws))
		lats := make([]time.Duration, len(raws))
		var mu sync.Mutex
		el := runPool(ctx, len(raws), parallel, func(ctx context.Context, i int) error {
			t0 := time.Now()
			f, err := d.Check(ctx, raws[i])
			lats[i] = time.Since(t0)
			if err != nil {
				mu.Lock()
				note(err)
				mu.Unlock()
			}
			flags[i] = f
			return nil
		})
		return flags, lats, el
	}

	o.Log.Info("detection pass", "tool", d.Name(), "reports", len(reported), "checks", len(s.Split.Checked)+len(s.Copies))
	lr, err := learn()
	if err != nil {
		return nil, fmt.Errorf("%s: learn: %w", d.Name(), err)
	}
	all := make([][]byte, 0, len(s.Split.Checked)+len(s.Copies))
	for _, i := range s.Split.Checked {
		all = append(all, s.Corpus[i].Raw)
	}
	for _, c := range s.Copies {
		all = append(all, c.Raw)
	}
	flags, _, el := check(all, o.Parallel)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r.Checked = flags[:len(s.Split.Checked)]
	r.Copies = flags[len(s.Split.Checked):]
	r.Detection = Speed{LearnRate: lr, CheckRate: rate(len(all), el)}

	// The speed samples: a seeded random sample of the checked messages.
	rng := rand.New(rand.NewPCG(o.Seed, 0x5bee))
	perm := rng.Perm(len(s.Split.Checked))
	sample := func(n int) [][]byte {
		n = min(n, len(perm))
		out := make([][]byte, n)
		for k := range n {
			out[k] = s.Corpus[s.Split.Checked[perm[k]]].Raw
		}
		return out
	}
	slowest := func(lats []time.Duration) {
		k := 0
		for i, l := range lats {
			if l > lats[k] {
				k = i
			}
		}
		if len(lats) > 0 {
			m := &s.Corpus[s.Split.Checked[perm[k]]]
			r.Slowest, r.SlowestBytes = m.Path, len(m.Raw)
		}
	}
	speedSample, latSample := sample(o.SpeedSample), sample(o.LatencySample)
	for run := range o.SpeedRuns {
		o.Log.Info("speed run", "tool", d.Name(), "run", run+1)
		lr, err := learn()
		if err != nil {
			return nil, fmt.Errorf("%s: learn: %w", d.Name(), err)
		}
		_, _, el := check(speedSample, o.Parallel)
		_, lats, _ := check(latSample, 1)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		slowest(lats)
		q := stats.Percentiles(slices.Clone(lats), 0.50, 0.99, 1)
		r.Speeds = append(r.Speeds, Speed{
			LearnRate: lr,
			CheckRate: rate(len(speedSample), el),
			P50:       q[0],
			P99:       q[1],
			Max:       q[2],
		})
	}
	return r, nil
}

// runPool calls fn(ctx, i) for i in [0,n) from parallel goroutines and
// returns the wall time. It stops handing out work when ctx ends.
func runPool(ctx context.Context, n, parallel int, fn func(ctx context.Context, i int) error) time.Duration {
	parallel = max(1, min(parallel, n))
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				_ = fn(ctx, i)
			}
		}()
	}
	wg.Wait()
	return time.Since(t0)
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
