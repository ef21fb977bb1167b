package imatchbag

import "math/bits"

// termTable maps the terms of a lexicon to what a Signer or a Lexicon
// knows of them. It replaces a map[string] for the look-ups done for every
// word of every message: a term of up to 16 bytes (nearly all words) is
// stored inline in its 32-byte slot, so that a look-up reads one cache
// line, where a Go map also reads the key's bytes elsewhere in memory.
// Longer terms are kept in an ordinary map. It is read-only once built.
type termTable struct {
	slots []tslot
	shift uint
	long  map[string]tval
}

// tval is the value of a term.
type tval struct {
	df   int32
	rank int32  // rank in B for secondary terms, -1 for primary terms
	mask uint32 // lexicons (bit 0 original, 1..K bags) the term belongs to
}

type tslot struct {
	k0, k1 uint64 // the term's bytes, little-endian, zero-padded
	n      uint32 // len(term); 0 marks an empty slot
	val    tval
}

// maxInline is the longest term stored in a slot.
const maxInline = 16

// load16 packs the first 16 bytes of t (len(t) ≤ 16) into two words.
func load16(t string) (k0, k1 uint64) {
	if len(t) >= 8 {
		k0 = uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
			uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
		r := t[8:]
		if len(r) == 8 {
			k1 = uint64(r[0]) | uint64(r[1])<<8 | uint64(r[2])<<16 | uint64(r[3])<<24 |
				uint64(r[4])<<32 | uint64(r[5])<<40 | uint64(r[6])<<48 | uint64(r[7])<<56
		} else {
			for i := 0; i < len(r); i++ {
				k1 |= uint64(r[i]) << (8 * i)
			}
		}
		return k0, k1
	}
	for i := 0; i < len(t); i++ {
		k0 |= uint64(t[i]) << (8 * i)
	}
	return k0, 0
}

func (tt *termTable) slot(k0, k1 uint64, n int) uint64 {
	hi, lo := bits.Mul64(k0^0x9e3779b97f4a7c15, k1^uint64(n)^0xbf58476d1ce4e5b9)
	return (hi ^ lo) * 0x94d049bb133111eb >> tt.shift
}

// newTermTable builds the table of n terms given by each.
func newTermTable(n int, each func(yield func(string, tval))) *termTable {
	size := 16
	for size*3 < n*4 { // load factor at most 3/4
		size *= 2
	}
	tt := &termTable{slots: make([]tslot, size), shift: uint(64 - bits.Len(uint(size-1)))}
	mask := uint64(size - 1)
	each(func(t string, v tval) {
		if len(t) == 0 || len(t) > maxInline {
			if tt.long == nil {
				tt.long = make(map[string]tval)
			}
			tt.long[t] = v
			return
		}
		k0, k1 := load16(t)
		i := tt.slot(k0, k1, len(t))
		for {
			s := &tt.slots[i]
			if s.n == 0 || (s.n == uint32(len(t)) && s.k0 == k0 && s.k1 == k1) {
				*s = tslot{k0: k0, k1: k1, n: uint32(len(t)), val: v}
				return
			}
			i = (i + 1) & mask
		}
	})
	return tt
}

// get returns the value of t.
func (tt *termTable) get(t string) (tval, bool) {
	if len(t) == 0 || len(t) > maxInline {
		v, ok := tt.long[t]
		return v, ok
	}
	k0, k1 := load16(t)
	mask := uint64(len(tt.slots) - 1)
	n := uint32(len(t))
	for i := tt.slot(k0, k1, len(t)); ; i = (i + 1) & mask {
		s := &tt.slots[i]
		if s.n == n && s.k0 == k0 && s.k1 == k1 {
			return s.val, true
		}
		if s.n == 0 {
			return tval{}, false
		}
	}
}
