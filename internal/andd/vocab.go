package andd

// DocFreqRanger is a DocFreq that can list its vocabulary:
// *imatchbag.Lexicon satisfies it. RangeDF must call fn with every term
// whose DF is positive, and DF must be 0 for every term it does not list.
// NewSigner then indexes the vocabulary once (see vocab), so that a
// message's terms cost one probe of a flat table, which also yields each
// term's sketch hash, instead of a DocFreq.DF call plus a hash.
type DocFreqRanger interface {
	DocFreq
	RangeDF(fn func(term string, df int) bool)
}

// vocabSlot is one slot of the vocabulary table: the first 8 bytes of the
// term (little-endian, zero-padded) and its length identify terms of up
// to 8 bytes without touching the term's bytes; longer ones are compared
// with long[li]. 32 bytes: two slots per cache line.
type vocabSlot struct {
	key  uint64
	hash uint64 // termHash(term, seed): the term's sketch hash stream
	n    uint32 // len(term); 0 for an empty slot
	df   int32
	li   int32 // index into vocab.long of a term longer than 8 bytes
	_    int32
}

// vocab is an open-addressing (linear probing) table of a DocFreq's
// vocabulary with the document frequency and sketch hash of every term.
// It is read-only after newVocab.
type vocab struct {
	slots []vocabSlot
	// long holds the terms longer than 8 bytes.
	long []string
	mask uint64
}

// maxVocab bounds the number of terms indexed (beyond it, look-ups go
// through DocFreq.DF).
const maxVocab = 1 << 22

// newVocab indexes the vocabulary of df, or returns nil when df cannot
// list it or lists too many terms.
func newVocab(df DocFreq, seed uint64) *vocab {
	r, ok := df.(DocFreqRanger)
	if !ok {
		return nil
	}
	type entry struct {
		term string
		df   int
	}
	var all []entry
	tooMany := false
	r.RangeDF(func(t string, d int) bool {
		if len(all) >= maxVocab {
			tooMany = true
			return false
		}
		if d > 0 && len(t) > 0 && len(t) <= 1<<20 {
			all = append(all, entry{t, d})
		}
		return true
	})
	if tooMany {
		return nil
	}
	size := 16
	for size < 2*len(all) {
		size *= 2
	}
	v := &vocab{slots: make([]vocabSlot, size), mask: uint64(size - 1)}
	for _, e := range all {
		if d, _ := v.lookup(e.term); d != 0 {
			continue // listed twice
		}
		key := prefix8(e.term)
		i := indexHash(e.term) & v.mask
		for v.slots[i].n != 0 {
			i = (i + 1) & v.mask
		}
		v.slots[i] = vocabSlot{key: key, hash: termHash(e.term, seed), n: uint32(len(e.term)),
			df: int32(min(e.df, 1<<31-1))}
		if len(e.term) > 8 {
			v.slots[i].li = int32(len(v.long))
			v.long = append(v.long, e.term)
		}
	}
	return v
}

// lookup returns the document frequency and sketch hash of term; df is 0
// when the term is not in the vocabulary.
func (v *vocab) lookup(term string) (df int32, hash uint64) {
	n := uint32(len(term))
	if n == 0 {
		return 0, 0
	}
	key := prefix8(term)
	i := indexHash(term) & v.mask
	for {
		s := &v.slots[i]
		if s.n == 0 {
			return 0, 0
		}
		if s.n == n && s.key == key && (n <= 8 || v.long[s.li] == term) {
			return s.df, s.hash
		}
		i = (i + 1) & v.mask
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

// indexHash is a fast string hash for the vocabulary's table (not part
// of any wire format): 8 bytes per multiply. The table is fixed when the
// vocabulary is built, so no message's text can lengthen its probes.
func indexHash(s string) uint64 {
	const m = 0x9fb21c651e98df25
	h := uint64(len(s)) * golden
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
