package spotsigs

import (
	"math"
	"slices"
	"sort"
)

// MatchOptions are the matcher's parameters. The zero value means the
// paper's defaults.
type MatchOptions struct {
	// Threshold is τ in (0, 1]: pairs with weighted Jaccard ≥ τ match;
	// 0 means DefaultThreshold. Values out of range are clamped.
	Threshold float64
	// Range is ρ, the length from which all vectors share one last
	// partition [ρ, ∞); 0 means DefaultRange.
	Range int
}

func (o MatchOptions) threshold() float64 {
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

func (o MatchOptions) rangeRho() int {
	if o.Range <= 1 {
		return DefaultRange
	}
	return o.Range
}

// Partitions returns the first lengths of the partitions [p_k, p_k+1) for
// threshold tau and range rho (sect. 4.2): p_0 = 1 and p_k+1 is the smallest
// integer with p_k+1 − p_k > (1 − τ)·p_k+1, up to rho, which starts the
// last partition [ρ, ∞).
func Partitions(tau float64, rho int) []int {
	o := MatchOptions{Threshold: tau, Range: rho}
	tau, rho = o.threshold(), o.rangeRho()
	starts := []int{1}
	for p := 1; ; {
		// the smallest next > p with τ·next > p
		next := max(int(float64(p)/tau), p) + 1
		for next-1 > p && tau*float64(next-1) > float64(p) {
			next--
		}
		for tau*float64(next) <= float64(p) {
			next++
		}
		if next >= rho {
			break
		}
		starts = append(starts, next)
		p = next
	}
	return append(starts, rho)
}

// Match is an indexed document similar to a query.
type Match struct {
	ID  int
	Sim float64
}

type doc struct {
	id  int
	v   Vector
	len int
}

type partition struct {
	// lists maps a signature to the documents holding it, by descending
	// length.
	lists map[uint64][]int32
}

// Index holds spot-signature vectors partitioned by length with an
// inverted index per partition, and finds the indexed vectors within
// the threshold of a query exactly. Add must not run concurrently with
// anything; Query may run concurrently with other queries.
type Index struct {
	tau    float64
	starts []int
	parts  []partition
	docs   []doc
	spots  int
}

// NewIndex returns an empty index.
func NewIndex(opts MatchOptions) *Index {
	x := &Index{tau: opts.threshold()}
	x.starts = Partitions(x.tau, opts.rangeRho())
	x.parts = make([]partition, len(x.starts))
	for i := range x.parts {
		x.parts[i].lists = make(map[uint64][]int32)
	}
	return x
}

// Threshold is the index's τ.
func (x *Index) Threshold() float64 { return x.tau }

// Len is the number of indexed vectors.
func (x *Index) Len() int { return len(x.docs) }

// Bytes estimates the index's memory as the paper counts it (sect. 5.4.1):
// 8 + 4 bytes per distinct signature of a vector (hash and frequency) and
// a 4-byte pointer per signature in the inverted lists, plus 16 bytes per
// document.
func (x *Index) Bytes() int { return x.spots*(8+4+4) + len(x.docs)*16 }

// partitionOf is the index of the partition holding vectors of length n.
func (x *Index) partitionOf(n int) int {
	return sort.Search(len(x.starts), func(i int) bool { return x.starts[i] > n }) - 1
}

// Add indexes v under id. Empty vectors are not indexed.
func (x *Index) Add(id int, v Vector) {
	n := v.Len()
	if n == 0 {
		return
	}
	di := int32(len(x.docs))
	x.docs = append(x.docs, doc{id: id, v: v, len: n})
	x.spots += len(v)
	p := &x.parts[x.partitionOf(n)]
	for _, s := range v {
		l := p.lists[s.Hash]
		// keep the list by descending length (ties: insertion order)
		at := sort.Search(len(l), func(i int) bool { return x.docs[l[i]].len < n })
		p.lists[s.Hash] = slices.Insert(l, at, di)
	}
}

// bound is the largest weighted Jaccard similarity a query of length n
// can have with a document of length m that shares none of the query's
// signatures whose frequencies add up to d1: their overlap is at most
// min(n−d1, m), and the union is n + m − overlap.
func bound(n, m, d1 int) float64 {
	o := min(n-d1, m)
	if o <= 0 {
		return 0
	}
	return float64(o) / float64(n+m-o)
}

// Query returns the indexed vectors whose weighted Jaccard similarity with
// v is at least the threshold, and how many similarities it computed.
// It searches the partitions whose lengths can reach the threshold; in
// each, it traverses the inverted lists of v's signatures from the least
// to the most frequent, skips documents whose length bound falls short,
// and stops when no unseen document can reach the threshold (Algorithm 1).
func (x *Index) Query(v Vector) (ms []Match, compared int) {
	n := v.Len()
	if n == 0 || len(x.docs) == 0 {
		return nil, 0
	}
	// the lengths whose size bound min/max reaches τ (computed as the
	// similarities are, so no rounding drops a pair at τ exactly)
	lo := max(int(x.tau*float64(n)), 1)
	for lo > 1 && bound(n, lo-1, 0) >= x.tau {
		lo--
	}
	for bound(n, lo, 0) < x.tau {
		lo++
	}
	hi := math.MaxInt
	if f := float64(n) / x.tau; f < float64(math.MaxInt32) {
		hi = int(f) + 1
		for hi > n && bound(n, hi, 0) < x.tau {
			hi--
		}
	}
	checked := make(map[int32]bool)
	order := make([]int, len(v))
	for k := x.partitionOf(lo); k < len(x.parts) && x.starts[k] <= hi; k++ {
		p := &x.parts[k]
		for i := range order {
			order[i] = i
		}
		// least frequent signature in this partition first
		slices.SortStableFunc(order, func(a, b int) int {
			return len(p.lists[v[a].Hash]) - len(p.lists[v[b].Hash])
		})
		d1 := 0
		for _, si := range order {
			for _, di := range p.lists[v[si].Hash] {
				d := &x.docs[di]
				if d.len < lo {
					break // the rest of the list is shorter still
				}
				if d.len > hi || checked[di] {
					continue
				}
				checked[di] = true
				if bound(n, d.len, d1) < x.tau {
					continue
				}
				compared++
				if s := Jaccard(v, d.v); s >= x.tau {
					ms = append(ms, Match{ID: d.id, Sim: s})
				}
			}
			d1 += int(v[si].Freq)
			if bound(n, n-d1, d1) < x.tau {
				break // no unseen document can reach τ
			}
		}
	}
	return ms, compared
}

// Pair is a pair of near-duplicate documents, by their positions (A < B).
type Pair struct {
	A, B int
	Sim  float64
}

// Dedup returns every pair of vs with weighted Jaccard similarity ≥ τ,
// ordered by B then A, and how many similarities it computed.
func Dedup(vs []Vector, opts MatchOptions) (pairs []Pair, compared int) {
	x := NewIndex(opts)
	for i, v := range vs {
		ms, c := x.Query(v)
		compared += c
		slices.SortFunc(ms, func(a, b Match) int { return a.ID - b.ID })
		for _, m := range ms {
			pairs = append(pairs, Pair{A: m.ID, B: i, Sim: m.Sim})
		}
		x.Add(i, v)
	}
	return pairs, compared
}
