package andd

import (
	"hash/maphash"
	"strings"
	"unicode/utf8"
)

// wordSet is a set of words in an open-addressing table that a scratch
// reuses from message to message: the words' bytes in one buffer, no
// string allocated, and emptying it clears a small array. The hash is
// seeded (hash/maphash), so a crafted message cannot make its words
// collide and probing quadratic; membership compares the bytes, so it
// does not depend on the seed.
type wordSet struct {
	seed  maphash.Seed
	slots []wordSlot // hash 0 marks a free slot
	buf   []byte     // the words, one after the other
	n     int
}

type wordSlot struct {
	hash     uint64
	off, len uint32 // the word in buf
}

// maxPooledWordBytes bounds the buffers a scratch keeps: one message of
// many links would leave them large.
const maxPooledWordBytes = 1 << 16

// len returns the number of words in the set.
func (s *wordSet) len() int {
	if s == nil {
		return 0
	}
	return s.n
}

func (s *wordSet) hash(w []byte) uint64 { return maphash.Bytes(s.seed, w) | 1 }

// has reports whether w is in the set.
func (s *wordSet) has(w string) bool {
	if s.len() == 0 {
		return false
	}
	h := maphash.String(s.seed, w) | 1
	mask := uint64(len(s.slots) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		e := s.slots[j]
		if e.hash == 0 {
			return false
		}
		if e.hash == h && string(s.buf[e.off:e.off+e.len]) == w {
			return true
		}
	}
}

// insert adds the word buf[off:], keeping it in buf when it is new.
func (s *wordSet) insert(off int) {
	w := s.buf[off:]
	if len(w) < 3 {
		s.buf = s.buf[:off]
		return
	}
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	h := s.hash(w)
	mask := uint64(len(s.slots) - 1)
	j := h & mask
	for ; s.slots[j].hash != 0; j = (j + 1) & mask {
		if e := s.slots[j]; e.hash == h && string(s.buf[e.off:e.off+e.len]) == string(w) {
			s.buf = s.buf[:off] // already in
			return
		}
	}
	s.slots[j] = wordSlot{hash: h, off: uint32(off), len: uint32(len(w))}
	s.n++
}

func (s *wordSet) grow() {
	old := s.slots
	s.slots = make([]wordSlot, max(64, 2*len(old)))
	mask := uint64(len(s.slots) - 1)
	for _, e := range old {
		if e.hash != 0 {
			j := e.hash & mask
			for s.slots[j].hash != 0 {
				j = (j + 1) & mask
			}
			s.slots[j] = e
		}
	}
}

// reset empties the set, keeping buffers that are not too large.
func (s *wordSet) reset() {
	if cap(s.buf) > maxPooledWordBytes || len(s.slots) > maxPooledWordBytes/16 {
		*s = wordSet{seed: s.seed}
		return
	}
	if s.n > 0 {
		clear(s.slots)
	}
	s.buf, s.n = s.buf[:0], 0
}

// addWords adds the lower-cased alphanumeric words of s of 3 bytes or
// more: eachAlnumWord's words of strings.ToLower(s). ASCII, most URLs,
// is lower-cased in one pass, without a copy of s.
func (s *wordSet) addWords(str string) {
	if s.seed == (maphash.Seed{}) {
		s.seed = maphash.MakeSeed()
	}
	for i := 0; i < len(str); i++ {
		if str[i] >= utf8.RuneSelf {
			eachAlnumWord(strings.ToLower(str), func(w string) {
				off := len(s.buf)
				s.buf = append(s.buf, w...)
				s.insert(off)
			})
			return
		}
	}
	off := len(s.buf)
	for i := 0; i < len(str); i++ {
		switch c := str[i]; {
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
			s.buf = append(s.buf, c)
		case 'A' <= c && c <= 'Z':
			s.buf = append(s.buf, c+'a'-'A')
		default:
			s.insert(off)
			off = len(s.buf)
		}
	}
	s.insert(off)
}
