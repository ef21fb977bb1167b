package andd

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// bandSalt seeds the band layout.
const bandSalt = 0x3c6ef372fe94f82b

// Signer weights documents and sketches them. Safe for concurrent use.
type Signer struct {
	model *Model
	// lambda[j] is the weight of feature featIdx[j].
	lambda  []float64
	featIdx []int
	ex      *extractor
	// lam[f] is the weight of feature f (0 for features the model lacks).
	lam [numFeatures]float64
	// bandPos[i] lists the sketch bit positions of band i.
	bandPos [][]uint16
	// pool recycles extraction buffers between messages.
	pool sync.Pool
}

// NewSigner returns a Signer for model m and document frequencies df. A nil
// df gives every term the same idf (0.5) and marks none as unseen.
func NewSigner(m *Model, df DocFreq) (*Signer, error) {
	if m == nil {
		return nil, fmt.Errorf("andd: nil model")
	}
	m = m.Clone()
	m.applyDefaults()
	if err := m.Validate(); err != nil {
		return nil, err
	}
	s := &Signer{model: m, lambda: m.Lambda}
	hosts := false
	for _, f := range m.Features {
		j := featureIndex(f)
		s.featIdx = append(s.featIdx, j)
		s.lam[j] = m.Lambda[len(s.featIdx)-1]
		hosts = hosts || j == fHost
	}
	s.ex = newExtractor(df, m.NGram, hosts)
	if df != nil {
		s.ex.vocab = newVocab(df, m.LSH.Seed)
		s.ex.seed = m.LSH.Seed
	}
	// A term whose weight stays ≤ 0 whatever its df needs no df look-up.
	s.ex.setLambda(&s.lam, s.idfGroupMax())
	s.bandPos = bandLayout(m.LSH.Bits, m.LSH.Bands, m.LSH.BandBits, m.LSH.Seed)
	return s, nil
}

// bandLayout assigns r bit positions to each of b bands: consecutive
// slices of seeded random permutations of 0..m-1, so that bands are
// disjoint when b·r ≤ m and overlap as little as possible otherwise.
func bandLayout(m, b, r int, seed uint64) [][]uint16 {
	x := seed ^ bandSalt
	var pool []uint16
	out := make([][]uint16, b)
	for i := range out {
		out[i] = make([]uint16, r)
		for k := range r {
			if len(pool) == 0 {
				pool = make([]uint16, m)
				for p := range pool {
					pool[p] = uint16(p)
				}
				for p := m - 1; p > 0; p-- {
					x = splitmix64(x)
					q := int((x >> 32) * uint64(p+1) >> 32)
					pool[p], pool[q] = pool[q], pool[p]
				}
			}
			// A refill in the middle of a band may offer a position the
			// band already has: take the first one it does not have.
			q := 0
			for q < len(pool)-1 && slices.Contains(out[i][:k], pool[q]) {
				q++
			}
			pool[0], pool[q] = pool[q], pool[0]
			out[i][k] = pool[0]
			pool = pool[1:]
		}
	}
	return out
}

func (s *Signer) getScratch() *scratch {
	if sc, ok := s.pool.Get().(*scratch); ok {
		return sc
	}
	return &scratch{}
}

// hashOf is termHash(term, seed), read from the vocabulary when features
// found the term there.
func (s *Signer) hashOf(term string, sc *scratch) uint64 {
	if sc.hashOK {
		return sc.hash
	}
	return termHash(term, s.model.LSH.Seed)
}

// DocFreq returns the document frequencies the Signer was made with (nil
// if none).
func (s *Signer) DocFreq() DocFreq { return s.ex.df }

// Model returns (a copy of) the signer's model.
func (s *Signer) Model() *Model { return s.model.Clone() }

// z is the linear combination of the features. The explicit conversion
// rounds each product, so no architecture fuses it into a multiply-add and
// every server computes the same weights (sketches are a wire format).
func (s *Signer) z(phi *[numFeatures]float64) float64 {
	z := 0.0
	for f := range numFeatures {
		z += float64(s.lam[f] * phi[f])
	}
	return z
}

// weight is the clipped linear combination of the features.
func (s *Signer) weight(phi *[numFeatures]float64) float64 {
	return max(s.z(phi), 0)
}

// idfGroupMax bounds the contribution of the df-dependent features
// (idf = x ∈ [0, 1], idf2 = x², unseen ∈ {0, 1} with x = 1 when unseen,
// and x = 1 for host pseudo-terms) from above, plus a small margin.
func (s *Signer) idfGroupMax() float64 {
	var a, b, c float64
	for j, f := range s.featIdx {
		switch f {
		case fIDF:
			a = s.lambda[j]
		case fIDF2:
			b = s.lambda[j]
		case fUnseen:
			c = s.lambda[j]
		}
	}
	best := max(0, a+b, a+b+c) // x = 0, x = 1 seen, x = 1 unseen
	if b < 0 {
		if x := -a / (2 * b); x > 0 && x < 1 {
			best = max(best, a*x+b*x*x)
		}
	}
	return best + 1e-9
}

// Weigh returns the weighted vector of a document: every term whose
// weight max(0, Σ λj φj) is positive.
func (s *Signer) Weigh(doc *mime.Document, toks []mime.Token) Vector {
	v := make(Vector, len(toks)/2+1)
	sc := s.getScratch()
	defer s.pool.Put(sc)
	s.ex.extract(doc, toks, sc, func(term string, _ *[numFeatures]float64, z float64) {
		if z > 0 {
			v[term] = z
		}
	})
	return v
}

// Sketch returns the sketch of a weighted vector (empty if v is empty).
func (s *Signer) Sketch(v Vector) Sketch {
	sc := s.getScratch()
	defer s.pool.Put(sc)
	terms, ws := sc.terms[:0], sc.ws[:0]
	for t, w := range v {
		terms = append(terms, t)
		ws = append(ws, w)
	}
	sk := s.sketchTerms(terms, ws, nil, sc)
	clear(terms)
	sc.terms, sc.ws = terms[:0], ws[:0]
	return sk
}

// SketchDocument weighs a document and sketches it in one pass, without
// building the Vector map; the sketch equals Sketch(Weigh(doc, toks)).
func (s *Signer) SketchDocument(doc *mime.Document, toks []mime.Token) Sketch {
	sc := s.getScratch()
	defer s.pool.Put(sc)
	terms, ws, hs := sc.terms[:0], sc.ws[:0], sc.hashes[:0]
	s.ex.extract(doc, toks, sc, func(term string, _ *[numFeatures]float64, z float64) {
		if z > 0 {
			terms = append(terms, term)
			ws = append(ws, z)
			hs = append(hs, s.hashOf(term, sc))
		}
	})
	sk := s.sketchTerms(terms, ws, hs, sc)
	sc.hashes = hs[:0]
	clear(terms) // do not keep the message's strings alive in the pool
	sc.terms, sc.ws = terms[:0], ws[:0]
	return sk
}

// SketchTerms is SketchDocument for a document analyzed by mime.Analyze:
// the sketch equals SketchDocument(doc, mime.Tokenize(doc, t.Options)),
// but the terms and their statistics are not recomputed from tokens. A
// model of k-grams (k > 1) needs the token order, so the document is then
// tokenized again.
func (s *Signer) SketchTerms(doc *mime.Document, t *mime.Terms) Sketch {
	return s.SketchTermsDF(doc, t, nil)
}

// SketchTermsDF is SketchTerms with the document frequencies of the terms
// given: df[i] is that of t.Sorted[i], as the Signer's DocFreq (see
// DocFreq) reports it, 0 for an unseen term. It saves a look-up per term
// when the caller already has them (imatchbag.Signer.SignSortedDF reads them in
// the look-up of the I-Match lexicon classes). A df of another length
// than t.Sorted is ignored.
func (s *Signer) SketchTermsDF(doc *mime.Document, t *mime.Terms, df []int32) Sketch {
	if t == nil {
		return Sketch{}
	}
	if len(df) != len(t.Sorted) {
		df = nil
	}
	if s.ex.ngram > 1 {
		if doc == nil {
			return Sketch{}
		}
		return s.SketchDocument(doc, mime.Tokenize(doc, t.Options))
	}
	sc := s.getScratch()
	defer s.pool.Put(sc)
	terms, ws, hs := sc.terms[:0], sc.ws[:0], sc.hashes[:0]
	s.ex.extractTerms(doc, t, df, sc, func(term string, _ *[numFeatures]float64, z float64) {
		if z > 0 {
			terms = append(terms, term)
			ws = append(ws, z)
			hs = append(hs, s.hashOf(term, sc))
		}
	})
	sk := s.sketchTerms(terms, ws, hs, sc)
	sc.hashes = hs[:0]
	clear(terms)
	sc.terms, sc.ws = terms[:0], ws[:0]
	return sk
}

// WeighTerms is Weigh for a document analyzed by mime.Analyze; it equals
// Weigh(doc, mime.Tokenize(doc, t.Options)).
func (s *Signer) WeighTerms(doc *mime.Document, t *mime.Terms) Vector {
	if t == nil {
		return Vector{}
	}
	if s.ex.ngram > 1 {
		if doc == nil {
			return Vector{}
		}
		return s.Weigh(doc, mime.Tokenize(doc, t.Options))
	}
	v := make(Vector, len(t.Sorted)/2+1)
	sc := s.getScratch()
	defer s.pool.Put(sc)
	s.ex.extractTerms(doc, t, nil, sc, func(term string, _ *[numFeatures]float64, z float64) {
		if z > 0 {
			v[term] = z
		}
	})
	return v
}

// BandKeys returns the keys under which the store indexes a sketch; two
// sketches above the model's similarity threshold share at least one key
// with high probability (docs/design/andd.md gives the collision probability).
//
// Key i is: SketchVersion, 'A', byte(i), then the r bits of band i packed
// little-endian into ⌈r/8⌉ bytes. An empty sketch, or one of another size
// than the model's, has no keys.
func (s *Signer) BandKeys(sk Sketch) [][]byte {
	if len(sk.Bits)*64 != s.model.LSH.Bits {
		return nil
	}
	r := s.model.LSH.BandBits
	nb := (r + 7) / 8
	var keys [][]byte
	var buf []byte
	if kl := 3 + nb; len(s.bandPos) <= blockBands && kl <= blockKeyLen {
		// The keys and their bytes in one allocation.
		b := new(bandKeyBlock)
		n := len(s.bandPos)
		keys, buf = b.keys[:n:n], b.buf[:n*kl]
	} else {
		keys = make([][]byte, len(s.bandPos))
		buf = make([]byte, len(s.bandPos)*kl)
	}
	// The sketch's words in an array of a power-of-two length, indexed
	// without a bounds check (Bits ≤ 512 in the usual layouts).
	var words [8]uint64
	small := len(sk.Bits) <= len(words)
	copy(words[:], sk.Bits)
	for i, pos := range s.bandPos {
		k := buf[i*(3+nb) : (i+1)*(3+nb) : (i+1)*(3+nb)]
		k[0] = SketchVersion
		k[1] = 'A'
		k[2] = byte(i)
		// Bit j of the band is bit j of v (r ≤ 64), without a branch on
		// the sketch's bits.
		var v uint64
		if small {
			v = bandBits(&words, pos)
		} else {
			for j, p := range pos {
				v |= (sk.Bits[p/64] >> (p % 64) & 1) << (j & 63)
			}
		}
		bits := k[3:]
		for b := range bits {
			bits[b] = byte(v >> (8 * (b & 7)))
		}
		keys[i] = k
	}
	return keys
}

// bandBits packs the bits of a sketch (its words w) at positions pos:
// bit j of the result is bit pos[j].
func bandBits(w *[8]uint64, pos []uint16) uint64 {
	var v uint64
	for j, p := range pos {
		v |= (w[p/64%8] >> (p % 64) & 1) << (j & 63)
	}
	return v
}

// bandKeyBlock holds the band keys of a sketch of the usual layouts (the
// default 32 bands of 12 bits) and their bytes, allocated together.
type bandKeyBlock struct {
	keys [blockBands][]byte
	buf  [blockBands * blockKeyLen]byte
}

const (
	blockBands  = 32
	blockKeyLen = 8
)

// Threshold is the estimated cosine above which two sketches are considered
// near-duplicates by the model.
func (s *Signer) Threshold() float64 { return s.model.Threshold }

// BandRecall is the probability that two sketches of vectors with cosine c
// share at least one of b band keys of r bits: 1-(1-p^r)^b, p = 1-acos(c)/π.
func BandRecall(c float64, b, r int) float64 {
	c = min(max(c, -1), 1)
	p := 1 - math.Acos(c)/math.Pi
	return 1 - math.Pow(1-math.Pow(p, float64(r)), float64(b))
}

// CosineVectors is the cosine similarity of two weighted vectors (eq. 2).
func CosineVectors(a, b Vector) float64 {
	if len(a) > len(b) {
		a, b = b, a
	}
	dot := 0.0
	for t, w := range a {
		dot += w * b[t]
	}
	na, nb := norm2(a), norm2(b)
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// JaccardVectors is the extended Jaccard coefficient of two weighted
// vectors (eq. 3): a·b / (|a|² + |b|² − a·b).
func JaccardVectors(a, b Vector) float64 {
	if len(a) > len(b) {
		a, b = b, a
	}
	dot := 0.0
	for t, w := range a {
		dot += w * b[t]
	}
	den := norm2(a) + norm2(b) - dot
	if den <= 0 {
		return 0
	}
	return dot / den
}

// norm2 is the squared Euclidean norm, summed in sorted-key order so that
// it is deterministic.
func norm2(v Vector) float64 {
	keys := make([]string, 0, len(v))
	for t := range v {
		keys = append(keys, t)
	}
	slices.Sort(keys)
	s := 0.0
	for _, t := range keys {
		s += v[t] * v[t]
	}
	return s
}
