package ppjoin

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestPaperExample1: "yes as soon as possible" and "as soon as possible
// please" have Jaccard 4/6 and cosine 4/5 once the second "as" is a token
// of its own.
func TestPaperExample1(t *testing.T) {
	recs := Canonicalize([][]string{strings.Fields("yes as soon as possible"), strings.Fields("as soon as possible please")})
	if len(recs[0]) != 5 || len(recs[1]) != 5 {
		t.Fatalf("records %v: want 5 tokens each", recs)
	}
	if got := Similarity(Jaccard, recs[0], recs[1]); got != 4.0/6 {
		t.Errorf("Jaccard = %v, want 0.67", got)
	}
	if got := Similarity(Cosine, recs[0], recs[1]); got != 0.8 {
		t.Errorf("cosine = %v, want 0.80", got)
	}
	// The document-frequency ordering puts the rare tokens first.
	if recs[0][0] > recs[0][1] || recs[1][0] > recs[1][1] {
		t.Errorf("rare tokens not first: %v", recs)
	}
	pairs, _ := Join(recs, Options{Threshold: 0.6})
	if want := []Pair{{A: 0, B: 1, Sim: 4.0 / 6}}; !slices.Equal(pairs, want) {
		t.Errorf("Join(0.6) = %v, want %v", pairs, want)
	}
}

// TestPaperExamples2and3: at t = 0.8, records of 5 tokens probe a 2-prefix
// and need an overlap of 5; w (3 tokens) probes a 1-prefix; x and y share
// B in their prefixes but its positions bound their overlap to 4 < 5.
func TestPaperExamples2and3(t *testing.T) {
	p := params{m: Jaccard, t: 0.8}
	if got := p.probePrefix(5); got != 2 {
		t.Errorf("prefix of a 5-token record = %d, want 2", got)
	}
	if got := p.probePrefix(3); got != 1 {
		t.Errorf("prefix of a 3-token record = %d, want 1", got)
	}
	if got := p.alpha(5, 5); got != 5 {
		t.Errorf("α(5, 5) = %d, want 5", got)
	}
	if got := p.minSize(5); got != 4 {
		t.Errorf("size filter for 5 tokens = %d, want 4 (w, 3 tokens, is pruned)", got)
	}
	// Lemma 3: only |x| − ⌈2t/(1+t)·|x|⌉ + 1 tokens are indexed.
	if got := p.indexPrefix(5); got != 1 {
		t.Errorf("indexed prefix of 5 tokens = %d, want 1", got)
	}
	// tokens by document frequency: A..G = 0..6
	A, B, C, D, E, F, G := int32(0), int32(1), int32(2), int32(3), int32(4), int32(5), int32(6)
	w := []int32{C, D, F}
	z := []int32{G, A, B, E, F}
	slices.Sort(z)
	y := []int32{A, B, C, D, E}
	x := []int32{B, C, D, E, F}
	// ppjoin verifies one candidate (y, z: A at the head of both, a
	// positional bound of 5); ppjoin+'s suffix filter prunes it too.
	for _, tt := range []struct {
		suffix     bool
		candidates int
	}{{false, 1}, {true, 0}} {
		pairs, st := Join([][]int32{w, z, y, x}, Options{Threshold: 0.8, NoSuffixFilter: !tt.suffix})
		if len(pairs) != 0 || st.Candidates != tt.candidates {
			t.Errorf("suffix filter %v: pairs %v, %d candidates; want none, %d candidates", tt.suffix, pairs, st.Candidates, tt.candidates)
		}
	}
	// The positional bound of Example 3: x[1] = B meets y[2] = B.
	if ub := 1 + min(len(x)-1, len(y)-2); ub != 4 || ub >= p.alpha(5, 5) {
		t.Errorf("positional bound %d, want 4 < 5", ub)
	}
}

// TestPaperExample4: suffixes of 6 tokens whose partitions around F and
// then D differ by 4 in size are pruned for an allowed Hamming distance
// of 2 (ys = [? ? D F ? ?], xs = [? D ? ? F? ?] as in the paper).
func TestPaperExample4(t *testing.T) {
	ys := []int{10, 20, 40, 60, 80, 90} // D = 40, F = 60
	xs := []int{10, 40, 50, 55, 70, 95}
	if h := suffixFilter(xs, ys, 2, 1, DefaultMaxDepth); h <= 2 {
		t.Errorf("suffix filter bound %d, want > 2", h)
	}
	if h := hamming(xs, ys); h <= 2 {
		t.Fatalf("true Hamming distance %d", h)
	}
}

func hamming[T int | int32](x, y []T) int { return len(x) + len(y) - 2*Overlap(x, y) }

func randomSet(rng *rand.Rand, universe, n int) []int32 {
	seen := map[int32]bool{}
	var s []int32
	for range n {
		v := int32(rng.IntN(universe))
		if !seen[v] {
			seen[v] = true
			s = append(s, v)
		}
	}
	slices.Sort(s)
	return s
}

// TestSuffixFilterIsALowerBound: whenever the true Hamming distance is
// within hmax, the suffix filter does not exceed it.
func TestSuffixFilterIsALowerBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		u := 5 + rng.IntN(40)
		x, y := randomSet(rng, u, rng.IntN(30)), randomSet(rng, u, rng.IntN(30))
		h := len(x) + len(y) - 2*Overlap(x, y)
		hmax := h + rng.IntN(4)
		for d := 1; d <= 4; d++ {
			if got := suffixFilter(x, y, hmax, 1, d); got > h {
				t.Fatalf("depth %d: bound %d above the Hamming distance %d (hmax %d)\nx=%v\ny=%v", d, got, h, hmax, x, y)
			}
		}
	}
}

// TestJoinMatchesBruteForce: ppjoin and ppjoin+ find exactly the pairs that
// comparing every pair finds, for Jaccard and cosine.
func TestJoinMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 60 {
		universe := 10 + rng.IntN(80)
		var recs [][]int32
		for range 50 + rng.IntN(60) {
			if len(recs) > 0 && rng.IntN(2) == 0 {
				// a perturbed copy of an earlier record
				src := recs[rng.IntN(len(recs))]
				var r []int32
				for _, v := range src {
					if rng.IntN(8) > 0 {
						r = append(r, v)
					}
				}
				r = append(r, randomSet(rng, universe, rng.IntN(3))...)
				slices.Sort(r)
				recs = append(recs, slices.Compact(r))
				continue
			}
			recs = append(recs, randomSet(rng, universe, rng.IntN(30)))
		}
		for _, m := range []Measure{Jaccard, Cosine} {
			th := []float64{0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 0.95, 1}[round%8]
			var want []Pair
			for i := range recs {
				for j := i + 1; j < len(recs); j++ {
					if s := Similarity(m, recs[i], recs[j]); s >= th {
						want = append(want, Pair{A: i, B: j, Sim: s})
					}
				}
			}
			for _, noSuffix := range []bool{false, true} {
				got, st := Join(recs, Options{Measure: m, Threshold: th, NoSuffixFilter: noSuffix})
				if !slices.Equal(got, want) {
					t.Fatalf("round %d %v t=%v suffix=%v: %d pairs, brute force %d\n got %v\nwant %v",
						round, m, th, !noSuffix, len(got), len(want), got, want)
				}
				if all := len(recs) * (len(recs) - 1) / 2; st.Candidates > all {
					t.Errorf("%d candidates, more than the %d pairs", st.Candidates, all)
				}
			}
		}
	}
}

func TestVerify(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		u := 5 + rng.IntN(30)
		x, y := randomSet(rng, u, rng.IntN(25)), randomSet(rng, u, rng.IntN(25))
		for _, m := range []Measure{Jaccard, Cosine} {
			th := 0.3 + 0.7*rng.Float64()
			want := Similarity(m, x, y)
			got, ok := Verify(m, th, x, y)
			if ok != (want >= th) || (ok && got != want) {
				t.Fatalf("%v t=%v: Verify = %v, %v; similarity %v\nx=%v\ny=%v", m, th, got, ok, want, x, y)
			}
		}
	}
	if _, ok := Verify[int](Jaccard, 0.5, nil, nil); ok {
		t.Error("empty sets verified")
	}
}

func TestOptionsDefaults(t *testing.T) {
	if got := (Options{}).threshold(); got != DefaultThreshold {
		t.Errorf("threshold %v", got)
	}
	if got := (Options{Threshold: 7}).threshold(); got != 1 {
		t.Errorf("threshold 7 → %v", got)
	}
	if got := (Options{}).maxDepth(); got != DefaultMaxDepth {
		t.Errorf("max depth %v", got)
	}
	if Cosine.String() != "cosine" || Jaccard.String() != "jaccard" {
		t.Error("measure names")
	}
}
