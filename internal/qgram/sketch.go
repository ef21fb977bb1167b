package qgram

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"unicode/utf8"
)

// The q-gram evidence family of the campaign engine. A message's text
// (subject and visible text, lower-cased, in the paper's normal form) is
// summarized by a Sketch: the number of its distinct q-grams and, for
// each of Bins bins, the smallest hash of the q-grams falling in the bin
// (one-permutation min-hashing, Li, Owen & Zhang 2012). Two sketches give
// an estimate of the Jaccard similarity of the q-gram sets, hence of the
// paper's docq (EstimateSimilarity). The band keys hash Rows bins at a
// time, after the empty bins of a short text are filled from their
// neighbours (rotation densification, Shrivastava & Li 2014), so that
// copies whose q-gram sets overlap much share a key with high
// probability.

// SketchVersion is the version of the sketch and key wire format. Any
// change of what is hashed, or how, increments it.
const SketchVersion = 1

// Family is the family byte of q-gram band keys (byte 1 of a key) and
// the first byte of an encoded sketch.
const Family = 'Q'

// KeyLen is the length of a band key: version, family, band number and 8
// bytes of hash.
const KeyLen = 3 + 8

// Wire-format parameters: changing them bumps SketchVersion.
const (
	// Bins is the number of min-hash bins of a sketch.
	Bins = 128
	// Rows is the number of bins a band key hashes: a band agrees with
	// probability J^Rows for q-gram sets of Jaccard similarity J, so that
	// the copies of a campaign (J ≥ 0.4) share some band with it and
	// unrelated texts (J around 0.1, common q-grams of a language) almost
	// never do: each band key of a message must not find a share of
	// every campaign of a large store.
	Rows = 5
	// Bands is the number of band keys of a sketch (bins 0 … Bands×Rows−1).
	Bands = 25
	// SketchQ is the q-gram length of sketches: the paper's.
	SketchQ = DefaultQ
)

// emptyBin marks a bin no q-gram fell in.
const emptyBin = math.MaxUint32

// Sketch is the q-gram summary of a text.
type Sketch struct {
	// Size is the number of distinct q-grams of the text (read up to
	// SketchOptions.MaxRunes characters).
	Size uint32
	// Min holds, per bin, the smallest value of the q-grams in it
	// (emptyBin when none).
	Min [Bins]uint32
}

// IsEmpty reports whether the sketch has no q-gram.
func (s *Sketch) IsEmpty() bool { return s == nil || s.Size == 0 }

// SketchOptions configure a Sketcher. The zero value selects the defaults.
type SketchOptions struct {
	// MinGrams is the number of distinct q-grams a text needs for a
	// sketch: fewer make too rough an estimate (short messages have
	// their own keys). Default 128.
	MinGrams int
	// MaxRunes bounds the characters of the normal form read from a
	// text (and 8 × MaxRunes bounds the characters looked at). Default
	// 1 << 15.
	MaxRunes int
	// Threshold is the estimated docq a message needs with a campaign's
	// sketch for the match to count. Default DefaultEngineThreshold.
	Threshold float64
}

// DefaultEngineThreshold is the default SketchOptions.Threshold. It is
// lower than the paper's td: a copy of a spam with a third of its words
// misspelled keeps about three quarters of its q-grams, and ham shares
// fewer with any reported spam (docs/design/qgram.md).
const DefaultEngineThreshold = 0.55

func (o SketchOptions) withDefaults() SketchOptions {
	if o.MinGrams <= 0 {
		o.MinGrams = 128
	}
	if o.MaxRunes <= 0 {
		o.MaxRunes = 1 << 15
	}
	if o.Threshold <= 0 {
		o.Threshold = DefaultEngineThreshold
	}
	return o
}

// Sketcher computes sketches. It is safe for concurrent use.
type Sketcher struct {
	opts SketchOptions
	sets sync.Pool // *gramSet
}

// NewSketcher returns a Sketcher with the given options.
func NewSketcher(opts SketchOptions) *Sketcher {
	return &Sketcher{opts: opts.withDefaults()}
}

// Threshold returns the estimated docq a match needs.
func (s *Sketcher) Threshold() float64 { return s.opts.Threshold }

// Sketch returns the sketch of the texts, read one after the other as one
// text (subject, then body), and false when they have fewer than
// SketchOptions.MinGrams distinct q-grams.
//
// The texts are read in two steps a batch at a time: their characters
// are reduced to the normal form in gramSet.runes, then the q-grams of
// the batch are hashed into the sketch (gramSet.add). Each loop is small
// and without a branch on the text (a dropped character, a repeated
// q-gram) that the processor could not predict.
func (s *Sketcher) Sketch(texts ...string) (Sketch, bool) {
	n := 0
	for _, t := range texts {
		n += len(t)
	}
	n = min(n, s.opts.MaxRunes)
	var sk Sketch
	if n < SketchQ {
		return sk, false
	}
	g, _ := s.sets.Get().(*gramSet)
	if g == nil {
		g = new(gramSet)
	}
	defer s.sets.Put(g)
	g.reset(n)
	// At most MaxRunes characters kept, and 8 × MaxRunes looked at: a
	// text of white space alone is not read to its end.
	read, seen := 0, 0
	maxRead, maxSeen := s.opts.MaxRunes, 8*s.opts.MaxRunes
	buf := &g.runes
	kept := 0 // the characters in buf
	for _, t := range texts {
		for i := 0; i < len(t) && read < maxRead && seen < maxSeen; {
			room := min(len(buf)-kept, maxRead-read)
			if room == 0 {
				g.add(buf[:kept])
				kept = 0
				continue
			}
			if t[i] < utf8.RuneSelf {
				// A run of ASCII, one byte a character, read through one
				// table (dropped, or lower-cased): a dropped character is
				// written and overwritten. Each byte keeps at most one
				// character, so that room bounds the bytes read.
				end := min(len(t), i+room, i+maxSeen-seen)
				start, from := i, kept
				for ; i+8 <= end; i += 8 {
					// Eight bytes at a time while they are all ASCII.
					b := t[i : i+8]
					w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
						uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
					if w&0x8080808080808080 != 0 {
						break
					}
					kept = putASCII(buf, kept, b[0])
					kept = putASCII(buf, kept, b[1])
					kept = putASCII(buf, kept, b[2])
					kept = putASCII(buf, kept, b[3])
					kept = putASCII(buf, kept, b[4])
					kept = putASCII(buf, kept, b[5])
					kept = putASCII(buf, kept, b[6])
					kept = putASCII(buf, kept, b[7])
				}
				for ; i < end && t[i] < utf8.RuneSelf; i++ {
					kept = putASCII(buf, kept, t[i])
				}
				seen += i - start
				read += kept - from
				continue
			}
			seen++
			r, size := utf8.DecodeRuneInString(t[i:])
			i += size
			if drop(r) {
				continue
			}
			buf[kept] = uint32(toLower(r))
			kept++
			read++
		}
	}
	g.add(buf[:kept])
	if int(g.n) < s.opts.MinGrams {
		return Sketch{}, false
	}
	sk.Size = g.n
	for i, m := range g.mins {
		// A bin's value is the smallest low 32 bits of its hashes,
		// emptyBin (which marks an empty bin) taken as emptyBin−1; an
		// empty bin's emptyMin sets every bit.
		sk.Min[i] = uint32(min(m, emptyBin-1)) | -uint32(m>>32)
	}
	return sk, true
}

// runeBatch is the number of characters of the normal form hashed at a
// time.
const runeBatch = 1024

// gramSet holds the work of one sketch, reused from sketch to sketch: a
// batch of characters of the normal form, the SketchQ−1 characters
// before them, and the set of the hashes of the q-grams met, an
// open-addressing table with linear probing (0 marks a free slot).
type gramSet struct {
	runes [runeBatch]uint32
	prev  uint64 // the SketchQ−1 previous characters, 21 bits each
	lead  int    // the characters still to read before the first q-gram
	table []uint64
	mask  uint64
	n     uint32 // the hashes in table
	// mins holds, per bin, the smallest low 32 bits of the hashes in
	// it, or emptyMin.
	mins [Bins]uint64
}

// emptyMin marks a bin of gramSet.mins no hash fell in.
const emptyMin = 1 << 32

// reset empties the set, with a table of at least 2n slots: a text of
// n characters has at most n q-grams, and the table stays half empty.
func (g *gramSet) reset(n int) {
	size := 64
	for size < 2*n {
		size <<= 1
	}
	if cap(g.table) < size {
		g.table = make([]uint64, size)
	}
	g.table = g.table[:size]
	clear(g.table)
	g.mask = uint64(size - 1)
	g.prev, g.lead, g.n = 0, SketchQ-1, 0
	for i := range g.mins {
		g.mins[i] = emptyMin
	}
}

// add adds the q-grams ending in the characters rs: the hash of each is
// kept in the minimum of its bin and, when it is new, in the set. A
// repeated q-gram finds its hash in the table, and leaves the minimum as
// it is.
func (g *gramSet) add(rs []uint32) {
	prev := g.prev
	for g.lead > 0 && len(rs) > 0 {
		prev = (prev<<21 | uint64(rs[0])) & (1<<63 - 1)
		rs = rs[1:]
		g.lead--
	}
	table, mask, n := g.table, g.mask, g.n
	for _, r := range rs {
		h := sketchHash(prev, rune(r))
		prev = (prev<<21 | uint64(r)) & (1<<63 - 1)
		if h == 0 {
			h = 1 // 0 marks a free slot
		}
		j := h & mask
		e := table[j]
		for min(e, e^h) != 0 { // neither free nor h
			j = (j + 1) & mask
			e = table[j]
		}
		table[j] = h
		n += isZero(e)
		g.mins[h>>(64-7)] = min(g.mins[h>>(64-7)], h&math.MaxUint32)
	}
	g.prev, g.n = prev, n
}

// isZero returns 1 when x is 0, else 0 (without a branch).
func isZero(x uint64) uint32 {
	if x == 0 {
		return 1
	}
	return 0
}

// putASCII writes to buf[kept] the normal form of c, an ASCII character,
// and returns kept+1, or kept when c is dropped (written, to be
// overwritten: there is no branch on it). kept is below len(buf).
func putASCII(buf *[runeBatch]uint32, kept int, c byte) int {
	l := asciiNormal[c]
	buf[uint(kept)%runeBatch] = uint32(l)
	return kept + int(l+0x7f)>>7 // l < 0x80: 1 unless l is 0
}

// asciiNormal holds, for each ASCII character, the character the normal
// form keeps (lower-cased), or 0 when it drops it (see drop; NUL is
// dropped). It has 256 entries, so that a byte indexes it without a
// bounds check (the others are not used).
var asciiNormal = func() (t [256]byte) {
	for c := range rune(utf8.RuneSelf) {
		if !drop(c) {
			t[c] = byte(toLower(c))
		}
	}
	return t
}()

// sketchHash hashes a q-gram of a sketch: its first three code points
// (21 bits each, packed into one word: first3), multiplied by an odd constant,
// combined with the fourth and mixed (splitmix64's finalizer). Cheaper
// than hashGram's byte loop, on the one path every checked message takes.
func sketchHash(first3 uint64, last rune) uint64 {
	return mix(first3*0x9e3779b97f4a7c15 ^ uint64(last))
}

// mix is the finalizer of splitmix64: it spreads FNV's bits so that the
// bin (top bits) and value (low bits) are independent.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// toLower lower-cases r (ASCII without a table lookup).
func toLower(r rune) rune {
	if r < 0x80 {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	return unicodeToLower(r)
}

// EstimateJaccard estimates the Jaccard similarity of the q-gram sets of
// two sketches: the share of equal bins among the bins not empty in both
// (the one-permutation estimator). 0 when either is empty.
func EstimateJaccard(a, b *Sketch) float64 {
	if a.IsEmpty() || b.IsEmpty() {
		return 0
	}
	eq, used := 0, 0
	for i := range a.Min {
		x, y := a.Min[i], b.Min[i]
		if x == emptyBin && y == emptyBin {
			continue
		}
		used++
		if x == y {
			eq++
		}
	}
	if used == 0 {
		return 0
	}
	return float64(eq) / float64(used)
}

// EstimateSimilarity estimates the paper's docq of the two texts from
// their sketches: with Jaccard J and sizes |A|, |B|, the intersection is
// J(|A|+|B|)/(1+J), over max(|A|, |B|).
func EstimateSimilarity(a, b *Sketch) float64 {
	j := EstimateJaccard(a, b)
	if j <= 0 {
		return 0
	}
	sa, sb := float64(a.Size), float64(b.Size)
	inter := math.Min(j*(sa+sb)/(1+j), math.Min(sa, sb))
	return inter / math.Max(sa, sb)
}

// BandKeys returns the store keys of a sketch: Bands keys, each the hash
// of Rows consecutive bins after densification. None for an empty sketch.
func BandKeys(s *Sketch) [][]byte {
	if s.IsEmpty() {
		return nil
	}
	d := densify(s)
	// The keys and their bytes in one allocation.
	blk := new(struct {
		keys [Bands][]byte
		buf  [Bands * KeyLen]byte
	})
	keys, buf := blk.keys[:], blk.buf[:]
	for b := range Bands {
		// FNV-1a over the version, family and band bytes, then each
		// bin's 4 bytes, little-endian.
		h := bandFNV
		h = (h ^ uint64(b)) * fnvPrime
		for _, v := range d[b*Rows : (b+1)*Rows] {
			h = (h ^ uint64(v&0xff)) * fnvPrime
			h = (h ^ uint64(v>>8&0xff)) * fnvPrime
			h = (h ^ uint64(v>>16&0xff)) * fnvPrime
			h = (h ^ uint64(v>>24)) * fnvPrime
		}
		k := buf[b*KeyLen : (b+1)*KeyLen : (b+1)*KeyLen]
		k[0], k[1], k[2] = SketchVersion, Family, byte(b)
		binary.BigEndian.PutUint64(k[3:], mix(h))
		keys[b] = k
	}
	return keys
}

// fnvPrime is the 64-bit FNV prime.
const fnvPrime = 1099511628211

// bandFNV is the FNV-1a state of a band key's hash after its version
// and family bytes.
var bandFNV = func() uint64 {
	h := uint64(14695981039346656037)
	h = (h ^ SketchVersion) * fnvPrime
	return (h ^ Family) * fnvPrime
}()

// densify fills each empty bin with the value of the next non-empty bin
// (circularly) plus a constant times the distance, so that two texts
// with the same q-grams fill the same way.
func densify(s *Sketch) [Bins]uint32 {
	d := s.Min
	for i := range d {
		if d[i] != emptyBin {
			continue
		}
		for k := 1; k < Bins; k++ {
			if v := s.Min[(i+k)%Bins]; v != emptyBin {
				d[i] = v + uint32(k)*0x9e3779b1
				break
			}
		}
	}
	return d
}

// IsKey reports whether k is a q-gram band key of this SketchVersion.
func IsKey(k []byte) bool {
	return len(k) == KeyLen && k[0] == SketchVersion && k[1] == Family
}

// sketchLen is the length of an encoded sketch.
const sketchLen = 4 + 4 + 4*Bins

// IsSketch reports whether b looks like an encoded q-gram sketch (its
// first bytes): other families' sketches do not.
func IsSketch(b []byte) bool {
	return len(b) >= 2 && b[0] == Family && b[1] == SketchVersion
}

// MarshalBinary encodes the sketch: 'Q', SketchVersion, SketchQ, Rows,
// then Size and the bins, 32 bits little-endian each.
func (s Sketch) MarshalBinary() ([]byte, error) {
	b := make([]byte, 8, sketchLen)
	b[0], b[1], b[2], b[3] = Family, SketchVersion, SketchQ, Rows
	binary.LittleEndian.PutUint32(b[4:], s.Size)
	for _, v := range s.Min {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b, nil
}

// ErrSketch is wrapped by UnmarshalSketch's errors.
var ErrSketch = errors.New("q-gram sketch: undecodable")

// UnmarshalSketch decodes MarshalBinary's output.
func UnmarshalSketch(b []byte) (Sketch, error) {
	if len(b) != sketchLen {
		return Sketch{}, fmt.Errorf("%w: %d bytes, want %d", ErrSketch, len(b), sketchLen)
	}
	if b[0] != Family || b[1] != SketchVersion || b[2] != SketchQ || b[3] != Rows {
		return Sketch{}, fmt.Errorf("%w: header % x", ErrSketch, b[:4])
	}
	var s Sketch
	s.Size = binary.LittleEndian.Uint32(b[4:])
	p := b[8:]
	for i := range s.Min {
		s.Min[i] = binary.LittleEndian.Uint32(p[4*i:])
	}
	return s, nil
}
