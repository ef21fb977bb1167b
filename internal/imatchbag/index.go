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
	long  []string
	mask  uint64
}

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
	x := &lexIndex{slots: make([]lexSlot, size), mask: uint64(size - 1)}
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
	i := lexHash(t) & x.mask
	for x.slots[i].n != 0 {
		i = (i + 1) & x.mask
	}
	s := &x.slots[i]
	*s = lexSlot{key: prefix8(t), n: uint32(len(t))}
	if len(t) > 8 {
		s.li = int32(len(x.long))
		x.long = append(x.long, t)
	}
	return s
}

// find returns the slot of t, or nil when t is not in the lexicon.
func (x *lexIndex) find(t string) *lexSlot {
	if k := x.findAt(t, lexHash(t)&x.mask); k != 0 {
		return &x.slots[k-1]
	}
	return nil
}

// findAll sets at[i] to 1 + the index in slots of terms[i], or 0 when
// it is not in the lexicon; at is as long as terms. It first reads the
// first slot of every term, loads that do not depend on each other and
// that the processor overlaps, then compares: a message's terms are
// spread over a table larger than the processor's caches, and looking
// them up one at a time would wait for each load in turn.
func (x *lexIndex) findAll(terms []string, at []uint64) {
	for i, t := range terms {
		j := lexHash(t) & x.mask
		at[i] = j<<32 | uint64(x.slots[j].n)
	}
	for i, t := range terms {
		if uint32(at[i]) == 0 { // the first slot is empty
			at[i] = 0
			continue
		}
		at[i] = x.findAt(t, at[i]>>32)
	}
}

// findAt returns 1 + the index of t's slot, probing from slot j, or 0.
func (x *lexIndex) findAt(t string, j uint64) uint64 {
	n := uint32(len(t))
	if n == 0 {
		return 0
	}
	key := prefix8(t)
	for {
		s := &x.slots[j]
		if s.n == 0 {
			return 0
		}
		if s.n == n && s.key == key && (n <= 8 || x.long[s.li] == t) {
			return j + 1
		}
		j = (j + 1) & x.mask
	}
}

// prefix8 is the first 8 bytes of s, little-endian, zero-padded.
func prefix8(s string) uint64 {
	if len(s) >= 8 {
		return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	}
	var w uint64
	for i := 0; i < len(s); i++ {
		w |= uint64(s[i]) << (8 * i)
	}
	return w
}

// lexHash is a fast string hash for the index (no wire format): 8 bytes
// per multiply.
func lexHash(s string) uint64 {
	const m = 0x9fb21c651e98df25
	h := uint64(len(s)) * 0x9e3779b97f4a7c15
	for len(s) >= 8 {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		h = (h ^ w) * m
		h ^= h >> 32
		s = s[8:]
	}
	var w uint64
	for i := 0; i < len(s); i++ {
		w |= uint64(s[i]) << (8 * i)
	}
	h = (h ^ w) * m
	return h ^ h>>29
}
