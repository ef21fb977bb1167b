package ppjoin

import (
	"cmp"
	"slices"
	"strconv"
)

// Pair is a joined pair of records by their positions (A < B) and its
// similarity.
type Pair struct {
	A, B int
	Sim  float64
}

// Stats counts a join's work: candidate pairs that survived the filters
// and were verified.
type Stats struct {
	Candidates int
}

type posting struct {
	rec int32 // position in the size order
	pos int32 // 0-based position of the token in the record
}

// Join returns every pair of records whose similarity is at least the
// threshold (ppjoin, Algorithm 1; ppjoin+ with the suffix filter of
// Algorithms 3–5 unless NoSuffixFilter), ordered by A then B. Each record
// is a set sorted ascending by the global ordering.
func Join[T cmp.Ordered](records [][]T, opts Options) ([]Pair, Stats) {
	p := params{m: opts.Measure, t: opts.threshold()}
	depth := opts.maxDepth()
	order := make([]int, len(records))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(records[a]) - len(records[b]) })
	rec := func(k int32) []T { return records[order[k]] }

	var (
		pairs []Pair
		st    Stats
		index = make(map[T][]posting)
		// A[y]: overlap of the prefixes so far; -1: pruned
		acc  = make(map[int32]int)
		cand []int32
	)
	for k := range int32(len(order)) {
		x := rec(k)
		nx := len(x)
		if nx == 0 {
			continue
		}
		clear(acc)
		cand = cand[:0]
		minY := p.minSize(nx)
		px := p.probePrefix(nx)
		for i := range px {
			for _, e := range index[x[i]] {
				y := rec(e.rec)
				ny := len(y)
				if ny < minY {
					continue // size filtering
				}
				a, seen := acc[e.rec]
				if a < 0 {
					continue
				}
				alpha := p.alpha(nx, ny)
				// positional filtering (Lemma 2): tokens from this one on
				ubound := 1 + min(nx-i-1, ny-int(e.pos)-1)
				if a+ubound < alpha {
					acc[e.rec] = -1
					continue
				}
				if !seen && !opts.NoSuffixFilter {
					// ppjoin+ (Algorithm 5): the first common token; the
					// prefixes before it share nothing
					hmax := nx + ny - 2*alpha - (i + int(e.pos))
					if suffixFilter(x[i+1:], y[e.pos+1:], hmax, 1, depth) > hmax {
						acc[e.rec] = -1
						continue
					}
				}
				if !seen {
					cand = append(cand, e.rec)
				}
				acc[e.rec] = a + 1
			}
		}
		for i := range p.indexPrefix(nx) {
			index[x[i]] = append(index[x[i]], posting{rec: k, pos: int32(i)})
		}
		// Verify (Algorithm 2)
		for _, yk := range cand {
			a := acc[yk]
			if a <= 0 {
				continue
			}
			st.Candidates++
			y := rec(yk)
			ny := len(y)
			py := p.indexPrefix(ny)
			alpha := p.alpha(nx, ny)
			o := a
			if x[px-1] < y[py-1] {
				if a+nx-px < alpha {
					continue
				}
				o += Overlap(x[px:], y[a:])
			} else {
				if a+ny-py < alpha {
					continue
				}
				o += Overlap(x[a:], y[py:])
			}
			if o >= alpha {
				i, j := order[yk], order[k]
				pairs = append(pairs, Pair{A: min(i, j), B: max(i, j), Sim: simOf(p.m, nx, ny, o)})
			}
		}
	}
	slices.SortFunc(pairs, func(a, b Pair) int { return cmp.Or(a.A-b.A, a.B-b.B) })
	return pairs, st
}

// suffixFilter is Algorithm 3: a lower bound of the Hamming distance of
// sorted sets x and y, or a value above hmax as soon as one is found.
func suffixFilter[T cmp.Ordered](x, y []T, hmax, d, maxDepth int) int {
	diffXY := abs(len(x) - len(y))
	if d > maxDepth || len(x) == 0 || len(y) == 0 {
		return diffXY
	}
	mid := (len(y)+1)/2 - 1 // ⌈|y|/2⌉, 0-based
	w := y[mid]
	o := (hmax - diffXY) / 2
	ol, or := 0, 1
	if len(x) < len(y) {
		ol, or = 1, 0
	}
	yl, yr, _, diff := partition(y, w, mid, mid)
	xl, xr, f, diff := partition(x, w, mid-o-diffXY*ol, mid+o+diffXY*or)
	if !f {
		return hmax + 1
	}
	h := abs(len(xl)-len(yl)) + abs(len(xr)-len(yr)) + diff
	if h > hmax {
		return h
	}
	hl := suffixFilter(xl, yl, hmax-abs(len(xr)-len(yr))-diff, d+1, maxDepth)
	h = hl + abs(len(xr)-len(yr)) + diff
	if h > hmax {
		return h
	}
	hr := suffixFilter(xr, yr, hmax-hl-diff, d+1, maxDepth)
	return hl + hr + diff
}

// partition is Algorithm 4: s split around w (w itself left out), whether
// the first token not below w lies within s[l..r] (0-based; r may be
// len(s), the end), and 1 when w is not in s.
func partition[T cmp.Ordered](s []T, w T, l, r int) (sl, sr []T, found bool, diff int) {
	l, r = max(l, 0), min(r, len(s))
	if l > r {
		return nil, nil, false, 1
	}
	p, ok := slices.BinarySearch(s, w)
	if p < l || p > r {
		return nil, nil, false, 1
	}
	if ok {
		return s[:p], s[p+1:], true, 0
	}
	return s[:p], s[p:], true, 1
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// Canonicalize turns token multi-sets into records for Join: a repeated
// token becomes a new token ("as", "as#1", sect. 2.1), and tokens are
// numbered by ascending document frequency (ties by the token), so each
// record is sorted rare tokens first.
func Canonicalize(docs [][]string) [][]int32 {
	sets := make([][]string, len(docs))
	df := make(map[string]int)
	for d, toks := range docs {
		seen := make(map[string]int, len(toks))
		set := make([]string, 0, len(toks))
		for _, t := range toks {
			n := seen[t]
			seen[t] = n + 1
			if n > 0 {
				t += "#" + strconv.Itoa(n)
			}
			set = append(set, t)
			df[t]++
		}
		sets[d] = set
	}
	vocab := make([]string, 0, len(df))
	for t := range df {
		vocab = append(vocab, t)
	}
	slices.SortFunc(vocab, func(a, b string) int { return cmp.Or(df[a]-df[b], cmp.Compare(a, b)) })
	id := make(map[string]int32, len(vocab))
	for i, t := range vocab {
		id[t] = int32(i)
	}
	out := make([][]int32, len(sets))
	for d, set := range sets {
		r := make([]int32, len(set))
		for i, t := range set {
			r[i] = id[t]
		}
		slices.Sort(r)
		out[d] = r
	}
	return out
}
