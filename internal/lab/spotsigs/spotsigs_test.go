package spotsigs

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
)

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) })
}

// TestPaperExtractionExample is the example of sect. 3.2: antecedents a,
// an, the, is; spot distance 1, chain length 2.
func TestPaperExtractionExample(t *testing.T) {
	text := "At a rally to kick off a weeklong campaign for the South Carolina primary, Obama tried to set the record " +
		"straight from an attack circulating widely on the Internet that is designed to play into prejudices against " +
		"Muslims and fears of terrorism."
	e := NewExtractor(Options{Antecedents: []string{"a", "an", "the", "is"}, Distance: 1, ChainLength: 2})
	got := e.Strings(words(text))
	// The paper writes "campain" for campaign.
	want := []string{"a:rally:kick", "a:weeklong:campaign", "the:south:carolina", "the:record:straight",
		"an:attack:circulating", "the:internet:designed", "is:designed:play"}
	if !slices.Equal(got, want) {
		t.Errorf("spot signatures\n got %q\nwant %q", got, want)
	}
	if v := e.Extract(words(text)); v.Len() != len(want) || len(v) != len(want) {
		t.Errorf("vector: %d distinct, length %d; want %d", len(v), v.Len(), len(want))
	}
}

func TestExtractChains(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		text string
		want []string
	}{
		{"distance 2 chain 3 (defaults)", Options{}, "the one two three four five six seven", []string{"the:two:four:six"}},
		{"stopword at the spot moves on", Options{Distance: 2, ChainLength: 2}, "the one of two three four", []string{"the:two:four"}},
		{"cut off by the end of the document", Options{}, "the one two three", []string{"the:two"}},
		{"nothing after the antecedent", Options{}, "alpha beta the", nil},
		{"only stopwords after it", Options{}, "the of to and", nil},
		{"overlapping chains", Options{Distance: 1, ChainLength: 2}, "the cat is black", []string{"the:cat:black", "is:black"}},
		{"empty", Options{}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewExtractor(tt.opts).Strings(words(tt.text)); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestJaccard(t *testing.T) {
	d1 := Vector{{1, 5}, {2, 4}, {3, 4}}
	d2 := Vector{{1, 8}, {2, 4}}
	d3 := Vector{{1, 4}, {2, 5}, {3, 5}}
	tests := []struct {
		a, b Vector
		want float64
	}{
		{d1, d3, 12.0 / 15},
		{d1, d2, 9.0 / 16},
		{d2, d3, 8.0 / 18},
		{d1, d1, 1},
		{nil, nil, 0},
		{d1, nil, 0},
	}
	for _, tt := range tests {
		if got := Jaccard(tt.a, tt.b); got != tt.want {
			t.Errorf("Jaccard(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestPaperDedupExample is the example of sect. 4.3.2: d1 is deduplicated
// with one similarity computation and matches d3 at 0.8.
func TestPaperDedupExample(t *testing.T) {
	d1 := Vector{{1, 5}, {2, 4}, {3, 4}}
	d2 := Vector{{1, 8}, {2, 4}}
	d3 := Vector{{1, 4}, {2, 5}, {3, 5}}
	x := NewIndex(MatchOptions{Threshold: 0.8})
	x.Add(2, d2)
	x.Add(3, d3)
	ms, compared := x.Query(d1)
	if want := []Match{{ID: 3, Sim: 0.8}}; !slices.Equal(ms, want) || compared != 1 {
		t.Errorf("Query(d1) = %v with %d similarities, want %v with 1", ms, compared, want)
	}
	pairs, _ := Dedup([]Vector{d1, d2, d3}, MatchOptions{Threshold: 0.8})
	if want := []Pair{{A: 0, B: 2, Sim: 0.8}}; !slices.Equal(pairs, want) {
		t.Errorf("Dedup = %v, want %v", pairs, want)
	}
}

func TestPartitions(t *testing.T) {
	// sect. 5.1: ρ = 1000 gives 3 partitions for τ = 0.1 (plus [ρ, ∞)).
	if got, want := Partitions(0.1, 1000), []int{1, 11, 111, 1000}; !slices.Equal(got, want) {
		t.Errorf("Partitions(0.1, 1000) = %v, want %v", got, want)
	}
	for _, tau := range []float64{0.3, 0.44, 0.8, 0.9, 1} {
		p := Partitions(tau, 1000)
		for k := 1; k < len(p)-1; k++ {
			// p_k is the smallest integer above p_k-1 with p_k − p_k-1 >
			// (1−τ)·p_k, that is τ·p_k > p_k-1
			if !(tau*float64(p[k]) > float64(p[k-1])) || (p[k]-1 > p[k-1] && tau*float64(p[k]-1) > float64(p[k-1])) {
				t.Errorf("τ=%v: p_%d = %d after %d is not the smallest", tau, k, p[k], p[k-1])
			}
		}
	}
}

// TestPaperBoundDropsPair: the paper's line-18 test (δ1 + δ2 > (1−τ)|d_i|)
// would skip this true pair; the index finds it.
func TestPaperBoundDropsPair(t *testing.T) {
	var a, b []uint64
	for i := range uint64(17) {
		a, b = append(a, 100+i), append(b, 100+i)
	}
	a = append(a, 1, 2, 3) // rare in the collection: traversed first
	di, dj := FromHashes(a), FromHashes(b)
	tau := 0.8
	sim := Jaccard(di, dj)
	delta1, delta2 := 3, di.Len()-dj.Len()
	if !(sim >= tau && float64(delta1+delta2) > (1-tau)*float64(di.Len())) {
		t.Fatalf("sim %v, δ1+δ2 = %d: not the counterexample", sim, delta1+delta2)
	}
	x := NewIndex(MatchOptions{Threshold: tau})
	x.Add(1, dj)
	if ms, _ := x.Query(di); len(ms) != 1 || ms[0].ID != 1 {
		t.Errorf("Query = %v, want the pair at %v", ms, sim)
	}
}

// TestDedupMatchesBruteForce: the partitioning and the pruning never drop
// a pair that comparing every pair finds, and never add one.
func TestDedupMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		tau := []float64{0.3, 0.44, 0.5, 0.6, 0.7, 0.8, 0.9, 1}[round%8]
		universe := 5 + rng.IntN(60)
		var vs []Vector
		for range 60 + rng.IntN(60) {
			var hs []uint64
			if len(vs) > 0 && rng.IntN(2) == 0 {
				// a perturbed copy of an earlier document
				for _, s := range vs[rng.IntN(len(vs))] {
					for range s.Freq {
						if rng.IntN(10) > 0 {
							hs = append(hs, s.Hash)
						}
					}
				}
				for range rng.IntN(4) {
					hs = append(hs, uint64(rng.IntN(universe)))
				}
			} else {
				for range rng.IntN(40) {
					hs = append(hs, uint64(rng.IntN(universe)))
				}
			}
			vs = append(vs, FromHashes(hs))
		}
		var want []Pair
		for j := range vs {
			for i := range j {
				if s := Jaccard(vs[i], vs[j]); s >= tau && len(vs[i]) > 0 {
					want = append(want, Pair{A: i, B: j, Sim: s})
				}
			}
		}
		got, compared := Dedup(vs, MatchOptions{Threshold: tau, Range: 8 + rng.IntN(100)})
		if !slices.Equal(got, want) {
			t.Fatalf("round %d τ=%v: %d pairs, brute force %d\n got %v\nwant %v", round, tau, len(got), len(want), got, want)
		}
		if all := len(vs) * (len(vs) - 1) / 2; compared > all {
			t.Errorf("round %d: %d similarities computed, more than the %d pairs", round, compared, all)
		}
	}
}

func TestFromHashesAndLen(t *testing.T) {
	v := FromHashes([]uint64{5, 1, 5, 5, 2})
	if want := (Vector{{1, 1}, {2, 1}, {5, 3}}); !slices.Equal(v, want) || v.Len() != 5 {
		t.Errorf("FromHashes = %v (len %d), want %v (len 5)", v, v.Len(), want)
	}
	if FromHashes(nil) != nil {
		t.Error("FromHashes(nil) is not nil")
	}
}

func TestQueryEdgeCases(t *testing.T) {
	x := NewIndex(MatchOptions{})
	if ms, c := x.Query(Vector{{1, 1}}); ms != nil || c != 0 {
		t.Errorf("empty index: %v, %d", ms, c)
	}
	x.Add(1, nil)
	if x.Len() != 0 {
		t.Error("an empty vector was indexed")
	}
	x.Add(2, Vector{{1, 2}})
	if ms, _ := x.Query(nil); ms != nil {
		t.Errorf("empty query: %v", ms)
	}
	for _, tau := range []float64{-1, 2, 1e-9} {
		y := NewIndex(MatchOptions{Threshold: tau})
		y.Add(1, Vector{{1, 2}})
		if ms, _ := y.Query(Vector{{1, 2}}); len(ms) != 1 {
			t.Errorf("τ=%v: identical vector not found", tau)
		}
	}
}

// TestHostileStopwordRun: a long run of antecedents costs linear time (a
// chain would otherwise scan the whole run from every antecedent).
func TestHostileStopwordRun(t *testing.T) {
	toks := make([]string, 200000)
	for i := range toks {
		toks[i] = "the"
	}
	toks[len(toks)-1] = "end"
	v := NewExtractor(Options{}).Extract(toks)
	// every antecedent close enough to the end reaches "end"
	if v.Len() == 0 {
		t.Errorf("no signature")
	}
}

func TestFilterIDF(t *testing.T) {
	// 10 documents: signature 1 in all (idf 0), 2 in one (idf 1), 3 in
	// three (idf log(10/3)/log(10) ≈ 0.52).
	vs := make([]Vector, 10)
	for i := range vs {
		hs := []uint64{1}
		if i == 0 {
			hs = append(hs, 2)
		}
		if i < 3 {
			hs = append(hs, 3, 3)
		}
		vs[i] = FromHashes(hs)
	}
	got := FilterIDF(vs, DefaultIDFLow, DefaultIDFHigh)
	if want := (Vector{{3, 2}}); !slices.Equal(got[0], want) {
		t.Errorf("document 0: %v, want %v", got[0], want)
	}
	if len(got[5]) != 0 {
		t.Errorf("document 5: %v, want nothing", got[5])
	}
	if len(vs[0]) != 3 {
		t.Errorf("input modified: %v", vs[0])
	}
	if one := FilterIDF(vs[:1], 0.2, 0.85); !slices.Equal(one[0], vs[0]) {
		t.Errorf("one document filtered: %v", one)
	}
}
