package andd

import (
	"strings"
	"unicode/utf8"
)

// wordSet is a set of words held as their 64-bit FNV-1a hashes in an
// open-addressing table that a scratch reuses from message to message:
// no string is kept or allocated, and emptying it clears a small array.
// The hash is fixed, so every host computes the same features; two
// words of one message sharing a hash is a 2^-64 event.
type wordSet struct {
	slots []uint64 // hash|1 of each word; 0 marks a free slot
	n     int
}

// maxPooledWordSlots bounds the table a scratch keeps: one message of
// many links would leave it large.
const maxPooledWordSlots = 8192

func wordHash(w string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(w); i++ {
		h = (h ^ uint64(w[i])) * fnvPrime
	}
	return h | 1
}

// len returns the number of words in the set.
func (s *wordSet) len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// has reports whether w is in the set.
func (s *wordSet) has(w string) bool {
	if s.len() == 0 {
		return false
	}
	h := wordHash(w)
	mask := uint64(len(s.slots) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		switch s.slots[j] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

// insert adds the word of hash h (h&1 == 1).
func (s *wordSet) insert(h uint64) {
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	j := h & mask
	for s.slots[j] != 0 {
		if s.slots[j] == h {
			return
		}
		j = (j + 1) & mask
	}
	s.slots[j] = h
	s.n++
}

func (s *wordSet) grow() {
	old := s.slots
	s.slots = make([]uint64, max(64, 2*len(old)))
	s.n = 0
	for _, h := range old {
		if h != 0 {
			s.insert(h)
		}
	}
}

// reset empties the set, keeping a table that is not too large.
func (s *wordSet) reset() {
	if len(s.slots) > maxPooledWordSlots {
		*s = wordSet{}
		return
	}
	if s.n > 0 {
		clear(s.slots)
		s.n = 0
	}
}

// addWords adds the lower-cased alphanumeric words of s of 3 bytes or
// more: eachAlnumWord's words of strings.ToLower(s). ASCII, most URLs,
// is lower-cased and hashed in one pass, without a copy.
func (s *wordSet) addWords(str string) {
	for i := 0; i < len(str); i++ {
		if str[i] >= utf8.RuneSelf {
			eachAlnumWord(strings.ToLower(str), func(w string) {
				if len(w) >= 3 {
					s.insert(wordHash(w))
				}
			})
			return
		}
	}
	h, n := uint64(fnvOffset), 0
	for i := 0; i <= len(str); i++ {
		var c byte
		if i < len(str) {
			c = str[i]
		}
		switch {
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		default:
			if n >= 3 {
				s.insert(h | 1)
			}
			h, n = fnvOffset, 0
			continue
		}
		h = (h ^ uint64(c)) * fnvPrime
		n++
	}
}
