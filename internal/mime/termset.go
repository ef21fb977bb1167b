package mime

import (
	"hash/maphash"
	"sync"
	"unicode"
	"unicode/utf8"
)

// UniqueTermsOf returns the sorted distinct terms of doc under opts: the
// same result as UniqueTerms(Tokenize(doc, opts)), computed without
// building the token list (no per-token allocation, duplicates dropped as
// they are met). Signature code that needs only the term set should use it.
func UniqueTermsOf(doc *Document, opts TokenOptions) []string {
	ts := termSetPool.Get().(*termSet)
	defer func() {
		clear(ts.terms) // do not retain the document
		ts.terms = ts.terms[:0]
		termSetPool.Put(ts)
	}()
	ts.reset(len(doc.Subject) + len(doc.Text))
	t := tokenizer{opts: opts.withDefaults(), set: ts}
	t.words(doc.Subject, true)
	t.words(doc.Text, false)
	ts.finish()
	return ts.sorted()
}

// termSet is an open-addressing set of terms hashed with hash/maphash
// under a random seed of the set: a hash of the whole term, not of a part
// of it, so that no choice of words (say, many distinct words sharing
// their first letters and their length) piles them up in one probe chain.
// Each term's 6-byte prefix (see prefixKey) is kept for sorting.
//
// Terms that are slices of the document are kept as such. Lower-cased
// copies of capitalized words are written to one arena while the text is
// scanned (terms[i] is then "" and aoff[i] ≥ 0 its offset), and become
// slices of a single string in finish: one allocation per document, not
// one per distinct capitalized word.
type termSet struct {
	table  []int32  // 1 + index into terms; 0 is empty
	prefix []uint64 // prefixKey of terms[i]
	hash   []uint64 // maphash of terms[i]
	seed   maphash.Seed
	terms  []string
	aoff   []int32 // offset of terms[i] in arena, -1 for document slices
	alen   []int32 // length of terms[i] when in the arena
	arena  []byte
	keys   []uint64 // scratch for sorted
	tmp    []uint64
	stats  []TermStats // scratch for Analyze
	perm   []int32     // scratch for order
	shift  uint
	probes int // table slots visited, for the tests of linearity
}

var termSetPool = sync.Pool{New: func() any { return new(termSet) }}

func (ts *termSet) reset(textLen int) {
	// ~12 bytes of text per token, about half of them distinct.
	if ts.seed == (maphash.Seed{}) {
		ts.seed = maphash.MakeSeed()
	}
	ts.resize(max(64, textLen/12))
	ts.prefix, ts.hash = ts.prefix[:0], ts.hash[:0]
	ts.probes = 0
	ts.terms = ts.terms[:0]
	ts.aoff, ts.alen, ts.arena = ts.aoff[:0], ts.alen[:0], ts.arena[:0]
}

// length is the length of term i.
func (ts *termSet) length(i int) int {
	if ts.aoff[i] >= 0 {
		return int(ts.alen[i])
	}
	return len(ts.terms[i])
}

// finish makes every term a string: the arena terms become slices of one
// copy of the arena.
func (ts *termSet) finish() {
	if len(ts.arena) == 0 {
		return
	}
	all := string(ts.arena)
	for i, o := range ts.aoff {
		if o >= 0 {
			ts.terms[i] = all[o : o+ts.alen[i]]
		}
	}
}

// resize makes an empty table for at least 2n entries.
func (ts *termSet) resize(n int) {
	size := 64
	for size < 2*n {
		size *= 2
	}
	if cap(ts.table) < size {
		ts.table = make([]int32, size)
	}
	ts.table = ts.table[:size]
	clear(ts.table)
	ts.shift = 64 - uint(bitLen(size-1))
}

func bitLen(x int) int {
	n := 0
	for x > 0 {
		x >>= 1
		n++
	}
	return n
}

func (ts *termSet) slot(h uint64) uint64 {
	return h >> ts.shift
}

// grow doubles the table when it is half full.
func (ts *termSet) grow() {
	ts.resize(len(ts.terms) * 2)
	mask := uint64(len(ts.table) - 1)
	for i := range ts.terms {
		h := ts.slot(ts.hash[i])
		for ts.table[h] != 0 {
			ts.probes++
			h = (h + 1) & mask
		}
		ts.table[h] = int32(i + 1)
	}
}

// add inserts s, a string the caller keeps alive (a slice of the
// document), and returns its index in ts.terms.
func (ts *termSet) add(s string) int {
	hs := maphash.String(ts.seed, s)
	mask := uint64(len(ts.table) - 1)
	h := ts.slot(hs)
	for {
		ts.probes++
		e := ts.table[h]
		if e == 0 {
			break
		}
		if i := e - 1; ts.hash[i] == hs {
			if o := ts.aoff[i]; o >= 0 {
				if string(ts.arena[o:o+ts.alen[i]]) == s {
					return int(i)
				}
			} else if ts.terms[i] == s {
				return int(i)
			}
		}
		h = (h + 1) & mask
	}
	ts.table[h] = int32(len(ts.terms) + 1)
	ts.terms = append(ts.terms, s)
	ts.aoff = append(ts.aoff, -1)
	ts.alen = append(ts.alen, 0)
	ts.prefix = append(ts.prefix, prefixKey(s))
	ts.hash = append(ts.hash, hs)
	if 2*len(ts.terms) >= len(ts.table) {
		ts.grow()
	}
	return len(ts.terms) - 1
}

// addLower inserts the lower-case form of the word w, written to the
// arena only when it is new, and returns its index in ts.terms.
func (ts *termSet) addLower(w string) int {
	start := len(ts.arena)
	ts.arena = lowerAppend(ts.arena, w)
	b := ts.arena[start:]
	hs := maphash.Bytes(ts.seed, b)
	mask := uint64(len(ts.table) - 1)
	h := ts.slot(hs)
	for {
		ts.probes++
		e := ts.table[h]
		if e == 0 {
			break
		}
		if i := e - 1; ts.hash[i] == hs {
			if o := ts.aoff[i]; o >= 0 {
				if string(ts.arena[o:o+ts.alen[i]]) == string(b) {
					ts.arena = ts.arena[:start]
					return int(i)
				}
			} else if ts.terms[i] == string(b) {
				ts.arena = ts.arena[:start]
				return int(i)
			}
		}
		h = (h + 1) & mask
	}
	ts.table[h] = int32(len(ts.terms) + 1)
	ts.terms = append(ts.terms, "")
	ts.aoff = append(ts.aoff, int32(start))
	ts.alen = append(ts.alen, int32(len(b)))
	ts.prefix = append(ts.prefix, prefixKey(string(b))) // no allocation: the conversion does not escape
	ts.hash = append(ts.hash, hs)
	if 2*len(ts.terms) >= len(ts.table) {
		ts.grow()
	}
	return len(ts.terms) - 1
}

// sorted returns the terms in order, in a new slice.
func (ts *termSet) sorted() []string {
	perm := ts.order()
	out := make([]string, len(perm))
	for i, p := range perm {
		out[i] = ts.terms[p]
	}
	return out
}

// lowerAppend appends the lower-case form of the word s to dst.
func lowerAppend(dst []byte, s string) []byte {
	for k := 0; k < len(s); {
		c := s[k]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			k++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[k:])
		if runeInfo(r)&rcClass == rcUpper {
			r = unicode.ToLower(r)
		}
		dst = utf8.AppendRune(dst, r)
		k += size
	}
	return dst
}
