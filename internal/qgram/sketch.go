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
	opts   SketchOptions
	tables sync.Pool // *[]uint64: open-addressing sets of q-gram hashes
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
	size := 64
	for size < 2*n {
		size <<= 1
	}
	tp, _ := s.tables.Get().(*[]uint64)
	if tp == nil {
		tp = new([]uint64)
	}
	if cap(*tp) < size {
		*tp = make([]uint64, size)
	}
	table := (*tp)[:size]
	clear(table)
	defer s.tables.Put(tp)
	mask := uint64(size - 1)
	for i := range sk.Min {
		sk.Min[i] = emptyBin
	}
	var prev uint64 // the SketchQ−1 previous code points, 21 bits each
	// At most MaxRunes characters kept, and 8 × MaxRunes looked at: a
	// text of white space alone is not read to its end.
	read, seen := 0, 0
	maxRead, maxSeen := s.opts.MaxRunes, 8*s.opts.MaxRunes
	distinct := uint32(0)
	// add counts the q-gram ending in r (k: the characters before it)
	// and keeps its hash's minimum in its bin.
	add := func(k uint64, r rune) {
		h := sketchHash(k, r)
		if h == 0 {
			h = 1 // 0 marks a free slot
		}
		j := h & mask
		for table[j] != 0 && table[j] != h {
			j = (j + 1) & mask
		}
		if table[j] == h {
			return
		}
		table[j] = h
		distinct++
		bin, v := h>>(64-7), uint32(h)
		if v == emptyBin {
			v--
		}
		sk.Min[bin] = min(sk.Min[bin], v)
	}
	for _, t := range texts {
		for i := 0; i < len(t) && read < maxRead && seen < maxSeen; {
			if t[i] < utf8.RuneSelf {
				// A run of ASCII, one byte a character, read through one
				// table (dropped, or lower-cased), up to the bounds.
				end := min(len(t), i+maxSeen-seen)
				start := i
				for ; i < end; i++ {
					c := t[i]
					if c >= utf8.RuneSelf {
						break
					}
					l := asciiNormal[c]
					if l == 0 {
						continue
					}
					if read == maxRead {
						break
					}
					read++
					k := prev
					prev = (prev<<21 | uint64(l)) & (1<<63 - 1)
					if read >= SketchQ {
						add(k, rune(l))
					}
				}
				seen += i - start
				continue
			}
			seen++
			r, size := utf8.DecodeRuneInString(t[i:])
			i += size
			if drop(r) {
				continue
			}
			r = toLower(r)
			read++
			k := prev
			prev = (prev<<21 | uint64(r)) & (1<<63 - 1)
			if read >= SketchQ {
				add(k, r)
			}
		}
	}
	if int(distinct) < s.opts.MinGrams {
		return Sketch{}, false
	}
	sk.Size = distinct
	return sk, true
}

// asciiNormal holds, for each ASCII character, the character the normal
// form keeps (lower-cased), or 0 when it drops it (see drop; NUL is
// dropped).
var asciiNormal = func() (t [utf8.RuneSelf]byte) {
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
	keys := make([][]byte, Bands)
	buf := make([]byte, Bands*KeyLen)
	for b := range Bands {
		h := uint64(14695981039346656037)
		for _, c := range []byte{SketchVersion, Family, byte(b)} {
			h = (h ^ uint64(c)) * 1099511628211
		}
		for r := range Rows {
			v := d[b*Rows+r]
			for range 4 {
				h = (h ^ uint64(v&0xff)) * 1099511628211
				v >>= 8
			}
		}
		k := buf[b*KeyLen : (b+1)*KeyLen : (b+1)*KeyLen]
		k[0], k[1], k[2] = SketchVersion, Family, byte(b)
		binary.BigEndian.PutUint64(k[3:], mix(h))
		keys[b] = k
	}
	return keys
}

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
