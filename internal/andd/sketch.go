package andd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Hashing. These functions are part of the sketch wire format (pinned by
// the golden tests): changing them requires bumping SketchVersion.

const (
	golden    = 0x9e3779b97f4a7c15
	fnvOffset = 0xcbf29ce484222325
	fnvPrime  = 0x100000001b3
	// mhSalt separates the min-hash stream of a term from its hyperplanes.
	mhSalt = 0x6a09e667f3bcc909
	// densifySalt mixes the distance into borrowed min-hash values.
	densifySalt = 0xbb67ae8584caa73b
)

// splitmix64 is the finalizer of SplitMix64 (Steele et al.), a bijective
// 64-bit mixer.
func splitmix64(x uint64) uint64 {
	x += golden
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// termHash is FNV-1a of the term mixed with the seed.
func termHash(term string, seed uint64) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(term); i++ {
		h ^= uint64(term[i])
		h *= fnvPrime
	}
	return splitmix64(h ^ seed)
}

// Sketch wire format: version byte, flags byte (0), uint16 number of
// 64-bit words of Bits, uint16 number of MinHash values, then the words
// and the values, little-endian.
const sketchHeader = 6

// MarshalBinary encodes the sketch in its versioned wire form.
func (s Sketch) MarshalBinary() ([]byte, error) {
	if len(s.Bits) > math.MaxUint16 || len(s.MinHash) > math.MaxUint16 {
		return nil, errors.New("sketch: too large to encode")
	}
	b := make([]byte, sketchHeader, sketchHeader+8*len(s.Bits)+4*len(s.MinHash))
	b[0] = SketchVersion
	binary.LittleEndian.PutUint16(b[2:], uint16(len(s.Bits)))
	binary.LittleEndian.PutUint16(b[4:], uint16(len(s.MinHash)))
	for _, w := range s.Bits {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	for _, v := range s.MinHash {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b, nil
}

// UnmarshalSketch decodes MarshalBinary's output.
func UnmarshalSketch(b []byte) (Sketch, error) {
	if len(b) < sketchHeader {
		return Sketch{}, fmt.Errorf("sketch: %d bytes, shorter than the header", len(b))
	}
	if b[0] != SketchVersion {
		return Sketch{}, fmt.Errorf("sketch: version %d, want %d", b[0], SketchVersion)
	}
	if b[1] != 0 {
		return Sketch{}, fmt.Errorf("sketch: unknown flags %#x", b[1])
	}
	nw := int(binary.LittleEndian.Uint16(b[2:]))
	nm := int(binary.LittleEndian.Uint16(b[4:]))
	if want := sketchHeader + 8*nw + 4*nm; len(b) != want {
		return Sketch{}, fmt.Errorf("sketch: %d bytes, want %d", len(b), want)
	}
	var s Sketch
	p := b[sketchHeader:]
	if nw > 0 {
		s.Bits = make([]uint64, nw)
		for i := range s.Bits {
			s.Bits[i] = binary.LittleEndian.Uint64(p)
			p = p[8:]
		}
	}
	if nm > 0 {
		s.MinHash = make([]uint32, nm)
		for i := range s.MinHash {
			s.MinHash[i] = binary.LittleEndian.Uint32(p)
			p = p[4:]
		}
	}
	return s, nil
}

// IsEmpty reports whether the sketch carries no signature (the document
// had no weighted term).
func (s Sketch) IsEmpty() bool { return len(s.Bits) == 0 && len(s.MinHash) == 0 }

// Cosine estimates the cosine similarity of the vectors behind two sketches
// as cos(π·h/m), h being the Hamming distance of their m bits. It is 0 when
// either sketch is empty or their sizes differ.
func Cosine(a, b Sketch) float64 {
	if len(a.Bits) == 0 || len(a.Bits) != len(b.Bits) {
		return 0
	}
	h := 0
	for i, w := range a.Bits {
		h += bits.OnesCount64(w ^ b.Bits[i])
	}
	return math.Cos(math.Pi * float64(h) / float64(64*len(a.Bits)))
}

// BitAgreement is the share of equal bits of two cosine sketches, the
// quantity 1-θ/π that the random-hyperplane LSH estimates.
func BitAgreement(a, b Sketch) float64 {
	if len(a.Bits) == 0 || len(a.Bits) != len(b.Bits) {
		return 0
	}
	h := 0
	for i, w := range a.Bits {
		h += bits.OnesCount64(w ^ b.Bits[i])
	}
	return 1 - float64(h)/float64(64*len(a.Bits))
}

// Jaccard estimates the weighted Jaccard similarity of the vectors behind
// two sketches as the share of equal min-hash values. It is 0 when either
// has no min-hashes or their sizes differ.
func Jaccard(a, b Sketch) float64 {
	if len(a.MinHash) == 0 || len(a.MinHash) != len(b.MinHash) {
		return 0
	}
	eq := 0
	for i, v := range a.MinHash {
		if v == b.MinHash[i] {
			eq++
		}
	}
	return float64(eq) / float64(len(a.MinHash))
}

// laneTable[b] spreads the 8 bits of byte b into 8 16-bit lanes (two
// uint64), lane j = bit j of b.
var laneTable = func() (t [256][2]uint64) {
	for b := range 256 {
		for j := range 8 {
			if b>>j&1 != 0 {
				t[b][j/4] |= 1 << (16 * (j % 4))
			}
		}
	}
	return t
}()

// flushEvery is the number of terms after which the 16-bit lanes, which
// grow by at most 255 per term, are flushed into the 32-bit totals.
const flushEvery = 257

// sketchTerms computes the sketch of the terms with positive weights ws;
// hs, if not nil, holds termHash(terms[i], seed) for every term.
//
// Cosine family: bit i is set when Σ_t q_t·r_ti > 0, with r_ti = ±1 the
// i-th bit of the term's hash stream (bit set = +1) and q_t the weight
// quantized to 8 bits relative to the largest weight (q = round(255·w/max)).
// Equivalently Σ_t q_t·b_ti > ⌊Q/2⌋ with b_ti ∈ {0,1} and Q = Σ_t q_t. The
// sums are kept in 16-bit lanes packed four to a uint64 (SWAR): one table
// look-up, multiply and add per 8 bits of hash. Integer arithmetic makes
// the result independent of the order of the terms.
func (s *Signer) sketchTerms(terms []string, ws []float64, hs []uint64, sc *scratch) Sketch {
	maxW := 0.0
	for _, w := range ws {
		if w > maxW && !math.IsInf(w, 1) {
			maxW = w
		}
	}
	if maxW <= 0 || math.IsNaN(maxW) {
		return Sketch{}
	}
	words := s.model.LSH.Bits / 64
	// lanes[wi*16+j] holds the lanes of bits 4j..4j+3 of word wi.
	if cap(sc.lanes) < words*16 {
		sc.lanes = make([]uint64, words*16)
	}
	lanes := sc.lanes[:words*16]
	clear(lanes)
	var totals []uint32 // allocated on the first flush
	total := uint64(0)
	pending := 0
	var sk Sketch
	nmh := s.model.LSH.MinHashes
	var mins []uint64
	if nmh > 0 {
		mins = make([]uint64, nmh)
		for i := range mins {
			mins[i] = math.MaxUint64
		}
	}
	seed := s.model.LSH.Seed
	quant := float64(s.model.LSH.Quant)
	any := false
	for i, term := range terms {
		w := ws[i]
		if !(w > 0) {
			continue
		}
		w = min(w, maxW)
		any = true
		var h uint64
		if hs != nil {
			h = hs[i]
		} else {
			h = termHash(term, seed)
		}
		q := uint64(w/maxW*255 + 0.5)
		if q > 0 {
			total += q
			for wi := range words {
				x := splitmix64(h + uint64(wi)*golden)
				l := lanes[wi*16 : wi*16+16 : wi*16+16]
				for j := 0; j < 16; j += 2 {
					e := &laneTable[byte(x)]
					l[j] += e[0] * q
					l[j+1] += e[1] * q
					x >>= 8
				}
			}
			if pending++; pending == flushEvery-1 {
				totals = flushLanes(lanes, totals)
				pending = 0
			}
		}
		if nmh > 0 {
			k := max(1, int(w/maxW*quant+0.5))
			hm := h ^ mhSalt
			for c := range k {
				x := splitmix64(hm + uint64(c)*golden)
				bin := (x >> 32) * uint64(nmh) >> 32
				v := x & 0xffffffff
				if v < mins[bin] {
					mins[bin] = v
				}
			}
		}
	}
	if !any {
		return Sketch{}
	}
	t := total / 2
	sk.Bits = make([]uint64, words)
	for wi := range words {
		for j := range 16 {
			v := lanes[wi*16+j]
			for k := range 4 {
				bit := wi*64 + 4*j + k
				c := v >> (16 * k) & 0xffff
				if totals != nil {
					c += uint64(totals[bit])
				}
				if c > t {
					sk.Bits[wi] |= 1 << uint(bit%64)
				}
			}
		}
	}
	if nmh > 0 {
		sk.MinHash = densify(mins)
	}
	return sk
}

// flushLanes adds the 16-bit lanes into 32-bit totals and clears them.
func flushLanes(lanes []uint64, totals []uint32) []uint32 {
	if totals == nil {
		totals = make([]uint32, len(lanes)*4)
	}
	for i, v := range lanes {
		for k := range 4 {
			totals[4*i+k] += uint32(v >> (16 * k) & 0xffff)
		}
		lanes[i] = 0
	}
	return totals
}

// densify fills the empty bins of a one-permutation min-hash by borrowing
// the value of the nearest non-empty bin to the right (circularly), mixed
// with the distance (rotation densification, Shrivastava & Li 2014).
func densify(mins []uint64) []uint32 {
	out := make([]uint32, len(mins))
	n := len(mins)
	for i, v := range mins {
		if v != math.MaxUint64 {
			out[i] = uint32(v)
			continue
		}
		for d := 1; d < n; d++ {
			if dv := mins[(i+d)%n]; dv != math.MaxUint64 {
				out[i] = uint32(splitmix64((dv ^ densifySalt) + uint64(d)*golden))
				break
			}
		}
	}
	return out
}
