package mime

import (
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
	return ts.sorted()
}

// termSet is an open-addressing set of terms keyed by their 6-byte prefix
// (see prefixKey) and length.
type termSet struct {
	table  []int32  // 1 + index into terms; 0 is empty
	prefix []uint64 // prefixKey of terms[i]
	terms  []string
	keys   []uint64 // scratch for sorted
	tmp    []uint64
	lower  []byte      // scratch: a term being lower-cased
	stats  []TermStats // scratch for Analyze
	perm   []int32     // scratch for order
	shift  uint
}

var termSetPool = sync.Pool{New: func() any { return new(termSet) }}

func (ts *termSet) reset(textLen int) {
	// ~12 bytes of text per token, about half of them distinct.
	ts.resize(max(64, textLen/12))
	ts.prefix = ts.prefix[:0]
	ts.terms = ts.terms[:0]
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

func (ts *termSet) slot(k uint64, n int) uint64 {
	return ((k ^ uint64(n)) * 0x9e3779b97f4a7c15) >> ts.shift
}

// grow doubles the table when it is half full.
func (ts *termSet) grow() {
	ts.resize(len(ts.terms) * 2)
	mask := uint64(len(ts.table) - 1)
	for i, s := range ts.terms {
		h := ts.slot(ts.prefix[i], len(s))
		for ts.table[h] != 0 {
			h = (h + 1) & mask
		}
		ts.table[h] = int32(i + 1)
	}
}

// add inserts s, a string the caller keeps alive (a slice of the
// document), and returns its index in ts.terms.
func (ts *termSet) add(s string) int {
	k := prefixKey(s)
	mask := uint64(len(ts.table) - 1)
	h := ts.slot(k, len(s))
	for {
		e := ts.table[h]
		if e == 0 {
			break
		}
		if ts.prefix[e-1] == k && ts.terms[e-1] == s {
			return int(e - 1)
		}
		h = (h + 1) & mask
	}
	ts.table[h] = int32(len(ts.terms) + 1)
	ts.terms = append(ts.terms, s)
	ts.prefix = append(ts.prefix, k)
	if 2*len(ts.terms) >= len(ts.table) {
		ts.grow()
	}
	return len(ts.terms) - 1
}

// addBytes inserts the term in b, copying it only when it is new, and
// returns its index in ts.terms.
func (ts *termSet) addBytes(b []byte) int {
	k := prefixKey(string(b)) // no allocation: the conversion does not escape
	mask := uint64(len(ts.table) - 1)
	h := ts.slot(k, len(b))
	for {
		e := ts.table[h]
		if e == 0 {
			break
		}
		if ts.prefix[e-1] == k && ts.terms[e-1] == string(b) {
			return int(e - 1)
		}
		h = (h + 1) & mask
	}
	ts.table[h] = int32(len(ts.terms) + 1)
	ts.terms = append(ts.terms, string(b))
	ts.prefix = append(ts.prefix, k)
	if 2*len(ts.terms) >= len(ts.table) {
		ts.grow()
	}
	return len(ts.terms) - 1
}

// sorted returns the terms in order, in a new slice.
func (ts *termSet) sorted() []string {
	n := len(ts.terms)
	out := make([]string, n)
	if n > 1<<16 {
		copy(out, ts.terms)
		slices.Sort(out)
		return out
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
		out[i] = ts.terms[k&0xffff]
	}
	for i := 0; i < n; {
		j := i + 1
		for j < n && keys[j]>>16 == keys[i]>>16 {
			j++
		}
		if j-i > 1 {
			slices.Sort(out[i:j])
		}
		i = j
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
