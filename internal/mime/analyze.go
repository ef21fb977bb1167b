package mime

import (
	"slices"
	"strings"
)

// Terms is the word analysis of a document that every signature family
// needs, computed in one pass over its text by Analyze: the distinct terms
// in sorted order (what I-Match hashes) and, for each, the statistics of
// its occurrences (what ANDD's term features are made of). Neither family
// then needs the token list or a second hashing of the words.
type Terms struct {
	// Sorted holds the distinct terms in increasing order: exactly
	// UniqueTerms(Tokenize(doc, Options)).
	Sorted []string
	// Stats[i] describes the occurrences of Sorted[i].
	Stats []TermStats
	// Tokens is the number of tokens, len(Tokenize(doc, Options)).
	Tokens int
	// Options are the token options used, defaults filled in.
	Options TokenOptions
	// OverBudget is true when the document had more than
	// Options.MaxTokens tokens: the terms are those of the first
	// MaxTokens.
	OverBudget bool

	probes int // slots visited in the term table, for the tests of linearity
}

// TermStats are the statistics of one distinct term over the tokens of a
// document (see Token).
type TermStats struct {
	// TF is the number of occurrences.
	TF int32
	// First is the Pos of the first occurrence.
	First int32
	// Capitalized and AllCaps count the occurrences with Token.Capitalized
	// and Token.AllCaps set.
	Capitalized int32
	AllCaps     int32
	// InSubject is true when some occurrence is in the subject.
	InSubject bool
}

// Analyze tokenizes doc under opts and returns its distinct terms with
// their statistics. It equals, term for term, what UniqueTerms and a walk
// over Tokenize(doc, opts) give, without building the token list. A nil doc
// has no terms.
func Analyze(doc *Document, opts TokenOptions) *Terms {
	return AnalyzeReuse(doc, opts, nil)
}

// AnalyzeReuse is Analyze that writes the statistics into the memory of
// stats (which it overwrites; nil allocates): a caller that is done with
// a document's statistics before it analyzes the next one passes the
// previous Terms.Stats[:0] back. Terms.Sorted is always new.
func AnalyzeReuse(doc *Document, opts TokenOptions, stats []TermStats) *Terms {
	o := opts.withDefaults()
	out := &Terms{Options: o}
	if doc == nil {
		out.Sorted = []string{}
		return out
	}
	ts := termSetPool.Get().(*termSet)
	defer func() {
		clear(ts.terms) // do not retain the document
		ts.terms = ts.terms[:0]
		termSetPool.Put(ts)
	}()
	ts.reset(len(doc.Subject) + len(doc.Text))
	an := analysis{stats: ts.stats[:0]}
	t := tokenizer{opts: o, set: ts, an: &an}
	t.words(doc.Subject, true)
	t.words(doc.Text, false)
	ts.stats = an.stats[:0]
	ts.finish()
	perm := ts.order()
	out.Sorted = make([]string, len(perm))
	if cap(stats) >= len(perm) {
		out.Stats = stats[:len(perm)]
	} else {
		out.Stats = make([]TermStats, len(perm))
	}
	for i, p := range perm {
		out.Sorted[i] = ts.terms[p]
		out.Stats[i] = an.stats[p]
	}
	out.Tokens = int(an.n)
	out.OverBudget = t.full
	out.probes = ts.probes
	return out
}

// analysis accumulates TermStats while a tokenizer fills a termSet:
// stats[i] belongs to the set's terms[i].
type analysis struct {
	stats []TermStats
	n     int32 // tokens so far
}

// note records one occurrence of the set's term idx.
func (a *analysis) note(idx int, inSubject, capitalized, allCaps bool) {
	if idx == len(a.stats) {
		a.stats = append(a.stats, TermStats{First: a.n})
	}
	st := &a.stats[idx]
	st.TF++
	if capitalized {
		st.Capitalized++
	}
	if allCaps {
		st.AllCaps++
	}
	st.InSubject = st.InSubject || inSubject
	a.n++
}

// order returns the indices of ts.terms in increasing order of the terms
// (a scratch slice, valid until the next use of ts).
func (ts *termSet) order() []int32 {
	n := len(ts.terms)
	if cap(ts.perm) < n {
		ts.perm = make([]int32, n)
	}
	perm := ts.perm[:n]
	if n > 1<<16 {
		for i := range perm {
			perm[i] = int32(i)
		}
		sortTerms(perm, func(i int32) string { return ts.terms[i] }, 0)
		return perm
	}
	if cap(ts.keys) < n {
		ts.keys = make([]uint64, n)
		ts.tmp = make([]uint64, n)
	}
	keys := ts.keys[:n]
	for i, k := range ts.prefix {
		keys[i] = k | uint64(i)
	}
	keys = sortKeys(keys, ts.tmp[:n])
	for i, k := range keys {
		perm[i] = int32(k & 0xffff)
	}
	// Distinct terms with the same 6-byte prefix are not yet in order.
	for i := 0; i < n; {
		j := i + 1
		for j < n && keys[j]>>16 == keys[i]>>16 {
			j++
		}
		if j-i > 1 {
			sortTerms(perm[i:j], func(i int32) string { return ts.terms[i] }, 6)
		}
		i = j
	}
	return perm
}

// sortTerms sorts idx, indices of distinct terms that share their first
// off bytes, by term: by the next 8 bytes read as an integer (zero-padded:
// terms hold no NUL, so a shorter term sorts first), then each run of
// equal keys from off+8 on. Integer keys keep a large group of words
// sharing a long prefix (hostile text) from costing a string comparison
// per step of the sort.
func sortTerms(idx []int32, term func(int32) string, off int) {
	if len(idx) <= 32 || off > 256 {
		slices.SortFunc(idx, func(a, b int32) int { return strings.Compare(term(a), term(b)) })
		return
	}
	ks := make([]keyedTerm, 2*len(idx))
	for j, i := range idx {
		ks[j] = keyedTerm{keyAt(term(i), off), i}
	}
	ks = radixSort(ks[:len(idx)], ks[len(idx):])
	for j := range ks {
		idx[j] = ks[j].i
	}
	for i := 0; i < len(ks); {
		j := i + 1
		for j < len(ks) && ks[j].k == ks[i].k {
			j++
		}
		if j-i > 1 {
			sortTerms(idx[i:j], term, off+8)
		}
		i = j
	}
}

// radixSort sorts a by key, stably, with tmp (as long as a) as scratch,
// and returns the sorted slice (a or tmp): a least-significant-byte-first
// radix sort that skips the bytes all keys share.
func radixSort(a, tmp []keyedTerm) []keyedTerm {
	for shift := 0; shift < 64; shift += 8 {
		var count [256]int
		for _, x := range a {
			count[byte(x.k>>shift)]++
		}
		if count[byte(a[0].k>>shift)] == len(a) {
			continue
		}
		pos := 0
		for b, c := range count {
			count[b] = pos
			pos += c
		}
		for _, x := range a {
			b := byte(x.k >> shift)
			tmp[count[b]] = x
			count[b]++
		}
		a, tmp = tmp, a
	}
	return a
}

type keyedTerm struct {
	k uint64
	i int32
}

// keyAt packs s[off:off+8] into a uint64, big-endian, zero-padded.
func keyAt(s string, off int) uint64 {
	var k uint64
	for j := 0; j < 8; j++ {
		k <<= 8
		if off+j < len(s) {
			k |= uint64(s[off+j])
		}
	}
	return k
}
