package imatchbag

import (
	"crypto/sha256"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
)

// termInfo is what a Signer knows of one lexicon term.
type termInfo struct {
	// rank is the term's rank in B (0 = most frequent) for secondary terms.
	rank int32
	// primary is true for terms of L, false for terms of B.
	primary bool
	// mask has bit b set when the term belongs to lexicon b (bit 0: the
	// original L or B; bits 1..K: the bagged copies).
	mask uint32
}

// Signer computes signatures with one lexicon. It is safe for concurrent use.
type Signer struct {
	lex  *Lexicon
	opts Options
	// primary holds the terms of L, secondary those of B: L is small and
	// stays in cache; B, a hundred times larger, is only consulted for
	// documents whose L terms do not reach the threshold in every bag.
	primary, secondary map[string]termInfo
	// mayBePrimary has the bit filterKey(t) set for every term t of L: a
	// clear bit proves a term is not in L without a map look-up (most
	// words of a message are not in L).
	mayBePrimary *bitFilter
	// index holds every term of the lexicon with its class, bags and
	// document frequency, for SignSortedDF.
	index *lexIndex
	pool  sync.Pool // *scratch
}

// bitFilter is a one-hash Bloom filter of 2^16 bits (8 KiB, in L1 cache).
type bitFilter [1 << 10]uint64

// filterKey hashes the length and the first four and last two bytes of t
// to 16 bits: no full pass over the term, unlike the map's hash.
func filterKey(t string) uint32 {
	n := len(t)
	x := uint64(n)
	if n >= 4 {
		x |= uint64(t[0])<<8 | uint64(t[1])<<16 | uint64(t[2])<<24 | uint64(t[3])<<32 |
			uint64(t[n-2])<<40 | uint64(t[n-1])<<48
	} else {
		for i := 0; i < n; i++ {
			x |= uint64(t[i]) << (8 + 8*i)
		}
	}
	return uint32((x * 0x9e3779b97f4a7c15) >> 48)
}

func (f *bitFilter) add(t string) {
	k := filterKey(t)
	f[k>>6] |= 1 << (k & 63)
}

func (f *bitFilter) has(t string) bool {
	k := filterKey(t)
	return f[k>>6]&(1<<(k&63)) != 0
}

type hit struct {
	idx  int32 // index into the document's terms
	rank int32
	mask uint32
}

type scratch struct {
	prim, sec []hit
	sel       []int32
	buf       []byte
	sorted    []string
	// all holds "term\n" of every primary hit, in order; ends[k] is the
	// end of hit k's bytes in all.
	all  []byte
	ends []int32
	// at holds the index slots of the terms (lexIndex.findAll).
	at []uint64
}

// NewSigner prepares the K bagged lexicons of lex.
func NewSigner(lex *Lexicon, opts Options) (*Signer, error) {
	if lex == nil {
		return nil, ErrNilLexicon
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Signer{lex: lex, opts: o,
		primary:   make(map[string]termInfo, len(lex.primary)),
		secondary: make(map[string]termInfo, len(lex.secondary)),
	}
	pm := make([]uint32, len(lex.primary))
	sm := make([]uint32, len(lex.secondary))
	for i := range pm {
		pm[i] = 1
	}
	for i := range sm {
		sm[i] = 1
	}
	for b := 1; b <= o.K; b++ {
		for i, in := range bootstrap(lex.seed, b, streamPrimary, len(lex.primary)) {
			if in {
				pm[i] |= 1 << b
			}
		}
		for i, in := range bootstrap(lex.seed, b, streamSecondary, len(lex.secondary)) {
			if in {
				sm[i] |= 1 << b
			}
		}
	}
	s.mayBePrimary = new(bitFilter)
	for i, t := range lex.primary {
		s.primary[t] = termInfo{rank: -1, primary: true, mask: pm[i]}
		s.mayBePrimary.add(t)
	}
	for i, t := range lex.secondary {
		s.secondary[t] = termInfo{rank: int32(i), mask: sm[i]}
	}
	s.index = newLexIndex(lex, s.primary, s.secondary)
	s.pool.New = func() any { return new(scratch) }
	return s, nil
}

// Options returns the effective options (defaults filled in).
func (s *Signer) Options() Options { return s.opts }

// Lexicon returns the signer's lexicon.
func (s *Signer) Lexicon() *Lexicon { return s.lex }

// BagShare returns the fraction of the primary lexicon that belongs to bag
// b (1..K); 1-BagShare is the paper's p.
func (s *Signer) BagShare(b int) float64 {
	if len(s.lex.primary) == 0 || b < 0 || b > s.opts.K {
		return 0
	}
	n := 0
	for _, t := range s.lex.primary {
		if s.primary[t].mask&(1<<b) != 0 {
			n++
		}
	}
	return float64(n) / float64(len(s.lex.primary))
}

// Class reports whether term is in the primary lexicon L or in the
// secondary lexicon B.
func (s *Signer) Class(term string) (primary, secondary bool) {
	_, primary = s.primary[term]
	_, secondary = s.secondary[term]
	return primary, secondary
}

// lookup returns what the signer knows of term.
func (s *Signer) lookup(term string) (termInfo, bool) {
	if ti, ok := s.primary[term]; ok {
		return ti, true
	}
	ti, ok := s.secondary[term]
	return ti, ok
}

// InBag reports whether term belongs to lexicon b (L or B of the original
// for b = 0, of the bagged copy b otherwise).
func (s *Signer) InBag(term string, b int) bool {
	if b < 0 || b > s.opts.K {
		return false
	}
	ti, _ := s.lookup(term)
	return ti.mask&(1<<b) != 0
}

// Sign signs a document given its sorted unique terms (mime.UniqueTerms).
// Unsorted input or duplicates are tolerated (a sorted copy is used).
func (s *Signer) Sign(terms []string) Result {
	sc := s.pool.Get().(*scratch)
	defer s.pool.Put(sc)
	return s.signSorted(sc.normalize(terms), sc)
}

// SignSorted is Sign for terms known to be sorted and unique (strictly
// increasing), such as mime.Terms.Sorted and mime.UniqueTerms: it skips
// Sign's check of the order. Other input does not panic but gives
// signatures that are not Sign's.
func (s *Signer) SignSorted(terms []string) Result {
	sc := s.pool.Get().(*scratch)
	defer s.pool.Put(sc)
	return s.signSorted(terms, sc)
}

// signSorted signs sorted unique terms.
func (s *Signer) signSorted(terms []string, sc *scratch) Result {
	res := Result{Unique: len(terms)}
	if len(terms) < s.opts.MinUnique {
		res.Reason = fmt.Sprintf("too short for a signature: %d unique words (minimum %d)", len(terms), s.opts.MinUnique)
		return res
	}
	sc.prim, sc.sec = sc.prim[:0], sc.sec[:0]
	var perBag [MaxK + 1]int
	for i, t := range terms {
		if !s.mayBePrimary.has(t) {
			continue
		}
		if ti, ok := s.primary[t]; ok {
			sc.prim = append(sc.prim, hit{idx: int32(i), rank: ti.rank, mask: ti.mask})
			for m := ti.mask; m != 0; m &= m - 1 {
				perBag[bits.TrailingZeros32(m)]++
			}
		}
	}
	return s.sign(terms, sc, &perBag, res, false)
}

// SignSortedDF is SignSorted that also returns the document frequency of
// every term (Lexicon.DF), appended to df[:0]: df[i] is that of terms[i].
// It looks each term up once, in one table, for both: the ANDD signer
// takes the frequencies (andd.Signer.SketchTermsDF) instead of looking
// the terms up again. The signatures are SignSorted's.
func (s *Signer) SignSortedDF(terms []string, df []int32) (Result, []int32) {
	sc := s.pool.Get().(*scratch)
	defer s.pool.Put(sc)
	df = df[:0]
	sc.prim, sc.sec = sc.prim[:0], sc.sec[:0]
	var perBag [MaxK + 1]int
	at := slices.Grow(sc.at[:0], len(terms))[:len(terms)]
	sc.at = at
	s.index.findAll(terms, at)
	for i, k := range at {
		if k == 0 {
			df = append(df, 0)
			continue
		}
		sl := &s.index.slots[k-1]
		df = append(df, sl.df)
		if sl.pmask != 0 {
			sc.prim = append(sc.prim, hit{idx: int32(i), rank: -1, mask: sl.pmask})
			for m := sl.pmask; m != 0; m &= m - 1 {
				perBag[bits.TrailingZeros32(m)]++
			}
		}
		if sl.smask != 0 {
			sc.sec = append(sc.sec, hit{idx: int32(i), rank: sl.srank, mask: sl.smask})
		}
	}
	res := Result{Unique: len(terms)}
	if len(terms) < s.opts.MinUnique {
		res.Reason = fmt.Sprintf("too short for a signature: %d unique words (minimum %d)", len(terms), s.opts.MinUnique)
		return res, df
	}
	return s.sign(terms, sc, &perBag, res, true), df
}

// sign completes Sign once the primary hits of the sorted unique terms
// are in sc.prim and counted in perBag, and, when secDone, the secondary
// hits in sc.sec (in term order).
func (s *Signer) sign(terms []string, sc *scratch, perBag *[MaxK + 1]int, res Result, secDone bool) Result {
	need := s.need(len(terms))
	short := false
	for b := 0; b <= s.opts.K; b++ {
		short = short || perBag[b] < need
	}
	if short && !secDone {
		// Some bag needs terms of B: look them up (terms of L are not in B).
		for i, t := range terms {
			if ti, ok := s.secondary[t]; ok {
				sc.sec = append(sc.sec, hit{idx: int32(i), rank: ti.rank, mask: ti.mask})
			}
		}
	}
	secSorted := false
	res.Signatures = make([]Signature, 0, s.opts.K+1)
	sc.all, sc.ends = sc.all[:0], sc.ends[:0]
	for b := 0; b <= s.opts.K; b++ {
		bit := uint32(1) << b
		if perBag[b] >= need {
			// Only terms of L: hash the runs of consecutive primary hits
			// of the bag, copied from all (the same bytes as below).
			if len(sc.ends) == 0 {
				for _, h := range sc.prim {
					sc.all = append(sc.all, terms[h.idx]...)
					sc.all = append(sc.all, '\n')
					sc.ends = append(sc.ends, int32(len(sc.all)))
				}
			}
			buf := sc.buf[:0]
			prim, ends := sc.prim, sc.ends[:len(sc.prim)]
			for k := 0; k < len(prim); {
				if prim[k].mask&bit == 0 {
					k++
					continue
				}
				start := int32(0)
				if k > 0 {
					start = ends[k-1]
				}
				for k < len(prim) && prim[k].mask&bit != 0 {
					k++
				}
				buf = append(buf, sc.all[start:ends[k-1]]...)
			}
			sc.buf = buf
			if b == 0 {
				res.Terms, res.Secondary = perBag[b], 0
			}
			res.Signatures = append(res.Signatures, s.signature(b, buf))
			continue
		}
		sel := sc.sel[:0]
		for _, h := range sc.prim {
			if h.mask&bit != 0 {
				sel = append(sel, h.idx)
			}
		}
		fromL := len(sel)
		if fromL < need {
			if !secSorted {
				slices.SortFunc(sc.sec, func(a, b hit) int { return int(a.rank - b.rank) })
				secSorted = true
			}
			for _, h := range sc.sec {
				if len(sel) >= need {
					break
				}
				if h.mask&bit != 0 {
					sel = append(sel, h.idx)
				}
			}
			slices.Sort(sel)
		}
		sc.sel = sel
		if b == 0 {
			res.Terms, res.Secondary = len(sel), len(sel)-fromL
		}
		if len(sel) < need {
			if b == 0 {
				res.Reason = s.reason(len(terms), fromL, len(sel), need)
			}
			continue
		}
		buf := sc.buf[:0]
		for _, i := range sel {
			buf = append(buf, terms[i]...)
			buf = append(buf, '\n')
		}
		sc.buf = buf
		res.Signatures = append(res.Signatures, s.signature(b, buf))
	}
	if len(res.Signatures) == 0 {
		res.Signatures = nil
	}
	return res
}

// signature is the signature of bag b over the hashed bytes buf (see
// HashTerms).
func (s *Signer) signature(b int, buf []byte) Signature {
	sum := sha256.Sum256(buf)
	sig := Signature{Lexicon: s.lex.id, Bag: uint8(b)}
	copy(sig.Hash[:], sum[:16])
	return sig
}

// need is the size S must reach for a document of u unique terms.
func (s *Signer) need(u int) int {
	r := int(math.Ceil(s.opts.MinRatio*float64(u) - 1e-9))
	return max(r, s.opts.MinTerms)
}

func (s *Signer) reason(u, fromL, total, need int) string {
	ratio := int(math.Ceil(s.opts.MinRatio*float64(u) - 1e-9))
	if fromL < need && ratio >= s.opts.MinTerms {
		return fmt.Sprintf("too few lexicon words: %d of %d unique words are in the lexicon (%d with the secondary lexicon), %d needed for the minimum ratio %g",
			fromL, u, total, need, s.opts.MinRatio)
	}
	return fmt.Sprintf("too few lexicon words: %d of %d unique words are in the lexicon (%d with the secondary lexicon), minimum %d",
		fromL, u, total, need)
}

// SignatureTerms returns the terms hashed into the signature of bag b (0 =
// original lexicon), or nil when that bag yields no signature. It explains a
// signature to an administrator; Sign is the fast path.
func (s *Signer) SignatureTerms(terms []string, b int) []string {
	if b < 0 || b > s.opts.K {
		return nil
	}
	sorted := slices.Clone(terms)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if len(sorted) < s.opts.MinUnique {
		return nil
	}
	bit := uint32(1) << b
	var sel []string
	var sec []hit
	for i, t := range sorted {
		ti, ok := s.lookup(t)
		if !ok || ti.mask&bit == 0 {
			continue
		}
		if ti.primary {
			sel = append(sel, t)
		} else {
			sec = append(sec, hit{idx: int32(i), rank: ti.rank})
		}
	}
	need := s.need(len(sorted))
	slices.SortFunc(sec, func(a, b hit) int { return int(a.rank - b.rank) })
	for _, h := range sec {
		if len(sel) >= need {
			break
		}
		sel = append(sel, sorted[h.idx])
	}
	if len(sel) < need {
		return nil
	}
	slices.Sort(sel)
	return sel
}

// normalize returns terms if sorted and unique, else a sorted unique copy
// held in the scratch space.
func (sc *scratch) normalize(terms []string) []string {
	if sortedUnique(terms) {
		return terms
	}
	sc.sorted = append(sc.sorted[:0], terms...)
	slices.Sort(sc.sorted)
	sc.sorted = slices.Compact(sc.sorted)
	return sc.sorted
}

// sortedUnique reports whether terms are in strictly increasing order.
func sortedUnique(terms []string) bool {
	for i := 1; i < len(terms); i++ {
		if terms[i-1] >= terms[i] {
			return false
		}
	}
	return true
}

// HashTerms is the signature hash of a sorted list of terms: the first 16
// bytes of the SHA-256 of the terms, each followed by a newline.
func HashTerms(sorted []string) [16]byte {
	var b strings.Builder
	for _, t := range sorted {
		b.WriteString(t)
		b.WriteByte('\n')
	}
	sum := sha256.Sum256([]byte(b.String()))
	var h [16]byte
	copy(h[:], sum[:16])
	return h
}
