package mime

import (
	"hash/maphash"
	"slices"
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
// A slot of the table holds the top 32 bits of its term's hash beside
// 1 + the term's index, so that a probe compares hashes without reading
// the term, and the table can grow without the terms' hashes.
//
// Terms that are slices of the document are kept as such. Lower-cased
// copies of capitalized words are written to one arena while the text is
// scanned (terms[i] is then "" and ref[i].off ≥ 0 its offset), and become
// slices of a single string in finish: one allocation per document, not
// one per distinct capitalized word.
type termSet struct {
	table  []uint64 // hash&hashTag | (1 + index into terms); 0 is empty
	prefix []uint64 // prefixKey of terms[i]
	seed   maphash.Seed
	terms  []string
	ref    []arenaSpan // where terms[i] is in arena
	arena  []byte
	keys   []uint64 // scratch for sorted
	tmp    []uint64
	stats  []TermStats // scratch for Analyze
	perm   []int32     // scratch for order
	shift  uint
	probes int // table slots visited, for the tests of linearity
}

// arenaSpan is the place of a term in the arena; off is -1 for a term
// that is a slice of the document.
type arenaSpan struct {
	off, n int32
}

// hashTag selects the bits of a term's hash kept in its table slot: the
// top ones, from which the slot is also computed (see slot).
const hashTag uint64 = 0xffffffff00000000

var termSetPool = sync.Pool{New: func() any { return new(termSet) }}

func (ts *termSet) reset(textLen int) {
	// ~12 bytes of text per token, about half of them distinct.
	if ts.seed == (maphash.Seed{}) {
		ts.seed = maphash.MakeSeed()
	}
	ts.resize(max(64, textLen/12))
	ts.prefix = ts.prefix[:0]
	ts.probes = 0
	ts.terms = ts.terms[:0]
	ts.ref, ts.arena = ts.ref[:0], ts.arena[:0]
}

// length is the length of term i.
func (ts *termSet) length(i int) int {
	if ts.ref[i].off >= 0 {
		return int(ts.ref[i].n)
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
	for i, r := range ts.ref {
		if r.off >= 0 {
			ts.terms[i] = all[r.off : r.off+r.n]
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
		ts.table = make([]uint64, size)
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

// slot is the first slot of a term of hash h (or of the tagged entry of
// one): its top bits, as the table has at most 2^32 slots.
func (ts *termSet) slot(h uint64) uint64 {
	return h >> ts.shift
}

// grow doubles the table when it is half full.
func (ts *termSet) grow() {
	// The entries in the order of their terms, placed again in that order.
	byTerm := make([]uint64, len(ts.terms))
	for _, e := range ts.table {
		if e != 0 {
			byTerm[uint32(e)-1] = e
		}
	}
	ts.resize(len(ts.terms) * 2)
	mask := uint64(len(ts.table) - 1)
	for _, e := range byTerm {
		h := ts.slot(e)
		for ts.table[h] != 0 {
			ts.probes++
			h = (h + 1) & mask
		}
		ts.table[h] = e
	}
}

// add inserts s, a string the caller keeps alive (a slice of the
// document), and returns its index in ts.terms.
func (ts *termSet) add(s string) int {
	hs := maphash.String(ts.seed, s)
	tag := hs & hashTag
	mask := uint64(len(ts.table) - 1)
	h := ts.slot(hs)
	for {
		ts.probes++
		e := ts.table[h]
		if e == 0 {
			break
		}
		if e&hashTag == tag {
			i := uint32(e) - 1
			if r := ts.ref[i]; r.off >= 0 {
				if string(ts.arena[r.off:r.off+r.n]) == s {
					return int(i)
				}
			} else if ts.terms[i] == s {
				return int(i)
			}
		}
		h = (h + 1) & mask
	}
	ts.table[h] = tag | uint64(len(ts.terms)+1)
	ts.terms = append(ts.terms, s)
	ts.ref = append(ts.ref, arenaSpan{off: -1})
	ts.prefix = append(ts.prefix, prefixKey(s))
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
	tag := hs & hashTag
	mask := uint64(len(ts.table) - 1)
	h := ts.slot(hs)
	for {
		ts.probes++
		e := ts.table[h]
		if e == 0 {
			break
		}
		if e&hashTag == tag {
			i := uint32(e) - 1
			if r := ts.ref[i]; r.off >= 0 {
				if string(ts.arena[r.off:r.off+r.n]) == string(b) {
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
	ts.table[h] = tag | uint64(len(ts.terms)+1)
	ts.terms = append(ts.terms, "")
	ts.ref = append(ts.ref, arenaSpan{off: int32(start), n: int32(len(b))})
	ts.prefix = append(ts.prefix, prefixKey(string(b))) // no allocation: the conversion does not escape
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
	// The ASCII prefix, written in place.
	k := 0
	n := len(dst)
	dst = slices.Grow(dst, len(s))[:n+len(s)]
	for ; k < len(s) && s[k] < utf8.RuneSelf; k++ {
		c := s[k]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst[n+k] = c
	}
	dst = dst[:n+k]
	for k < len(s) {
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
