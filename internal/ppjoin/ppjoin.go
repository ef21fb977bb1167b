// Package ppjoin implements exact set-similarity joins with prefix,
// positional and suffix filtering (Xiao, Wang, Lin & Yu, "Efficient
// similarity joins for near duplicate detection", WWW 2008): ppjoin and
// ppjoin+ for Jaccard and cosine similarity, and the exact verification of
// one candidate pair that the filters make cheap.
//
// A record is a set of tokens sorted by a global ordering (ascending); the
// paper's document-frequency ordering (rare tokens first) makes prefixes
// selective, but any total order gives the same, exact, result. Overlap
// thresholds are derived from the same floating-point similarity that the
// final check uses, so no rounding drops a pair at the threshold exactly.
package ppjoin

import (
	"cmp"
	"math"
)

// Measure is a set-similarity function.
type Measure int

const (
	// Jaccard is |x∩y| / |x∪y|.
	Jaccard Measure = iota
	// Cosine is |x∩y| / sqrt(|x|·|y|) (binary vectors).
	Cosine
)

func (m Measure) String() string {
	if m == Cosine {
		return "cosine"
	}
	return "jaccard"
}

// DefaultMaxDepth is the suffix filter's recursion limit in the paper's
// experiments (sect. 7).
const DefaultMaxDepth = 2

// DefaultThreshold is the similarity threshold when Options.Threshold is 0.
const DefaultThreshold = 0.8

// Options are a join's parameters; the zero value is ppjoin+ for Jaccard
// at DefaultThreshold.
type Options struct {
	// Measure is the similarity function (default Jaccard).
	Measure Measure
	// Threshold t in (0, 1]: pairs with similarity ≥ t are joined;
	// 0 means DefaultThreshold; values out of range are clamped.
	Threshold float64
	// NoSuffixFilter turns ppjoin+ into ppjoin (prefix and positional
	// filtering only).
	NoSuffixFilter bool
	// MaxDepth is the suffix filter's recursion limit; 0 means
	// DefaultMaxDepth.
	MaxDepth int
}

func (o Options) threshold() float64 {
	switch t := o.Threshold; {
	case t == 0 || math.IsNaN(t):
		return DefaultThreshold
	case t < 1e-6:
		return 1e-6
	case t > 1:
		return 1
	default:
		return t
	}
}

func (o Options) maxDepth() int {
	if o.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return o.MaxDepth
}

// simOf is the similarity of two sets of sizes nx and ny with overlap o.
func simOf(m Measure, nx, ny, o int) float64 {
	if o <= 0 || nx == 0 || ny == 0 {
		return 0
	}
	if m == Cosine {
		return float64(o) / math.Sqrt(float64(nx)*float64(ny))
	}
	return float64(o) / float64(nx+ny-o)
}

// Similarity is the similarity of two sorted sets under m.
func Similarity[T cmp.Ordered](m Measure, x, y []T) float64 {
	return simOf(m, len(x), len(y), Overlap(x, y))
}

// Overlap is |x ∩ y| of two sorted sets.
func Overlap[T cmp.Ordered](x, y []T) int {
	o, i, j := 0, 0, 0
	for i < len(x) && j < len(y) {
		switch c := cmp.Compare(x[i], y[j]); {
		case c < 0:
			i++
		case c > 0:
			j++
		default:
			o++
			i++
			j++
		}
	}
	return o
}

// params are the thresholds of one measure and threshold.
type params struct {
	m Measure
	t float64
}

// alpha is the smallest overlap with which sets of sizes nx and ny reach
// t (Eq. 1 for Jaccard, ⌈t·sqrt(|x|·|y|)⌉ for cosine), or min(nx, ny)+1
// when none does.
func (p params) alpha(nx, ny int) int {
	lim := min(nx, ny)
	var a int
	if p.m == Cosine {
		a = int(p.t * math.Sqrt(float64(nx)*float64(ny)))
	} else {
		a = int(p.t / (1 + p.t) * float64(nx+ny))
	}
	a = max(min(a, lim), 1)
	for a > 1 && simOf(p.m, nx, ny, a-1) >= p.t {
		a--
	}
	for a <= lim && simOf(p.m, nx, ny, a) < p.t {
		a++
	}
	return a
}

// minSize is the smallest size of a set that can reach t with a set of
// size n (size filtering: t·|x| for Jaccard, t²·|x| for cosine).
func (p params) minSize(n int) int {
	s := max(int(p.t*float64(n)), 1)
	if p.m == Cosine {
		s = max(int(p.t*p.t*float64(n)), 1)
	}
	for s > 1 && simOf(p.m, n, s-1, s-1) >= p.t {
		s--
	}
	for s <= n && simOf(p.m, n, s, s) < p.t {
		s++
	}
	return s
}

// probePrefix is the length of the prefix of a record of size n probed
// against the smaller records indexed before it (|x| − ⌈t·|x|⌉ + 1 for
// Jaccard, |x| − ⌈t²·|x|⌉ + 1 for cosine).
func (p params) probePrefix(n int) int {
	return max(min(n-p.alpha(n, p.minSize(n))+1, n), 0)
}

// indexPrefix is the length of the prefix of a record of size n that is
// indexed for the larger records after it (Lemma 3: |x| − ⌈2t/(1+t)·|x|⌉ + 1
// for Jaccard, |x| − ⌈t·|x|⌉ + 1 for cosine).
func (p params) indexPrefix(n int) int {
	return max(min(n-p.alpha(n, n)+1, n), 0)
}

// Verify reports whether sorted sets x and y reach t under m, and their
// similarity when they do (t is read as Options.Threshold: 0 means
// DefaultThreshold). It rejects by the size filter and stops
// merging as soon as the overlap still possible falls below the needed
// one (positional bound), so a miss usually costs less than a full merge.
func Verify[T cmp.Ordered](m Measure, t float64, x, y []T) (float64, bool) {
	p := params{m: m, t: Options{Threshold: t}.threshold()}
	nx, ny := len(x), len(y)
	if nx == 0 || ny == 0 || simOf(m, nx, ny, min(nx, ny)) < p.t {
		return 0, false
	}
	a := p.alpha(nx, ny)
	o, i, j := 0, 0, 0
	for i < nx && j < ny {
		if o+min(nx-i, ny-j) < a {
			return 0, false
		}
		switch c := cmp.Compare(x[i], y[j]); {
		case c < 0:
			i++
		case c > 0:
			j++
		default:
			o++
			i++
			j++
		}
	}
	if o < a {
		return 0, false
	}
	return simOf(m, nx, ny, o), true
}
