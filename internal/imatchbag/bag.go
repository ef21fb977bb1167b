package imatchbag

import "math/bits"

// MaxK is the largest number of bagged lexicons a Signer supports.
const MaxK = 31

// splitmix64 is the SplitMix64 generator (Steele, Lea & Flood 2014). It is
// implemented here, not taken from math/rand, so that the bagged lexicons
// (and therefore the signatures) never depend on the Go version.
type splitmix64 struct{ state uint64 }

func (s *splitmix64) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// below returns a uniform integer in [0, n) (Lemire's multiply-shift with
// rejection, so that it is exactly uniform).
func (s *splitmix64) below(n uint64) uint64 {
	hi, lo := bits.Mul64(s.next(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(s.next(), n)
		}
	}
	return hi
}

// Stream identifiers mixed into the bag seeds, so that the samples of L and
// of B are independent.
const (
	streamPrimary   = 0x4c // 'L'
	streamSecondary = 0x42 // 'B'
)

// bootstrap draws a bootstrap sample of n items for bag (1-based): n draws
// with replacement, each item kept at most once, so about 1-1/e ≈ 63.2% of
// the items are in the sample. It returns the membership of each index.
// The generator is seeded from (seed, bag, stream) only, so bag b is the
// same whatever K is.
func bootstrap(seed uint64, bag int, stream uint64, n int) []bool {
	in := make([]bool, n)
	if n == 0 {
		return in
	}
	g := splitmix64{state: seed}
	g.state = g.next() ^ (uint64(bag) << 8) ^ stream
	g.state = g.next()
	for range n {
		in[g.below(uint64(n))] = true
	}
	return in
}
