package imatchbag

// lexSlot is one term of the signer's lexicon index: the first 8 bytes of
// the term (little-endian, zero-padded) and its length identify terms of
// up to 8 bytes without touching the term's bytes; longer ones are
// compared with long[li]. 32 bytes: two slots per cache line.
type lexSlot struct {
	key   uint64
	n     uint32 // len(term); 0 for an empty slot
	df    int32  // Lexicon.DF
	pmask uint32 // the bags of a term of L (never 0 for one), else 0
	smask uint32 // the bags of a term of B (never 0 for one), else 0
	srank int32  // the rank in B of a term of B
	li    int32  // index into lexIndex.long of a term longer than 8 bytes
}

// lexIndex is an open-addressing (linear probing) table of every term of
// a lexicon (its document frequencies, L and B) with what a Signer knows
// of it: one probe gives a term's class, bags and document frequency, the
// look-up SignSortedDF makes once per term for both I-Match and ANDD.
// It is read-only after newLexIndex.
type lexIndex struct {
	slots []lexSlot
	// tags has one byte per slot: 0 for an empty one, else tagOf the
	// hash of its term. A probe reads tags (a table a sixteenth of the
	// size of slots, which stays in the processor's cache) and reads a
	// slot only where a tag agrees: most of a message's words are not in
	// the lexicon, and need no read of slots at all.
	tags []uint8
	long []string
	mask uint64
}

// tagOf is a slot's tag for a term of hash h: its top 7 bits, with the
// high bit set so that no tag is 0.
func tagOf(h uint64) uint8 { return 0x80 | uint8(h>>57) }

// newLexIndex indexes the terms of lex with the signer's term infos.
func newLexIndex(lex *Lexicon, primary, secondary map[string]termInfo) *lexIndex {
	n := len(lex.df)
	for _, m := range []map[string]termInfo{primary, secondary} {
		for t := range m {
			if _, ok := lex.df[t]; !ok {
				n++
			}
		}
	}
	size := 16
	for size < 2*n {
		size *= 2
	}
	x := &lexIndex{slots: make([]lexSlot, size), tags: make([]uint8, size), mask: uint64(size - 1)}
	for t, d := range lex.df {
		x.insert(t).df = d
	}
	for t, ti := range primary {
		x.insert(t).pmask = ti.mask
	}
	for t, ti := range secondary {
		s := x.insert(t)
		s.smask, s.srank = ti.mask, ti.rank
	}
	return x
}

// insert returns the slot of t, made when t is new.
func (x *lexIndex) insert(t string) *lexSlot {
	if s := x.find(t); s != nil {
		return s
	}
	h := lexHash(t)
	i := h & x.mask
	for x.slots[i].n != 0 {
		i = (i + 1) & x.mask
	}
	s := &x.slots[i]
	*s = lexSlot{key: prefix8(t), n: uint32(len(t))}
	x.tags[i] = tagOf(h)
	if len(t) > 8 {
		s.li = int32(len(x.long))
		x.long = append(x.long, t)
	}
	return s
}

// find returns the slot of t, or nil when t is not in the lexicon.
func (x *lexIndex) find(t string) *lexSlot {
	h := lexHash(t)
	if k := x.findFrom(t, h&x.mask, tagOf(h)); k != 0 {
		return &x.slots[k-1]
	}
	return nil
}

// findAll sets at[i] to 1 + the index in slots of terms[i], or 0 when
// it is not in the lexicon; at is as long as terms. It first finds each
// term's first slot whose tag agrees (in tags, which stay cached), then
// reads those slots, loads that do not depend on each other and that the
// processor overlaps, then compares: the slots of a message's terms are
// spread over a table larger than the processor's caches, and looking
// them up one at a time would wait for each load in turn.
func (x *lexIndex) findAll(terms []string, at []uint64) {
	for i, t := range terms {
		h := lexHash(t)
		j, tag := h&x.mask, tagOf(h)
		for x.tags[j] != tag && x.tags[j] != 0 {
			j = (j + 1) & x.mask
		}
		if x.tags[j] == 0 || len(t) == 0 {
			at[i] = 0 // no slot with its tag before an empty one
			continue
		}
		// The slot's length is read here (and kept, unused, in at[i])
		// so that the loads of every term's slot are issued together.
		at[i] = 1<<63 | j<<16 | uint64(tag)<<8 | uint64(uint8(x.slots[j].n))
	}
	for i, t := range terms {
		if at[i] == 0 {
			continue
		}
		j, tag := (at[i]&^(1<<63))>>16, uint8(at[i]>>8)
		at[i] = x.findFrom(t, j, tag)
	}
}

// findFrom returns 1 + the index of t's slot, probing from slot j for
// slots of tag tag, or 0.
func (x *lexIndex) findFrom(t string, j uint64, tag uint8) uint64 {
	n := uint32(len(t))
	if n == 0 {
		return 0
	}
	key := prefix8(t)
	for {
		switch x.tags[j] {
		case 0:
			return 0
		case tag:
			s := &x.slots[j]
			if s.n == n && s.key == key && (n <= 8 || x.long[s.li] == t) {
				return j + 1
			}
		}
		j = (j + 1) & x.mask
	}
}

// prefix8 is the first 8 bytes of s, little-endian, zero-padded.
func prefix8(s string) uint64 {
	n := len(s)
	switch {
	case n >= 8:
		_ = s[7]
		return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	case n >= 4:
		// Two overlapping 4-byte loads: the bytes both hold land on the
		// same bits.
		t := s[n-4:]
		_, _ = s[3], t[3]
		lo := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
		hi := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24
		return lo | hi<<(8*(n-4))
	case n >= 2:
		return uint64(s[0]) | uint64(s[1])<<8 | (uint64(s[n-2])|uint64(s[n-1])<<8)<<(8*(n-2))
	case n == 1:
		return uint64(s[0])
	}
	return 0
}

// lexHash is a fast string hash for the index (no wire format): 8 bytes
// per multiply.
func lexHash(s string) uint64 {
	const m = 0x9fb21c651e98df25
	h := uint64(len(s)) * 0x9e3779b97f4a7c15
	for len(s) >= 8 {
		h = (h ^ prefix8(s)) * m
		h ^= h >> 32
		s = s[8:]
	}
	h = (h ^ prefix8(s)) * m
	return h ^ h>>29
}
