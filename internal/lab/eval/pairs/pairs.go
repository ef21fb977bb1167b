// Package pairs measures near-duplicate detection methods the way the ANDD
// paper does (Hajishirzi, Yih & Kolcz, Tables 4–5): every pair of test
// messages is a test instance, positive when both belong to the same
// campaign, and each method is scored by the Max F1 over its decision
// threshold, with the precision and recall at that point.
//
// The methods are ANDD raw similarity (cosine and extended Jaccard of the
// learned vectors), ANDD LSH (384-bit random hyperplanes, 80 weighted
// min-hashes), Charikar's random projection of binary vectors, TF-IDF and
// binary cosine, single I-Match and bagged I-Match, and the seed methods
// SpotSigs (weighted Jaccard of spot signatures) and PPJoin (the exact
// Jaccard of unique terms it joins on).
package pairs

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/spotsigs"
	"github.com/nddmilter/nddmilter/internal/lab/stats"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/ppjoin"
	"github.com/nddmilter/nddmilter/internal/qgram"
)

// Item is one labeled test message.
type Item struct {
	// Name identifies the message in reports (a path, or a synthetic name).
	Name string
	Raw  []byte
	// Cluster is the campaign; messages with equal Cluster are
	// near-duplicates. Negative values mark unrelated messages, each its
	// own cluster.
	Cluster int
}

// Method names, in the order of the table.
const (
	MethodANDDRawCos   = "ANDD-Raw-Cos"
	MethodANDDRawJacc  = "ANDD-Raw-Jacc"
	MethodANDDLSHCos   = "ANDD-LSH-Cos"
	MethodANDDLSHJacc  = "ANDD-LSH-Jacc"
	MethodCharikar     = "Charikar (binary, 384 bits)"
	MethodTFIDF        = "TFIDF-Cos"
	MethodBinary       = "Binary-Cos"
	MethodIMatch       = "I-Match"
	MethodIMatchBagged = "I-Match bagged"
	MethodSpotSigs     = "SpotSigs (weighted Jaccard of spot signatures)"
	MethodPPJoin       = "PPJoin (exact Jaccard of unique terms)"
	// MethodQGram is the docq of Montanari & Puglisi over the distinct
	// 4-grams of the normal form (internal/qgram), MethodQGramSketch its
	// estimate from the engine's q-gram sketches.
	MethodQGram       = "q-grams docq (q = 4)"
	MethodQGramSketch = "q-gram sketch (est. docq)"
)

// AllMethods lists every method in table order.
func AllMethods() []string {
	return []string{MethodANDDRawCos, MethodANDDRawJacc, MethodANDDLSHCos, MethodANDDLSHJacc,
		MethodCharikar, MethodTFIDF, MethodBinary, MethodIMatch, MethodIMatchBagged, MethodSpotSigs, MethodPPJoin,
		MethodQGram, MethodQGramSketch}
}

// Options configure Compare. Zero values select the defaults.
type Options struct {
	// Lexicon gives document frequencies (TF-IDF, ANDD features) and the
	// I-Match lexicons. Default: imatchbag.DefaultLexicon().
	Lexicon *imatchbag.Lexicon
	// Cosine is the ANDD model trained for cosine. Default: the embedded
	// default model.
	Cosine *andd.Model
	// Jaccard is the ANDD model trained for the Jaccard coefficient.
	// Default: andd.DefaultJaccardModel().
	Jaccard *andd.Model
	// K is the number of bagged I-Match lexicons. Default 10.
	K int
	// Methods selects the methods to run. Default: AllMethods().
	Methods []string
	// Workers bounds the parallelism. Default: GOMAXPROCS.
	Workers int
	// Progress, if set, is called as messages are prepared and methods scored.
	Progress func(stage string, done, total int)
}

// Row is the result of one method.
type Row struct {
	Method string
	// Bytes is the size of the method's per-message signature (0 for raw
	// vectors, whose size varies).
	Bytes int
	stats.PRF
}

// sparse is a weighted term vector as sorted term ids.
type sparse struct {
	ids []int32
	ws  []float64
	n2  float64
}

func (a *sparse) dot(b *sparse) float64 {
	dot := 0.0
	i, j := 0, 0
	for i < len(a.ids) && j < len(b.ids) {
		switch {
		case a.ids[i] < b.ids[j]:
			i++
		case a.ids[i] > b.ids[j]:
			j++
		default:
			dot += a.ws[i] * b.ws[j]
			i++
			j++
		}
	}
	return dot
}

func cosine(a, b *sparse) float64 {
	if a.n2 == 0 || b.n2 == 0 {
		return 0
	}
	return a.dot(b) / math.Sqrt(a.n2*b.n2)
}

func jaccard(a, b *sparse) float64 {
	d := a.dot(b)
	den := a.n2 + b.n2 - d
	if den <= 0 {
		return 0
	}
	return d / den
}

// dict assigns term ids; safe for concurrent use.
type dict struct {
	mu  sync.Mutex
	ids map[string]int32
}

// vec converts v, assigning ids to new terms in sorted order (so that ids,
// and the summation order of dot products, do not depend on scheduling
// when vec is called in a fixed order).
func (d *dict) vec(v map[string]float64) sparse {
	type tw struct {
		id int32
		w  float64
	}
	terms := make([]string, 0, len(v))
	for t := range v {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	tws := make([]tw, 0, len(v))
	d.mu.Lock()
	for _, t := range terms {
		w := v[t]
		id, ok := d.ids[t]
		if !ok {
			id = int32(len(d.ids))
			d.ids[t] = id
		}
		tws = append(tws, tw{id, w})
	}
	d.mu.Unlock()
	slices.SortFunc(tws, func(a, b tw) int { return int(a.id) - int(b.id) })
	s := sparse{ids: make([]int32, len(tws)), ws: make([]float64, len(tws))}
	for i, x := range tws {
		s.ids[i], s.ws[i] = x.id, x.w
		s.n2 += x.w * x.w
	}
	return s
}

// prepared holds every representation of one message.
type prepared struct {
	maps                             [4]map[string]float64 // until ids are assigned
	anddCos, anddJacc, tfidf, binary sparse
	skCos, skJacc, skChar            andd.Sketch
	imatch                           imatchbag.Result
	spots                            spotsigs.Vector
	uniq                             []string // sorted
	qprof                            qgram.Profile
	qsk                              qgram.Sketch
}

// Prepared is the set of messages with their representations, ready for
// scoring.
type Prepared struct {
	items []Item
	p     []prepared
	opts  Options
}

func (o *Options) applyDefaults() error {
	var err error
	if o.Lexicon == nil {
		if o.Lexicon, err = imatchbag.DefaultLexicon(); err != nil {
			return fmt.Errorf("default lexicon: %w", err)
		}
	}
	if o.Cosine == nil {
		if o.Cosine, err = andd.DefaultModel(); err != nil {
			return err
		}
	}
	if o.Jaccard == nil {
		if o.Jaccard, err = andd.DefaultJaccardModel(); err != nil {
			return err
		}
	}
	if o.K == 0 {
		o.K = imatchbag.DefaultK
	}
	if len(o.Methods) == 0 {
		o.Methods = AllMethods()
	}
	for _, m := range o.Methods {
		if !slices.Contains(AllMethods(), m) {
			return fmt.Errorf("unknown method %q", m)
		}
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return nil
}

// Prepare parses, tokenizes, weighs and signs every item.
func Prepare(ctx context.Context, items []Item, opts Options) (*Prepared, error) {
	if err := opts.applyDefaults(); err != nil {
		return nil, fmt.Errorf("pairs: %w", err)
	}
	lex := opts.Lexicon
	cosSigner, err := andd.NewSigner(opts.Cosine, lex)
	if err != nil {
		return nil, fmt.Errorf("pairs: cosine model: %w", err)
	}
	jm := opts.Jaccard.Clone()
	if jm.LSH.MinHashes == 0 {
		jm.LSH.MinHashes = 80
	}
	jacSigner, err := andd.NewSigner(jm, lex)
	if err != nil {
		return nil, fmt.Errorf("pairs: jaccard model: %w", err)
	}
	// Charikar: the same 384-bit random projection over binary vectors.
	cm := opts.Cosine.Clone()
	cm.Features, cm.Lambda = []string{"bias"}, []float64{1}
	charSigner, err := andd.NewSigner(cm, nil)
	if err != nil {
		return nil, fmt.Errorf("pairs: charikar: %w", err)
	}
	k := opts.K
	if k < 0 {
		k = -1
	}
	im, err := imatchbag.NewSigner(lex, imatchbag.Options{K: k})
	if err != nil {
		return nil, fmt.Errorf("pairs: i-match: %w", err)
	}
	spots := spotsigs.NewExtractor(spotsigs.Options{})
	qs := qgram.NewSketcher(qgram.SketchOptions{MinGrams: 1})
	n := lex.N()
	d := &dict{ids: map[string]int32{}}
	out := &Prepared{items: items, p: make([]prepared, len(items)), opts: opts}
	var wg sync.WaitGroup
	next := make(chan int)
	var done sync.Mutex
	count := 0
	for range opts.Workers {
		wg.Go(func() {
			for i := range next {
				doc := mime.Parse(items[i].Raw, mime.Options{})
				toks := mime.Tokenize(doc, mime.TokenOptions{})
				uniq := mime.UniqueTerms(toks)
				p := &out.p[i]
				vc := cosSigner.Weigh(doc, toks)
				p.skCos = cosSigner.Sketch(vc)
				vj := jacSigner.Weigh(doc, toks)
				p.skJacc = jacSigner.Sketch(vj)
				p.skChar = charSigner.SketchDocument(doc, toks)
				tf := map[string]float64{}
				for _, t := range toks {
					tf[t.Term]++
				}
				bin := make(map[string]float64, len(tf))
				for t, c := range tf {
					df := lex.DF(t)
					tf[t] = c * math.Log(float64(n+1)/float64(df+1))
					bin[t] = 1
				}
				p.maps = [4]map[string]float64{vc, vj, tf, bin}
				p.imatch = im.Sign(uniq)
				p.uniq = uniq
				words := mime.Tokenize(doc, mime.TokenOptions{MinLen: 1})
				terms := make([]string, len(words))
				for w, t := range words {
					terms[w] = t.Term
				}
				p.spots = spots.Extract(terms)
				p.qprof = qgram.NewProfile(doc.Subject+"\n"+doc.Text, qgram.Options{FoldCase: true})
				p.qsk, _ = qs.Sketch(doc.Subject, "\n", doc.Text)
				if opts.Progress != nil {
					done.Lock()
					count++
					opts.Progress("prepare", count, len(items))
					done.Unlock()
				}
			}
		})
	}
	var cerr error
	for i := range items {
		if err := ctx.Err(); err != nil {
			cerr = err
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if cerr != nil {
		return nil, cerr
	}
	for i := range out.p {
		p := &out.p[i]
		p.anddCos, p.anddJacc = d.vec(p.maps[0]), d.vec(p.maps[1])
		p.tfidf, p.binary = d.vec(p.maps[2]), d.vec(p.maps[3])
		p.maps = [4]map[string]float64{}
	}
	return out, nil
}

// score returns the similarity of items i and j under method m.
func (pp *Prepared) score(m string, i, j int) float64 {
	a, b := &pp.p[i], &pp.p[j]
	switch m {
	case MethodANDDRawCos:
		return cosine(&a.anddCos, &b.anddCos)
	case MethodANDDRawJacc:
		return jaccard(&a.anddJacc, &b.anddJacc)
	case MethodANDDLSHCos:
		return andd.Cosine(a.skCos, b.skCos)
	case MethodANDDLSHJacc:
		return andd.Jaccard(a.skJacc, b.skJacc)
	case MethodCharikar:
		return andd.Cosine(a.skChar, b.skChar)
	case MethodTFIDF:
		return cosine(&a.tfidf, &b.tfidf)
	case MethodBinary:
		return cosine(&a.binary, &b.binary)
	case MethodIMatch:
		sa, sb := bag0(a.imatch), bag0(b.imatch)
		if sa != nil && sb != nil && sa.Hash == sb.Hash {
			return 1
		}
		return 0
	case MethodIMatchBagged:
		// Number of equal coordinates of the extended signatures; Max F1
		// picks the best minimum (the paper's "any coordinate" is ≥ 1).
		eq := 0
		for _, x := range a.imatch.Signatures {
			for _, y := range b.imatch.Signatures {
				if x.Bag == y.Bag && x.Hash == y.Hash {
					eq++
				}
			}
		}
		return float64(eq)
	case MethodSpotSigs:
		return spotsigs.Jaccard(a.spots, b.spots)
	case MethodPPJoin:
		// The measure PPJoin joins on: its filters find exactly the pairs
		// at or above any threshold (internal/ppjoin's tests).
		return ppjoin.Similarity(ppjoin.Jaccard, a.uniq, b.uniq)
	case MethodQGram:
		return qgram.Similarity(a.qprof, b.qprof)
	case MethodQGramSketch:
		return qgram.EstimateSimilarity(&a.qsk, &b.qsk)
	}
	return 0
}

func bag0(r imatchbag.Result) *imatchbag.Signature {
	if len(r.Signatures) > 0 && r.Signatures[0].Bag == 0 {
		return &r.Signatures[0]
	}
	return nil
}

func (pp *Prepared) bytes(m string) int {
	switch m {
	case MethodANDDLSHCos:
		return pp.opts.Cosine.LSH.Bits / 8
	case MethodCharikar:
		return pp.opts.Cosine.LSH.Bits / 8
	case MethodANDDLSHJacc:
		mh := pp.opts.Jaccard.LSH.MinHashes
		if mh == 0 {
			mh = 80
		}
		return 4 * mh
	case MethodIMatch:
		return 16
	case MethodIMatchBagged:
		return 16 * (pp.opts.K + 1)
	case MethodQGramSketch:
		return 8 + 4*qgram.Bins
	}
	return 0
}

// Methods returns the methods selected by the options.
func (pp *Prepared) Methods() []string { return slices.Clone(pp.opts.Methods) }

// Labels returns, for every pair i<j in row-major order (the order of
// Scores), whether it is positive.
func (pp *Prepared) Labels() []bool { return pp.labels() }

func (pp *Prepared) labels() []bool {
	n := len(pp.items)
	out := make([]bool, 0, n*(n-1)/2)
	for i := range n {
		for j := i + 1; j < n; j++ {
			ci, cj := pp.items[i].Cluster, pp.items[j].Cluster
			out = append(out, ci >= 0 && ci == cj)
		}
	}
	return out
}

// Scores returns the scores of method m for every pair i<j in row-major
// order.
func (pp *Prepared) Scores(m string) []float64 {
	n := len(pp.items)
	out := make([]float64, n*(n-1)/2)
	var wg sync.WaitGroup
	rows := make(chan int)
	for range pp.opts.Workers {
		wg.Go(func() {
			for i := range rows {
				off := i*n - i*(i+1)/2 // index of pair (i, i+1)
				for j := i + 1; j < n; j++ {
					out[off+j-i-1] = pp.score(m, i, j)
				}
			}
		})
	}
	for i := range n {
		rows <- i
	}
	close(rows)
	wg.Wait()
	return out
}

// Compare scores every method over all pairs.
func (pp *Prepared) Compare() []Row {
	labels := pp.labels()
	var rows []Row
	for k, m := range pp.opts.Methods {
		r := Row{Method: m, Bytes: pp.bytes(m), PRF: stats.MaxF1(pp.Scores(m), labels)}
		rows = append(rows, r)
		if pp.opts.Progress != nil {
			pp.opts.Progress("score", k+1, len(pp.opts.Methods))
		}
	}
	return rows
}

// Compare prepares items and scores every method over all pairs.
func Compare(ctx context.Context, items []Item, opts Options) ([]Row, error) {
	pp, err := Prepare(ctx, items, opts)
	if err != nil {
		return nil, err
	}
	return pp.Compare(), nil
}

// Stats describes a test set.
type Stats struct {
	Messages, Clusters, Singletons, Pairs, Positives int
}

// Describe counts messages, campaigns (clusters of at least two) and pairs.
func Describe(items []Item) Stats {
	size := map[int]int{}
	s := Stats{Messages: len(items)}
	for _, it := range items {
		if it.Cluster < 0 {
			s.Singletons++
			continue
		}
		size[it.Cluster]++
	}
	for _, c := range size {
		if c >= 2 {
			s.Clusters++
			s.Positives += c * (c - 1) / 2
		} else {
			s.Singletons++
		}
	}
	s.Pairs = len(items) * (len(items) - 1) / 2
	return s
}

// Markdown writes rows as a Markdown table.
func Markdown(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| Method | Bytes | Max F1 | Precision | Recall | Threshold |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		bytes := "—"
		if r.Bytes > 0 {
			bytes = fmt.Sprint(r.Bytes)
		}
		fmt.Fprintf(&b, "| %s | %s | %.3f | %.3f | %.3f | %.3f |\n", r.Method, bytes, r.F1, r.Precision, r.Recall, r.Threshold)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// BandConfig is one band layout: Bands keys of Bits bits each.
type BandConfig struct{ Bands, Bits int }

// BandRow is the measured and analytic behaviour of one band layout.
type BandRow struct {
	BandConfig
	// Analytic is 1-(1-p^r)^b at the threshold cosine, p = 1-acos(θ)/π:
	// the worst-case recall for a pair just at the threshold.
	Analytic float64
	// Recall is the share of near-duplicate pairs whose estimated cosine
	// is at least the threshold that share at least one band key.
	Recall float64
	// Expected is the analytic recall averaged over those pairs, each at
	// its raw ANDD cosine.
	Expected float64
	// Candidates is the share of all pairs that share at least one key:
	// the fraction of the store a query has to verify.
	Candidates float64
	// FalseCandidates is the share of unrelated pairs that share a key
	// (verification work spent on non-duplicates).
	FalseCandidates float64
	// KeyBytes is the index space per message: b keys of 3+⌈r/8⌉ bytes.
	KeyBytes int
}

// Bands measures band layouts on the ANDD cosine sketches: for each
// layout, the recall of the near-duplicate pairs above threshold and the
// candidate rate over all pairs.
func (pp *Prepared) Bands(threshold float64, configs []BandConfig) ([]BandRow, error) {
	labels := pp.labels()
	var out []BandRow
	for _, c := range configs {
		m := pp.opts.Cosine.Clone()
		m.LSH.Bands, m.LSH.BandBits = c.Bands, c.Bits
		s, err := andd.NewSigner(m, nil)
		if err != nil {
			return nil, fmt.Errorf("bands %dx%d: %w", c.Bands, c.Bits, err)
		}
		keys := make([][]string, len(pp.p))
		for i := range pp.p {
			for _, k := range s.BandKeys(pp.p[i].skCos) {
				keys[i] = append(keys[i], string(k))
			}
		}
		n := len(pp.p)
		above, hit, cand, k, neg, negCand := 0, 0, 0, 0, 0, 0
		expected := 0.0
		for i := range n {
			for j := i + 1; j < n; j++ {
				shared := false
				for b := range keys[i] {
					if b < len(keys[j]) && keys[i][b] == keys[j][b] {
						shared = true
						break
					}
				}
				if shared {
					cand++
				}
				if !labels[k] {
					neg++
					if shared {
						negCand++
					}
				}
				if labels[k] && andd.Cosine(pp.p[i].skCos, pp.p[j].skCos) >= threshold {
					above++
					expected += andd.BandRecall(cosine(&pp.p[i].anddCos, &pp.p[j].anddCos), c.Bands, c.Bits)
					if shared {
						hit++
					}
				}
				k++
			}
		}
		r := BandRow{BandConfig: c, Analytic: andd.BandRecall(threshold, c.Bands, c.Bits),
			KeyBytes: c.Bands * (3 + (c.Bits+7)/8)}
		if above > 0 {
			r.Recall = float64(hit) / float64(above)
			r.Expected = expected / float64(above)
		}
		if neg > 0 {
			r.FalseCandidates = float64(negCand) / float64(neg)
		}
		if k > 0 {
			r.Candidates = float64(cand) / float64(k)
		}
		out = append(out, r)
	}
	return out, nil
}

// BandsMarkdown writes band rows as a Markdown table.
func BandsMarkdown(w io.Writer, threshold float64, rows []BandRow) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| b × r | analytic recall at cos %.3f | analytic recall, mean over the pairs | measured recall (near-duplicate pairs ≥ threshold) | candidates (all pairs) | false candidates (unrelated pairs) | key bytes / message |\n", threshold)
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d × %d | %.3f | %.3f | %.3f | %.3f%% | %.3f%% | %d |\n", r.Bands, r.Bits, r.Analytic, r.Expected, r.Recall, 100*r.Candidates, 100*r.FalseCandidates, r.KeyBytes)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
