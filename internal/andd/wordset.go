package andd

import (
	"hash/maphash"
	"unicode"
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
	// used lists the slots taken, so that reset clears only them when
	// they are few (a message with many links leaves the table large).
	used []uint32
	// prefix has bit prefixBit(w) set for every word w of the set: most
	// terms of a message are not URL words, and hasFirstWord rules them
	// out with one load, without finding the first word or hashing it.
	prefix [prefixWords]uint64
}

// prefixWords is the size of wordSet.prefix in 64-bit words.
const prefixWords = 16

// prefixBit is the bit of wordSet.prefix of the words that start with
// the bytes a, b, c.
func prefixBit(a, b, c byte) uint32 {
	return (uint32(a) | uint32(b)<<8 | uint32(c)<<16) * 0x9e3779b1 >> (32 - 10)
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
	if s.len() == 0 || len(w) < 3 { // insert keeps no shorter word
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

// hasFirstWord reports whether the first word of term (up to its first
// space: a k-gram's) is in the set: has(firstWord(term)).
func (s *wordSet) hasFirstWord(term string) bool {
	// A word of the set has 3 bytes or more, which its first word
	// shares with term.
	if s.len() == 0 || len(term) < 3 {
		return false
	}
	if b := prefixBit(term[0], term[1], term[2]); s.prefix[b/64&(prefixWords-1)]>>(b%64)&1 == 0 {
		return false
	}
	return s.has(firstWord(term))
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
	s.used = append(s.used, uint32(j))
	b := prefixBit(w[0], w[1], w[2])
	s.prefix[b/64&(prefixWords-1)] |= 1 << (b % 64)
	s.n++
}

func (s *wordSet) grow() {
	old := s.slots
	s.slots = make([]wordSlot, max(64, 2*len(old)))
	s.used = s.used[:0]
	mask := uint64(len(s.slots) - 1)
	for _, e := range old {
		if e.hash != 0 {
			j := e.hash & mask
			for s.slots[j].hash != 0 {
				j = (j + 1) & mask
			}
			s.slots[j] = e
			s.used = append(s.used, uint32(j))
		}
	}
}

// reset empties the set, keeping buffers that are not too large.
func (s *wordSet) reset() {
	if cap(s.buf) > maxPooledWordBytes || len(s.slots) > maxPooledWordBytes/16 {
		*s = wordSet{seed: s.seed}
		return
	}
	if 4*s.n < len(s.slots) {
		for _, j := range s.used {
			s.slots[j] = wordSlot{}
		}
	} else {
		clear(s.slots)
	}
	s.buf, s.n, s.used = s.buf[:0], 0, s.used[:0]
	s.prefix = [prefixWords]uint64{}
}

// addWords adds the lower-cased alphanumeric words of s of 3 bytes or
// more: eachAlnumWord's words of strings.ToLower(s), written into the
// buffer as they are read, without a lower-cased copy of s.
func (s *wordSet) addWords(str string) {
	if s.seed == (maphash.Seed{}) {
		s.seed = maphash.MakeSeed()
	}
	off := len(s.buf)
	for i := 0; i < len(str); i++ {
		switch c := str[i]; {
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
			s.buf = append(s.buf, c)
		case 'A' <= c && c <= 'Z':
			s.buf = append(s.buf, c+'a'-'A')
		case c >= utf8.RuneSelf:
			s.addWordsUnicode(str[i:], off)
			return
		default:
			s.insert(off)
			off = len(s.buf)
		}
	}
	s.insert(off)
}

// addWordsUnicode is addWords from the first non-ASCII byte of a string
// on, the current word starting at buf[off:]. strings.ToLower maps each
// rune with unicode.ToLower (an invalid byte becomes U+FFFD, which is no
// letter, as the invalid byte is not): a word is a run of runes whose
// lower-case is a letter or a digit.
func (s *wordSet) addWordsUnicode(str string, off int) {
	for i := 0; i < len(str); {
		c := str[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
				s.buf = append(s.buf, c)
			case 'A' <= c && c <= 'Z':
				s.buf = append(s.buf, c+'a'-'A')
			default:
				s.insert(off)
				off = len(s.buf)
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(str[i:])
		i += size
		if l := unicode.ToLower(r); r != utf8.RuneError && (unicode.IsLetter(l) || unicode.IsDigit(l)) {
			s.buf = utf8.AppendRune(s.buf, l)
			continue
		}
		s.insert(off)
		off = len(s.buf)
	}
	s.insert(off)
}
