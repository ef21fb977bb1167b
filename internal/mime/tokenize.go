package mime

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"sync"
	"unicode/utf8"
)

func (o TokenOptions) withDefaults() TokenOptions {
	if o.MinLen <= 0 {
		o.MinLen = 4
	}
	if o.MaxDigits <= 0 {
		o.MaxDigits = 1
	}
	if o.MaxLen <= 0 {
		o.MaxLen = 40
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = defaultMaxTokens
	}
	return o
}

const defaultMaxTokens = 1 << 15

// tokenizer builds the tokens of one document. Lower-cased terms that
// differ from their source are written to one arena that becomes a single
// string at the end; terms already in lower case share the document's
// memory.
type tokenizer struct {
	opts  TokenOptions
	toks  []Token
	arena []byte
	fix   []arenaRef
	set   *termSet  // when set, terms go to the set instead of toks
	an    *analysis // when set (with set), per-term statistics are kept
	n     int       // tokens kept so far
	full  bool      // a token past MaxTokens was met: the rest is ignored
}

type arenaRef struct {
	tok        int
	start, end int
}

func tokenize(doc *Document, opts TokenOptions) []Token {
	t := tokenizer{opts: opts.withDefaults()}
	// Capacities: ~12 bytes of text per kept token in the SpamAssassin
	// corpus, ~6.5 in dense spam text; growing the slice (a copy of
	// pointers under write barriers) costs more than over-allocating. A
	// quarter of the tokens are capitalized, with 13% of the text.
	n := len(doc.Subject) + len(doc.Text)
	t.toks = make([]Token, 0, n/6+8)
	t.fix = make([]arenaRef, 0, n/32+4)
	t.arena = make([]byte, 0, n/6+16)
	t.words(doc.Subject, true)
	t.words(doc.Text, false)
	if len(t.fix) > 0 {
		s := string(t.arena)
		for _, f := range t.fix {
			t.toks[f.tok].Term = s[f.start:f.end]
		}
	}
	return t.toks
}

// asciiClass holds the rune class (rcNone, rcLetter, rcUpper, rcDigit) of
// each ASCII byte.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = rcLetter
		t[c-'a'+'A'] = rcUpper
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = rcDigit
	}
	return t
}()

// words appends the tokens of s.
func (t *tokenizer) words(s string, inSubject bool) {
	if t.full {
		return
	}
	tab := bmpInfo()
	// word returns len(s) once the budget is spent.
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if asciiClass[c] == rcNone {
				i++
				continue
			}
			if (c|0x20 == 'h' || c|0x20 == 'w') && (i == 0 || !wordByteBefore(s, i)) {
				if end := urlEnd(s, i); end >= 0 {
					i = end
					continue
				}
			}
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			var f uint8
			if r < 0x10000 {
				f = tab[r]
			} else {
				f = astralInfo(r)
			}
			if cl := f & rcClass; cl == rcNone || cl == rcMark {
				i += size
				continue
			}
		}
		i = t.word(s, i, inSubject, tab)
	}
}

// wordByteBefore is isWordByteBefore (i > 0) without decoding a rune when
// s[i-1] is ASCII.
func wordByteBefore(s string, i int) bool {
	if c := s[i-1]; c < utf8.RuneSelf {
		return asciiClass[c] != rcNone || c == '.' || c == '/' || c == '@'
	}
	return isWordByteBefore(s, i)
}

// word scans the word starting at s[i], appends it as a token when it
// passes the filters, and returns the index after it.
func (t *tokenizer) word(s string, i int, inSubject bool, tab *[0x10000]uint8) int {
	// The common word first: lower-case ASCII letters up to an ASCII byte
	// that is no part of a word, or the end of s.
	j := i
	for j < len(s) && 'a' <= s[j] && s[j] <= 'z' {
		j++
	}
	if j == len(s) || s[j] < utf8.RuneSelf && asciiClass[s[j]] == rcNone {
		if n := j - i; n < t.opts.MinLen || n > t.opts.MaxLen {
			return j
		}
		return t.emit(s, i, j, inSubject, false, false, false)
	}
	// Any other word, its lower-case ASCII start already counted.
	runes, digits, letters, upper := j-i, 0, j-i, 0
	capitalized := false
	for j < len(s) {
		c := s[j]
		if 'a' <= c && c <= 'z' {
			// Fast path: a run of lower-case ASCII letters.
			k := j + 1
			for k < len(s) && 'a' <= s[k] && s[k] <= 'z' {
				k++
			}
			letters += k - j
			runes += k - j
			j = k
			continue
		}
		var cl uint8
		if c < utf8.RuneSelf {
			cl = asciiClass[c]
			if cl == rcNone {
				break
			}
			j++
		} else {
			r, size := utf8.DecodeRuneInString(s[j:])
			if r < 0x10000 {
				cl = tab[r] & rcClass
			} else {
				cl = astralInfo(r) & rcClass
			}
			if cl == rcNone {
				break
			}
			j += size
		}
		switch cl {
		case rcDigit:
			digits++
		case rcLetter:
			letters++
		case rcUpper:
			letters++
			upper++
			if runes == 0 {
				capitalized = true
			}
		}
		runes++
	}
	if runes < t.opts.MinLen || runes > t.opts.MaxLen || digits > t.opts.MaxDigits {
		return j
	}
	return t.emit(s, i, j, inSubject, upper != 0, capitalized, letters > 1 && upper == letters)
}

// emit appends the word s[i:j], which passed the filters, as a token (or
// term), unless the token budget is spent, and returns the index where
// scanning goes on: j, or len(s) once the budget is spent.
func (t *tokenizer) emit(s string, i, j int, inSubject, hasUpper, capitalized, allCaps bool) int {
	if t.n >= t.opts.MaxTokens {
		t.full = true // a token past the budget: stop here
		return len(s)
	}
	t.n++
	if t.set != nil {
		var idx int
		if !hasUpper {
			idx = t.set.add(s[i:j])
		} else {
			idx = t.set.addLower(s[i:j])
		}
		if t.an != nil {
			t.an.note(idx, inSubject, capitalized, allCaps)
		}
		return j
	}
	tok := Token{
		Pos:         len(t.toks),
		InSubject:   inSubject,
		Capitalized: capitalized,
		AllCaps:     allCaps,
	}
	if !hasUpper {
		tok.Term = s[i:j] // already lower case: share the document's memory
	} else {
		start := len(t.arena)
		t.arena = lowerAppend(t.arena, s[i:j])
		t.fix = append(t.fix, arenaRef{tok: len(t.toks), start: start, end: len(t.arena)})
	}
	t.toks = append(t.toks, tok)
	return j
}

// uniqueTerms avoids string comparisons in the common case: each term
// becomes a 64-bit key made of its first 6 bytes (byte order is string
// order; terms hold no NUL, so a shorter term sorts first) and its index in
// the low 16 bits. Duplicates are removed first with an open-addressing
// table hashed on the whole term (a message repeats about half of its words),
// then the distinct keys are sorted as integers; only distinct terms
// sharing a 6-byte prefix are compared as strings.
func uniqueTerms(toks []Token) []string {
	n := len(toks)
	if n == 0 {
		return []string{}
	}
	if n > 1<<16 {
		idx := make([]int32, n)
		for i := range idx {
			idx[i] = int32(i)
		}
		// sortTerms wants distinct terms, but sorts equal ones together too.
		sortTerms(idx, func(i int32) string { return toks[i].Term }, 0)
		terms := make([]string, n)
		for i, k := range idx {
			terms[i] = toks[k].Term
		}
		return slices.Compact(terms)
	}
	sc := uniqPool.Get().(*uniqScratch)
	defer uniqPool.Put(sc)
	shift := 64 - bits.Len(uint(2*n-1)) // table size: a power of two >= 2n
	size := 1 << (64 - shift)
	if cap(sc.table) < size {
		sc.table = make([]int32, size)
	}
	table := sc.table[:size]
	clear(table)
	mask := uint64(size - 1)
	keys := sc.keys[:0]
	if sc.seed == (maphash.Seed{}) {
		sc.seed = maphash.MakeSeed()
	}
	for i := range toks {
		s := toks[i].Term
		k := prefixKey(s)
		// The slot hashes the whole term (see termSet): a prefix hash
		// would chain every word sharing a prefix.
		h := maphash.String(sc.seed, s) >> shift
		for {
			e := table[h]
			if e == 0 {
				table[h] = int32(len(keys) + 1)
				keys = append(keys, k|uint64(i))
				break
			}
			u := keys[e-1]
			if u>>16 == k>>16 && (len(s) <= 6 && len(toks[u&0xffff].Term) == len(s) || toks[u&0xffff].Term == s) {
				break // a duplicate
			}
			h = (h + 1) & mask
		}
	}
	sc.keys = keys
	if cap(sc.tmp) < len(keys) {
		sc.tmp = make([]uint64, len(keys))
	}
	keys = sortKeys(keys, sc.tmp[:len(keys)])
	out := make([]string, len(keys))
	for i := range keys {
		out[i] = toks[keys[i]&0xffff].Term
	}
	// Distinct terms with the same 6-byte prefix are not yet in order.
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j]>>16 == keys[i]>>16 {
			j++
		}
		if j-i <= 32 {
			slices.Sort(out[i:j])
		} else {
			idx := make([]int32, j-i)
			for k := range idx {
				idx[k] = int32(keys[i+k] & 0xffff)
			}
			sortTerms(idx, func(k int32) string { return toks[k].Term }, 6)
			for k, t := range idx {
				out[i+k] = toks[t].Term
			}
		}
		i = j
	}
	return out
}

// prefixKey packs the first 6 bytes of s into the top of a uint64.
func prefixKey(s string) uint64 {
	switch {
	case len(s) >= 6:
		_ = s[5]
		return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 |
			uint64(s[3])<<32 | uint64(s[4])<<24 | uint64(s[5])<<16
	case len(s) == 5: // terms have at least four letters by default
		_ = s[4]
		return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 |
			uint64(s[3])<<32 | uint64(s[4])<<24
	case len(s) == 4:
		_ = s[3]
		return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 |
			uint64(s[3])<<32
	}
	var k uint64
	for j := 0; j < len(s); j++ {
		k |= uint64(s[j]) << (56 - 8*j)
	}
	return k
}

type uniqScratch struct {
	seed  maphash.Seed
	table []int32
	keys  []uint64
	tmp   []uint64
}

// sortKeys sorts keys into tmp and returns it: one counting pass on the
// top byte (the first letter of a term), then an insertion sort of each
// small bucket. On word keys this is about three times faster than pdqsort,
// whose cost is mostly mispredicted branches.
func sortKeys(keys, tmp []uint64) []uint64 {
	var start [257]int32
	first, last := uint64(255), uint64(0) // the range of top bytes in use
	for _, k := range keys {
		b := k >> 56
		start[b+1]++
		first, last = min(first, b), max(last, b)
	}
	if first > last {
		return tmp
	}
	for b := first + 1; b <= last+1; b++ {
		start[b] += start[b-1]
	}
	next := start
	for _, k := range keys {
		b := k >> 56
		tmp[next[b]] = k
		next[b]++
	}
	for b := first; b <= last; b++ {
		lo, hi := start[b], start[b+1]
		switch n := hi - lo; {
		case n <= 1:
		case n <= 32:
			insertionSort(tmp[lo:hi])
		default:
			slices.Sort(tmp[lo:hi])
		}
	}
	return tmp
}

func insertionSort(a []uint64) {
	for i := 1; i < len(a); i++ {
		v := a[i]
		j := i
		for j > 0 && a[j-1] > v {
			a[j] = a[j-1]
			j--
		}
		a[j] = v
	}
}

var uniqPool = sync.Pool{New: func() any { return new(uniqScratch) }}
