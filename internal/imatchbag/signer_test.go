package imatchbag

import (
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

func words(prefix string, from, to int) []string {
	var w []string
	for i := from; i < to; i++ {
		w = append(w, fmt.Sprintf("%s%04d", prefix, i))
	}
	return w
}

func doc(parts ...[]string) []string {
	var d []string
	for _, p := range parts {
		d = append(d, p...)
	}
	slices.Sort(d)
	return slices.Compact(d)
}

func mustSigner(t testing.TB, lex *Lexicon, o Options) *Signer {
	t.Helper()
	s, err := NewSigner(lex, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSignThresholds(t *testing.T) {
	lex := synthLexicon(t, 1000, 300, 500, BuildOptions{})
	tests := []struct {
		name      string
		opts      Options
		terms     []string
		wantSig   bool
		terms0    int // |S| of the original lexicon
		secondary int
		reason    string
	}{
		{"too short", Options{}, doc(words("l", 0, 4)), false, 0, 0, "too short for a signature: 4 unique words (minimum 5)"},
		{"five lexicon words", Options{MinTerms: 5}, doc(words("l", 0, 5)), true, 5, 0, ""},
		{"min unique raised", Options{MinUnique: 10}, doc(words("l", 0, 5), words("x", 0, 4)), false, 0, 0, "too short for a signature: 9 unique words (minimum 10)"},
		{"few lexicon words extended from B", Options{MinTerms: 5}, doc(words("l", 0, 1), words("b", 0, 5), words("x", 0, 10)), true, 5, 4, ""},
		{"B cannot make up MinTerms", Options{MinTerms: 5}, doc(words("l", 0, 1), words("b", 0, 3), words("x", 0, 10)), false, 4, 3, "minimum 5"},
		{"nothing in any lexicon", Options{}, doc(words("x", 0, 10)), false, 0, 0, "too few lexicon words: 0 of 10 unique words"},
		{"ratio met from L", Options{MinRatio: 0.5}, doc(words("l", 0, 10), words("x", 0, 10)), true, 10, 0, ""},
		{"ratio met with B", Options{MinRatio: 0.5}, doc(words("l", 0, 6), words("b", 0, 10), words("x", 0, 4)), true, 10, 4, ""},
		{"ratio not met", Options{MinRatio: 0.5}, doc(words("l", 0, 6), words("b", 0, 2), words("x", 0, 12)), false, 8, 2, "needed for the minimum ratio 0.5"},
		{"ratio disabled", Options{MinRatio: -1, MinTerms: 5}, doc(words("l", 0, 5), words("x", 0, 500)), true, 5, 0, ""},
		{"default ratio 5%", Options{MinTerms: 5}, doc(words("l", 0, 5), words("b", 0, 30), words("x", 0, 165)), true, 10, 5, ""},
		{"default min terms", Options{}, doc(words("l", 0, DefaultMinTerms-1), words("x", 0, 10)), false, DefaultMinTerms - 1, 0, fmt.Sprintf("minimum %d", DefaultMinTerms)},
		{"min terms lowered", Options{MinTerms: 3}, doc(words("l", 0, 3), words("x", 0, 10)), true, 3, 0, ""},
		{"min terms raised", Options{MinTerms: 8, MinRatio: -1}, doc(words("l", 0, 7), words("x", 0, 5)), false, 7, 0, "minimum 8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSigner(t, lex, tc.opts)
			r := s.Sign(tc.terms)
			if got := len(r.Signatures) > 0 && r.Signatures[0].Bag == 0; got != tc.wantSig {
				t.Fatalf("signature of bag 0: %v, want %v (result %+v)", got, tc.wantSig, r)
			}
			if r.Unique != len(tc.terms) || r.Terms != tc.terms0 || r.Secondary != tc.secondary {
				t.Errorf("Unique %d Terms %d Secondary %d, want %d %d %d", r.Unique, r.Terms, r.Secondary, len(tc.terms), tc.terms0, tc.secondary)
			}
			if tc.reason == "" && r.Reason != "" || !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("reason %q, want %q", r.Reason, tc.reason)
			}
		})
	}
}

// TestLongMessageRule is the situation of the paper's Fig. 1: two long
// messages share a banner of lexicon words, and their real content is
// outside L. Plain I-Match gives both the same signature; with the ratio
// rule, S is extended with the most frequent terms of B, in increasing idf
// order, and the signatures differ.
func TestLongMessageRule(t *testing.T) {
	lex := synthLexicon(t, 1000, 300, 500, BuildOptions{})
	banner := words("l", 0, 8)
	a := doc(banner, words("b", 10, 40), words("x", 0, 60))
	b := doc(banner, words("b", 100, 130), words("y", 0, 60))

	plain := mustSigner(t, lex, Options{K: -1, MinRatio: -1})
	if ra, rb := plain.Sign(a), plain.Sign(b); ra.Signatures[0] != rb.Signatures[0] {
		t.Fatal("without the ratio rule, the banner alone should make the signatures equal")
	}
	s := mustSigner(t, lex, Options{K: -1, MinRatio: 0.2})
	ra, rb := s.Sign(a), s.Sign(b)
	if len(ra.Signatures) != 1 || len(rb.Signatures) != 1 || ra.Signatures[0] == rb.Signatures[0] {
		t.Fatalf("with the ratio rule: %+v %+v, want two different signatures", ra, rb)
	}
	// |U| = 98, 20% → 20 terms: 8 of L and the 12 top-ranked terms of B ∩ U.
	want := doc(banner, words("b", 10, 22))
	if got := s.SignatureTerms(a, 0); !slices.Equal(got, want) {
		t.Errorf("S = %q, want %q", got, want)
	}
	if ra.Terms != 20 || ra.Secondary != 12 {
		t.Errorf("Terms %d Secondary %d, want 20 and 12", ra.Terms, ra.Secondary)
	}
	// Not enough of B in the document: no signature rather than a spurious one.
	c := doc(banner, words("b", 10, 12), words("x", 0, 90))
	if rc := s.Sign(c); len(rc.Signatures) != 0 || rc.Reason == "" {
		t.Errorf("ratio unreachable: %+v, want no signature and a reason", rc)
	}
}

func TestSignProperties(t *testing.T) {
	lex := synthLexicon(t, 1000, 300, 500, BuildOptions{Seed: 3})
	s := mustSigner(t, lex, Options{})
	d := doc(words("l", 0, 40), words("b", 0, 20), words("x", 0, 40))
	r := s.Sign(d)
	if len(r.Signatures) != 11 {
		t.Fatalf("%d signatures, want 11", len(r.Signatures))
	}
	seen := map[[16]byte]bool{}
	for i, sig := range r.Signatures {
		if int(sig.Bag) != i || sig.Lexicon != lex.ID() {
			t.Errorf("signature %d: bag %d lexicon %08x", i, sig.Bag, sig.Lexicon)
		}
		seen[sig.Hash] = true
		terms := s.SignatureTerms(d, i)
		if HashTerms(terms) != sig.Hash {
			t.Errorf("bag %d: hash differs from HashTerms(SignatureTerms)", i)
		}
	}
	if len(seen) != 11 {
		t.Errorf("only %d distinct hashes among 11 bags", len(seen))
	}
	// Order and duplicates of the input do not matter.
	shuffled := append(slices.Clone(d), d[:10]...)
	rand.New(rand.NewPCG(1, 1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if r2 := s.Sign(shuffled); !slices.Equal(r2.Signatures, r.Signatures) {
		t.Error("unsorted input changes the signatures")
	}
	// Bag b does not depend on K.
	s3 := mustSigner(t, lex, Options{K: 3})
	if r3 := s3.Sign(d); !slices.Equal(r3.Signatures, r.Signatures[:4]) {
		t.Error("the first bags change with K")
	}
	// Another seed gives other bags (and another lexicon ID).
	other := mustSigner(t, synthLexicon(t, 1000, 300, 500, BuildOptions{Seed: 4}), Options{})
	ro := other.Sign(d)
	if ro.Signatures[0].Hash != r.Signatures[0].Hash {
		t.Error("the original lexicon's hash should not depend on the seed")
	}
	if ro.Signatures[1].Hash == r.Signatures[1].Hash {
		t.Error("bag 1 is the same with another seed")
	}
	// Concurrent use gives the same results.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if got := s.Sign(shuffled); !slices.Equal(got.Signatures, r.Signatures) {
					t.Error("concurrent Sign differs")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestBagShare(t *testing.T) {
	lex := synthLexicon(t, 1000, 3000, 100, BuildOptions{Seed: 11})
	s := mustSigner(t, lex, Options{})
	for b := 1; b <= 10; b++ {
		// A bootstrap sample keeps 1-(1-1/n)^n ≈ 63.2% of n items; the
		// standard deviation for n = 3000 is about 0.5%.
		if share := s.BagShare(b); math.Abs(share-0.632) > 0.03 {
			t.Errorf("bag %d keeps %.3f of L, want ≈ 0.632", b, share)
		}
	}
	if s.BagShare(0) != 1 {
		t.Error("bag 0 is the whole lexicon")
	}
}

func TestOptionsErrors(t *testing.T) {
	lex := synthLexicon(t, 1000, 30, 50, BuildOptions{})
	for _, o := range []Options{{K: MaxK + 1}, {MinRatio: 1.5}} {
		if _, err := NewSigner(lex, o); err == nil {
			t.Errorf("NewSigner(%+v): want an error", o)
		}
	}
	if _, err := NewSigner(nil, Options{}); err == nil {
		t.Error("nil lexicon: want an error")
	}
	if _, err := NewSigner(lex, Options{K: MaxK}); err != nil {
		t.Errorf("K = MaxK: %v", err)
	}
}

func TestKey(t *testing.T) {
	sig := Signature{Lexicon: 0x01020304, Bag: 7}
	copy(sig.Hash[:], "0123456789abcdef")
	k := sig.Key()
	if got := hex.EncodeToString(k); got != "0149"+"01020304"+"07"+hex.EncodeToString([]byte("0123456789abcdef")) {
		t.Errorf("key %s", got)
	}
	back, err := ParseKey(k)
	if err != nil || back != sig {
		t.Errorf("ParseKey = %+v, %v", back, err)
	}
	if got := sig.AppendKey([]byte("x")); string(got[1:]) != string(k) {
		t.Error("AppendKey differs from Key")
	}
	for _, bad := range [][]byte{nil, k[:10], append([]byte{2}, k[1:]...), append([]byte{1, 'A'}, k[2:]...)} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%x): want an error", bad)
		}
	}
}

// TestStabilityLaw checks eq. (1) of the paper: after n random insertions
// or deletions of lexicon words, the probability that at least one of the K
// bagged signatures is unchanged is 1-(1-p^n)^K, p being the fraction of L
// missing from a bag (measured).
func TestStabilityLaw(t *testing.T) {
	lex := synthLexicon(t, 1000, 4000, 0, BuildOptions{Seed: 5})
	const docs = 1500
	s := mustSigner(t, lex, Options{K: 10, MinRatio: -1, MinTerms: 1})
	p := 0.0
	for b := 1; b <= 10; b++ {
		p += 1 - s.BagShare(b)
	}
	p /= 10
	if p < 0.33 || p > 0.40 {
		t.Fatalf("measured p = %.3f, want ≈ 0.368", p)
	}
	L := lex.Primary()
	rng := rand.New(rand.NewPCG(42, 43))
	for _, n := range []int{1, 2, 3, 5} {
		for _, K := range []int{1, 3, 10} {
			kept := 0
			for range docs {
				// A document: 60 lexicon words and 60 other words.
				d := map[string]bool{}
				for len(d) < 60 {
					d[L[rng.IntN(len(L))]] = true
				}
				base := make([]string, 0, 120)
				for w := range d {
					base = append(base, w)
				}
				slices.Sort(base) // map order must not make the test random
				base = append(base, words("x", 0, 60)...)
				pert := slices.Clone(base)
				for range n {
					if rng.IntN(2) == 0 { // insert a lexicon word not in the document
						for {
							w := L[rng.IntN(len(L))]
							if !d[w] {
								d[w] = true
								pert = append(pert, w)
								break
							}
						}
					} else { // delete one of its lexicon words
						i := rng.IntN(len(pert) - 60)
						for !strings.HasPrefix(pert[i], "l") {
							i = rng.IntN(len(pert))
						}
						pert = slices.Delete(pert, i, i+1)
					}
				}
				a, b := s.Sign(base), s.Sign(pert)
				for k := 1; k <= K; k++ {
					if a.Signatures[k] == b.Signatures[k] {
						kept++
						break
					}
				}
			}
			got := float64(kept) / docs
			want := 1 - math.Pow(1-math.Pow(p, float64(n)), float64(K))
			// Binomial standard deviation of the share, plus a little for
			// the approximation p^n (sampling without replacement).
			tol := 3*math.Sqrt(want*(1-want)/docs) + 0.01
			t.Logf("n=%d K=%2d: kept %.3f, eq. (1) %.3f (tolerance %.3f)", n, K, got, want, tol)
			if math.Abs(got-want) > tol {
				t.Errorf("n=%d K=%d: %.3f of documents keep a bagged signature, eq. (1) predicts %.3f ± %.3f", n, K, got, want, tol)
			}
		}
	}
}

// TestSignMatchesSignatureTerms checks Sign and SignSorted against the
// explanation path (SignatureTerms + HashTerms) on documents where every
// bag, some bags or no bag reach the threshold with terms of L alone.
func TestSignMatchesSignatureTerms(t *testing.T) {
	lex := synthLexicon(t, 1000, 300, 500, BuildOptions{Seed: 3})
	s := mustSigner(t, lex, Options{})
	tests := []struct {
		name string
		d    []string
	}{
		{"primary only", doc(words("l", 0, 60))},
		{"primary and secondary", doc(words("l", 0, 12), words("b", 0, 40), words("x", 0, 10))},
		{"mostly unknown", doc(words("l", 0, 8), words("b", 0, 8), words("x", 0, 60))},
		{"one primary run", doc(words("l", 0, 1), words("b", 0, 30))},
		{"empty", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, rs := s.Sign(tc.d), s.SignSorted(tc.d)
			if !slices.Equal(r.Signatures, rs.Signatures) || r.Terms != rs.Terms ||
				r.Secondary != rs.Secondary || r.Reason != rs.Reason || r.Unique != rs.Unique {
				t.Fatalf("SignSorted = %+v, Sign = %+v", rs, r)
			}
			got := map[int][16]byte{}
			for _, sig := range r.Signatures {
				got[int(sig.Bag)] = sig.Hash
			}
			for b := 0; b <= s.Options().K; b++ {
				terms := s.SignatureTerms(tc.d, b)
				h, ok := got[b]
				if (terms != nil) != ok {
					t.Fatalf("bag %d: signature %v, SignatureTerms %d terms", b, ok, len(terms))
				}
				if ok && HashTerms(terms) != h {
					t.Errorf("bag %d: hash differs from HashTerms(SignatureTerms)", b)
				}
			}
		})
	}
}

// TestSignSortedDF: SignSortedDF gives SignSorted's result and each
// term's Lexicon.DF, on documents of the default lexicon (short and long,
// with and without enough primary terms) and of a synthetic one.
func TestSignSortedDF(t *testing.T) {
	def, err := DefaultLexicon()
	if err != nil {
		t.Fatal(err)
	}
	synth := synthLexicon(t, 1000, 300, 500, BuildOptions{Seed: 3})
	rng := rand.New(rand.NewPCG(7, 7))
	for _, lex := range []*Lexicon{def, synth} {
		vocab := make([]string, 0, len(lex.ranked)+50)
		for _, r := range lex.ranked {
			vocab = append(vocab, r.term)
		}
		vocab = append(vocab, words("unseen", 0, 50)...)
		vocab = append(vocab, "abcdefghijklmnopq", "é", "")
		for _, o := range []Options{{}, {K: 3, MinRatio: -1}, {MinTerms: 30}} {
			s := mustSigner(t, lex, o)
			var df []int32
			for i := range 300 {
				n := []int{0, 3, 8, 20, 60, 200, 1000}[i%7]
				d := make([]string, n)
				for k := range d {
					d[k] = vocab[rng.IntN(len(vocab))]
				}
				d = doc(d)
				want := s.SignSorted(d)
				var got Result
				got, df = s.SignSortedDF(d, df)
				if got.Unique != want.Unique || got.Terms != want.Terms || got.Secondary != want.Secondary ||
					got.Reason != want.Reason || !slices.Equal(got.Signatures, want.Signatures) {
					t.Fatalf("document %d (%d terms): SignSortedDF %+v, SignSorted %+v", i, len(d), got, want)
				}
				if len(df) != len(d) {
					t.Fatalf("document %d: %d frequencies for %d terms", i, len(df), len(d))
				}
				for k, term := range d {
					if int(df[k]) != lex.DF(term) {
						t.Fatalf("df of %q: %d, want %d", term, df[k], lex.DF(term))
					}
				}
			}
		}
	}
}
