// Package anddtrain learns the feature weights λ of an ANDD model
// (internal/andd) from labeled documents: pairwise preference (the
// paper's eq. 4) minimized with gonum's L-BFGS. The model it returns is
// what the daemon signs with; the optimizer stays in the lab.
package anddtrain

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/optimize"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/mime"
)

// Doc is one labeled training document.
type Doc struct {
	Doc  *mime.Document
	Toks []mime.Token
	// Cluster is the campaign of the document; documents with the same
	// non-negative Cluster are near-duplicates. A negative Cluster marks an
	// unrelated document (a negative, never a near-duplicate of anything).
	Cluster int
}

// Options configure Train. The zero value selects the defaults.
type Options struct {
	// Seed seeds the sampling of training pairs. Default 1.
	Seed int64
	// Pairs is the number N of preference examples (a near-duplicate pair
	// and an unrelated pair each). Default 20000.
	Pairs int
	// L2 is the regularization strength α of (α/2)·‖λ−λ0‖². The loss is
	// invariant to the scale of λ, so the penalty pulls towards the initial
	// weights λ0 rather than towards 0 (which would only shrink λ). Default 0.001.
	L2 float64
	// Scale γ multiplies the similarity difference inside the logistic loss
	// log(1+exp(−γΔ)); Δ lies in [−1, 1] and γ = 1 is the paper's eq. 4.
	// Default 10.
	Scale float64
	// MaxIter bounds the L-BFGS major iterations. Default 150.
	MaxIter int
	// Features lists the features to use. Default: all (andd.FeatureNames).
	Features []string
	// Similarity is the function to train for. Default cosine.
	Similarity string
	// NGram is the k of k-gram terms. Default 1.
	NGram int
	// Init holds the initial λ, aligned with Features. Default: a tf-idf-like
	// weighting (see defaultInit).
	Init []float64
	// Progress, if set, is called after every L-BFGS major iteration.
	Progress func(iter int, loss float64)
}

func (o *Options) applyDefaults() {
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Pairs == 0 {
		o.Pairs = 20000
	}
	if o.L2 == 0 {
		o.L2 = 0.001
	}
	if o.Scale == 0 {
		o.Scale = 10
	}
	if o.MaxIter == 0 {
		o.MaxIter = 150
	}
	if len(o.Features) == 0 {
		o.Features = andd.FeatureNames()
	}
	if o.Similarity == "" {
		o.Similarity = andd.SimCosine
	}
	if o.NGram == 0 {
		o.NGram = 1
	}
}

// defaultInit is the starting point of training: roughly log-tf × idf
// without hash-buster words.
var defaultInitWeights = map[string]float64{
	"bias": 0.1, "tf": 0.5, "idf": 1, "unseen": -0.3, "loc": -0.2,
	"subject": 0.3, "inurl": 0.3, "host": 0.5,
}

// DefaultInit returns the default initial λ for the given features.
func DefaultInit(features []string) []float64 {
	out := make([]float64, len(features))
	for i, f := range features {
		out[i] = defaultInitWeights[f]
	}
	return out
}

// Result reports a training run.
type Result struct {
	Iterations int
	// Loss is the final regularized loss; InitLoss the loss at λ0.
	Loss, InitLoss float64
	// Status is gonum's termination status.
	Status string
}

// trainSet is the training data in compact form: for every document the
// sorted term ids and, per term, the selected features.
type trainSet struct {
	nf    int
	simFn string
	docs  []tdoc
	pairs [][4]int32 // (pa, qa) near-duplicate, (pb, qb) unrelated
	gamma float64
	alpha float64
	init  []float64
}

type tdoc struct {
	ids []int32
	phi []float64 // len(ids) × nf
	// scratch for one evaluation
	w, g []float64
	n2   float64
}

// prepare extracts the features of docs.
func prepare(docs []Doc, df andd.DocFreq, features []string, ngram int) ([]tdoc, error) {
	ex, err := andd.NewFeatureExtractor(df, features, ngram)
	if err != nil {
		return nil, err
	}
	dict := map[string]int32{}
	out := make([]tdoc, len(docs))
	type row struct {
		id  int32
		phi []float64
	}
	for d, td := range docs {
		var rows []row
		ex.Terms(td.Doc, td.Toks, func(term string, phi []float64) {
			id, ok := dict[term]
			if !ok {
				id = int32(len(dict))
				dict[term] = id
			}
			rows = append(rows, row{id: id, phi: slices.Clone(phi)})
		})
		slices.SortFunc(rows, func(a, b row) int { return int(a.id) - int(b.id) })
		t := tdoc{ids: make([]int32, len(rows)), phi: make([]float64, 0, len(rows)*len(features))}
		for i, r := range rows {
			t.ids[i] = r.id
			t.phi = append(t.phi, r.phi...)
		}
		t.w = make([]float64, len(rows))
		t.g = make([]float64, len(rows))
		out[d] = t
	}
	return out, nil
}

// samplePairs draws n balanced preference examples: a near-duplicate pair
// (two documents of one cluster, the cluster drawn uniformly) and an
// unrelated pair (two documents of different clusters, or negatives).
func samplePairs(docs []Doc, n int, seed int64) ([][4]int32, error) {
	byCluster := map[int][]int32{}
	var keys []int
	for i, d := range docs {
		if d.Cluster < 0 {
			continue
		}
		if _, ok := byCluster[d.Cluster]; !ok {
			keys = append(keys, d.Cluster)
		}
		byCluster[d.Cluster] = append(byCluster[d.Cluster], int32(i))
	}
	var multi [][]int32
	for _, k := range keys {
		if len(byCluster[k]) >= 2 {
			multi = append(multi, byCluster[k])
		}
	}
	if len(multi) == 0 {
		return nil, errors.New("no cluster has two documents: no near-duplicate pairs to learn from")
	}
	if len(keys) < 2 && len(docs) == len(byCluster[keys[0]]) { // no second cluster, no negative
		return nil, errors.New("all documents are in one cluster: no unrelated pairs to learn from")
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	out := make([][4]int32, 0, n)
	for len(out) < n {
		c := multi[rng.IntN(len(multi))]
		i := rng.IntN(len(c))
		j := rng.IntN(len(c) - 1)
		if j >= i {
			j++
		}
		a := int32(rng.IntN(len(docs)))
		b := int32(rng.IntN(len(docs)))
		if a == b || (docs[a].Cluster >= 0 && docs[a].Cluster == docs[b].Cluster) {
			continue
		}
		out = append(out, [4]int32{c[i], c[j], a, b})
	}
	return out, nil
}

// Train learns the feature weights λ from labeled documents by pairwise
// preference (paper eq. 4) with L-BFGS, and returns a copy of base (or of
// the default LSH settings when base is nil) carrying the new weights.
// The same inputs and options always give the same model.
func Train(docs []Doc, df andd.DocFreq, base *andd.Model, opts Options) (*andd.Model, *Result, error) {
	opts.applyDefaults()
	if opts.Similarity != andd.SimCosine && opts.Similarity != andd.SimJaccard {
		return nil, nil, fmt.Errorf("train: similarity %q (want cosine or jaccard)", opts.Similarity)
	}
	init := opts.Init
	if init == nil {
		init = DefaultInit(opts.Features)
	}
	if len(init) != len(opts.Features) {
		return nil, nil, fmt.Errorf("train: %d initial weights for %d features", len(init), len(opts.Features))
	}
	tds, err := prepare(docs, df, opts.Features, opts.NGram)
	if err != nil {
		return nil, nil, fmt.Errorf("train: %w", err)
	}
	pairs, err := samplePairs(docs, opts.Pairs, opts.Seed)
	if err != nil {
		return nil, nil, fmt.Errorf("train: %w", err)
	}
	ts := &trainSet{nf: len(opts.Features), simFn: opts.Similarity, docs: tds, pairs: pairs,
		gamma: opts.Scale, alpha: opts.L2, init: slices.Clone(init)}

	// Func and Grad are evaluated at the same points; compute both at once.
	var lastX []float64
	var lastF float64
	lastG := make([]float64, ts.nf)
	eval := func(x []float64) {
		if lastX != nil && slices.Equal(x, lastX) {
			return
		}
		lastX = slices.Clone(x)
		lastF = ts.lossGrad(x, lastG)
	}
	problem := optimize.Problem{
		Func: func(x []float64) float64 { eval(x); return lastF },
		Grad: func(grad, x []float64) { eval(x); copy(grad, lastG) },
	}
	res := &Result{InitLoss: ts.lossGrad(init, make([]float64, ts.nf))}
	settings := &optimize.Settings{
		MajorIterations:   opts.MaxIter,
		GradientThreshold: 1e-7,
		Converger:         &optimize.FunctionConverge{Absolute: 1e-9, Relative: 1e-9, Iterations: 10},
		Recorder:          &progressRecorder{fn: opts.Progress},
	}
	result, err := optimize.Minimize(problem, slices.Clone(init), settings, &optimize.LBFGS{})
	if result == nil {
		return nil, nil, fmt.Errorf("train: l-bfgs: %w", err)
	}
	// A line-search failure near a kink of max(0, ·) still leaves the best
	// point found, which is what we keep.
	x := result.X
	res.Iterations = result.Stats.MajorIterations
	res.Loss = result.F
	res.Status = result.Status.String()
	if err != nil {
		res.Status += " (" + err.Error() + ")"
	}
	if res.Loss > res.InitLoss {
		x, res.Loss = slices.Clone(init), res.InitLoss
	}
	// The similarities do not depend on the scale of λ: store it with unit norm.
	nrm := 0.0
	for _, v := range x {
		nrm += v * v
	}
	nrm = math.Sqrt(nrm)
	lambda := make([]float64, len(x))
	for i, v := range x {
		if nrm > 0 {
			v /= nrm
		}
		lambda[i] = math.Round(v*1e9) / 1e9
	}
	var m *andd.Model
	if base != nil {
		m = base.Clone()
	} else {
		m = &andd.Model{Format: andd.ModelFormat, Version: andd.ModelVersion, Threshold: 0.6,
			LSH: andd.LSH{Bits: 384, MinHashes: 80, Quant: 32, Bands: 32, BandBits: 12, Seed: 1}}
	}
	m.Features = slices.Clone(opts.Features)
	m.Lambda = lambda
	m.Similarity = opts.Similarity
	m.NGram = opts.NGram
	m.Training = &andd.Training{Seed: opts.Seed, Pairs: opts.Pairs, L2: opts.L2, Scale: opts.Scale,
		Iterations: res.Iterations, Loss: res.Loss, Docs: len(docs)}
	if err := m.Validate(); err != nil {
		return nil, nil, fmt.Errorf("train: %w", err)
	}
	return m, res, nil
}

type progressRecorder struct{ fn func(int, float64) }

func (r *progressRecorder) Init() error { return nil }

func (r *progressRecorder) Record(loc *optimize.Location, op optimize.Operation, st *optimize.Stats) error {
	if r.fn != nil && op == optimize.MajorIteration {
		r.fn(st.MajorIterations, loc.F)
	}
	return nil
}

// lossGrad returns the regularized loss at lambda and stores its gradient
// in grad.
func (ts *trainSet) lossGrad(lambda, grad []float64) float64 {
	nf := ts.nf
	for d := range ts.docs {
		t := &ts.docs[d]
		n2 := 0.0
		for i := range t.ids {
			z := 0.0
			row := t.phi[i*nf : i*nf+nf]
			for j, l := range lambda {
				z += l * row[j]
			}
			w := max(z, 0)
			t.w[i] = w
			t.g[i] = 0
			n2 += w * w
		}
		t.n2 = n2
	}
	loss := 0.0
	inv := 1 / float64(len(ts.pairs))
	for _, p := range ts.pairs {
		a, b := &ts.docs[p[0]], &ts.docs[p[1]]
		c, e := &ts.docs[p[2]], &ts.docs[p[3]]
		sPos := ts.sim(a, b)
		sNeg := ts.sim(c, e)
		delta := sPos - sNeg
		// loss log(1+exp(−γΔ)), d/dΔ = −γ·σ(−γΔ)
		m := -ts.gamma * delta
		if m > 30 {
			loss += m
		} else {
			loss += math.Log1p(math.Exp(m))
		}
		dl := -ts.gamma / (1 + math.Exp(-m)) * inv
		ts.simGrad(a, b, sPos, dl)
		ts.simGrad(c, e, sNeg, -dl)
	}
	loss *= inv
	for j := range grad {
		grad[j] = 0
	}
	for d := range ts.docs {
		t := &ts.docs[d]
		for i, g := range t.g {
			if g == 0 || t.w[i] <= 0 {
				continue
			}
			row := t.phi[i*nf : i*nf+nf]
			for j := range grad {
				grad[j] += g * row[j]
			}
		}
	}
	for j, l := range lambda {
		diff := l - ts.init[j]
		loss += ts.alpha / 2 * diff * diff
		grad[j] += ts.alpha * diff
	}
	return loss
}

func dotDocs(p, q *tdoc) float64 {
	dot := 0.0
	i, j := 0, 0
	for i < len(p.ids) && j < len(q.ids) {
		switch {
		case p.ids[i] < q.ids[j]:
			i++
		case p.ids[i] > q.ids[j]:
			j++
		default:
			dot += p.w[i] * q.w[j]
			i++
			j++
		}
	}
	return dot
}

func (ts *trainSet) sim(p, q *tdoc) float64 {
	if p.n2 == 0 || q.n2 == 0 {
		return 0
	}
	dot := dotDocs(p, q)
	if ts.simFn == andd.SimJaccard {
		return dot / (p.n2 + q.n2 - dot)
	}
	return dot / math.Sqrt(p.n2*q.n2)
}

// simGrad adds c·∂s/∂w to the g of both documents, s being sim(p, q).
func (ts *trainSet) simGrad(p, q *tdoc, s, c float64) {
	if p.n2 == 0 || q.n2 == 0 {
		return
	}
	if ts.simFn == andd.SimJaccard {
		dot := dotDocs(p, q)
		den := p.n2 + q.n2 - dot
		// ∂s/∂p_t = q_t(D+P)/D² − 2P·p_t/D²
		k1 := c * (den + dot) / (den * den)
		k2 := c * 2 * dot / (den * den)
		addGrad(p, q, k1, k2)
		addGrad(q, p, k1, k2)
		return
	}
	// ∂s/∂p_t = q_t/(|p||q|) − s·p_t/|p|²
	nn := math.Sqrt(p.n2 * q.n2)
	addGrad(p, q, c/nn, c*s/p.n2)
	addGrad(q, p, c/nn, c*s/q.n2)
}

// addGrad adds k1·q_t − k2·p_t to p.g for every term t of p.
func addGrad(p, q *tdoc, k1, k2 float64) {
	j := 0
	for i, id := range p.ids {
		for j < len(q.ids) && q.ids[j] < id {
			j++
		}
		qt := 0.0
		if j < len(q.ids) && q.ids[j] == id {
			qt = q.w[j]
		}
		p.g[i] += k1*qt - k2*p.w[i]
	}
}
