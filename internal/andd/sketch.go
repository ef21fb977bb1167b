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
// uint64), lane j = 0xffff if bit j of b is set, else 0: ANDed with a
// weight broadcast to the four lanes, it selects the weight in the lanes
// of the set bits.
var laneTable = func() (t [256][2]uint64) {
	for b := range 256 {
		for j := range 8 {
			if b>>j&1 != 0 {
				t[b][j/4] |= 0xffff << (16 * (j % 4))
			}
		}
	}
	return t
}()

// laneOnes broadcasts a 16-bit value to the four lanes of a uint64.
const laneOnes = 0x0001000100010001

// flushEvery is the number of terms after which the 16-bit lanes, which
// grow by at most 255 per term, are flushed into the 32-bit totals
// (257·255 = 65535 fits, but accumulate flushes after 256 terms).
const flushEvery = 257

// sketchTerms computes the sketch of the terms with positive weights ws;
// hs, if not nil, holds termHash(terms[i], seed) for every term.
//
// Cosine family: bit i is set when Σ_t q_t·r_ti > 0, with r_ti = ±1 the
// i-th bit of the term's hash stream (bit set = +1) and q_t the weight
// quantized to 8 bits relative to the largest weight (q = round(255·w/max)).
// Equivalently Σ_t q_t·b_ti > ⌊Q/2⌋ with b_ti ∈ {0,1} and Q = Σ_t q_t.
// Integer arithmetic makes the result independent of the order of the
// terms (see accumulate for how the sums are computed).
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
	// First pass: the quantized weights and hash words of the terms with
	// q > 0 (xs word-major: xs[wi*n+k] is word wi of the k-th such term),
	// and the min-hashes.
	qs := sc.qs[:0]
	hq := sc.hq[:0]
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
		if q := uint64(w/maxW*255 + 0.5); q > 0 {
			qs = append(qs, q)
			hq = append(hq, h)
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
	sc.qs, sc.hq = qs, hq
	if !any {
		return Sketch{}
	}
	n := len(qs)
	if cap(sc.xs) < words*n {
		sc.xs = make([]uint64, words*n)
	}
	xs := sc.xs[:words*n]
	total := uint64(0)
	for k, h := range hq {
		total += qs[k]
		for wi := range words {
			xs[wi*n+k] = splitmix64(h + uint64(wi)*golden)
		}
	}
	if cap(sc.totals) < words*64 {
		sc.totals = make([]uint32, words*64)
	}
	totals := sc.totals[:words*64]
	clear(totals)
	for wi := range words {
		accumulate(xs[wi*n:(wi+1)*n], qs, totals[wi*64:(wi+1)*64])
	}
	t := total / 2
	var sk Sketch
	sk.Bits = make([]uint64, words)
	for wi := range sk.Bits {
		// Bit j is set when totals > t: t - total borrows into bit 63
		// (both are below 2^40).
		var w uint64
		for j, c := range totals[wi*64 : (wi+1)*64 : (wi+1)*64] {
			w |= (t - uint64(c)) >> 63 << uint(j)
		}
		sk.Bits[wi] = w
	}
	if nmh > 0 {
		sk.MinHash = densify(mins)
	}
	return sk
}

// accumulate adds Σ_k qs[k]·(bit i of xs[k]) to totals[i] for the 64 bits
// of one sketch word. The sums are kept in 16-bit lanes packed four to a
// uint64 (SWAR) in registers: one table look-up, two ANDs and two adds
// per term and 8 bits of hash, one pass over the terms per 32 bits
// of the word. With q ≤ 255 a lane takes 257 terms before it could
// overflow; the lanes are then flushed into totals.
func accumulate(xs, qs []uint64, totals []uint32) {
	for start := 0; start < len(xs); start += flushEvery - 1 {
		end := min(start+flushEvery-1, len(xs))
		bx, bq := xs[start:end], qs[start:end]
		bq = bq[:len(bx)]
		for sh := 0; sh < 64; sh += 32 {
			var a0, a1, a2, a3, a4, a5, a6, a7 uint64
			for k, x := range bx {
				q := bq[k] * laneOnes
				x >>= sh
				e := &laneTable[byte(x)]
				f := &laneTable[byte(x>>8)]
				a0 += e[0] & q
				a1 += e[1] & q
				a2 += f[0] & q
				a3 += f[1] & q
				e = &laneTable[byte(x>>16)]
				f = &laneTable[byte(x>>24)]
				a4 += e[0] & q
				a5 += e[1] & q
				a6 += f[0] & q
				a7 += f[1] & q
			}
			tt := totals[sh : sh+32 : sh+32]
			for l := range 4 {
				s := 16 * l
				tt[l] += uint32(a0 >> s & 0xffff)
				tt[4+l] += uint32(a1 >> s & 0xffff)
				tt[8+l] += uint32(a2 >> s & 0xffff)
				tt[12+l] += uint32(a3 >> s & 0xffff)
				tt[16+l] += uint32(a4 >> s & 0xffff)
				tt[20+l] += uint32(a5 >> s & 0xffff)
				tt[24+l] += uint32(a6 >> s & 0xffff)
				tt[28+l] += uint32(a7 >> s & 0xffff)
			}
		}
	}
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
