package andd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func mustSigner(t testing.TB, m *Model) *Signer {
	t.Helper()
	s, err := NewSigner(m, testDF())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDefaultModelLoads(t *testing.T) {
	m, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	if m.LSH.Bits != 384 || m.LSH.MinHashes != 0 {
		t.Errorf("default LSH = %+v, want 384 bits and no min-hashes", m.LSH)
	}
	if _, err := NewSigner(m, nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	m2, err := ReadModel(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Lambda, m2.Lambda) || m.LSH != m2.LSH || m.Threshold != m2.Threshold {
		t.Errorf("model round trip changed it: %+v vs %+v", m, m2)
	}
}

func TestReadModelRejects(t *testing.T) {
	good := testModel()
	cases := map[string]func(m *Model){
		"format":     func(m *Model) { m.Format = "x" },
		"version":    func(m *Model) { m.Version = 2 },
		"lambda len": func(m *Model) { m.Lambda = m.Lambda[:3] },
		"feature":    func(m *Model) { m.Features[0] = "nope" },
		"dup":        func(m *Model) { m.Features[1] = m.Features[0] },
		"sim":        func(m *Model) { m.Similarity = "dice" },
		"bits":       func(m *Model) { m.LSH.Bits = 100 },
		"bands":      func(m *Model) { m.LSH.Bands = 300 },
		"band bits":  func(m *Model) { m.LSH.BandBits = 65 },
		"threshold":  func(m *Model) { m.Threshold = 1.5 },
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			m := good.Clone()
			mut(m)
			var buf bytes.Buffer
			m.WriteTo(&buf)
			if _, err := ReadModel(&buf); err == nil {
				t.Error("ReadModel accepted a bad model")
			}
		})
	}
	for _, junk := range []string{"", "{", "null", "[]", `{"format":1}`} {
		if _, err := ReadModel(strings.NewReader(junk)); err == nil {
			t.Errorf("ReadModel(%q) succeeded", junk)
		}
	}
}

func TestWeighFeatures(t *testing.T) {
	s := mustSigner(t, testModel())
	doc, toks := testDoc("CHEAP Pills today", "Buy cheap pills at pillshop now, cheap cheap. zqxwvy", "http://www.pillshop.example/buy")
	v := s.Weigh(doc, toks)
	if v["cheap"] <= 0 || v["pills"] <= 0 {
		t.Fatalf("expected weights for cheap and pills: %v", v)
	}
	if _, ok := v["@pillshop.example"]; !ok {
		t.Errorf("host pseudo-term missing: %v", v)
	}
	// "pills" is unseen and in the subject; "zqxwvy" is unseen, body only,
	// late: it must weigh less.
	if v["zqxwvy"] >= v["pills"] {
		t.Errorf("w(zqxwvy)=%v >= w(pills)=%v", v["zqxwvy"], v["pills"])
	}
	// Features themselves.
	ex := newExtractor(testDF(), 1, true)
	got := map[string][numFeatures]float64{}
	ex.extract(doc, toks, nil, func(term string, phi *[numFeatures]float64, _ float64) { got[term] = *phi })
	tests := []struct {
		term string
		f    int
		want float64
	}{
		{"cheap", fBias, 1},
		{"cheap", fTF, math.Log1p(4) / math.Log1p(16)},
		{"cheap", fSubject, 1},
		{"cheap", fAllCaps, 0.25},
		{"cheap", fLoc, 0},
		{"cheap", fUnseen, 0},
		{"pills", fCap, 0.5},
		{"pills", fUnseen, 1},
		{"pills", fIDF, 1},
		{"pillshop", fInURL, 1},
		{"today", fInURL, 0},
		{"@pillshop.example", fHost, 1},
		{"zqxwvy", fTermLen, 0.3},
	}
	for _, tc := range tests {
		phi, ok := got[tc.term]
		if !ok {
			t.Errorf("term %q not extracted", tc.term)
			continue
		}
		if math.Abs(phi[tc.f]-tc.want) > 1e-12 {
			t.Errorf("%s(%q) = %v, want %v", featureNameList[tc.f], tc.term, phi[tc.f], tc.want)
		}
	}
}

func TestNGrams(t *testing.T) {
	m := testModel()
	m.NGram = 2
	s := mustSigner(t, m)
	doc, toks := testDoc("", "alpha bravo charlie delta")
	v := s.Weigh(doc, toks)
	for _, want := range []string{"alpha bravo", "bravo charlie", "charlie delta"} {
		if _, ok := v[want]; !ok {
			t.Errorf("bigram %q missing from %v", want, v)
		}
	}
}

func TestEmptyDocument(t *testing.T) {
	s := mustSigner(t, testModel())
	v := s.Weigh(nil, nil)
	if len(v) != 0 {
		t.Fatalf("Weigh(nil) = %v", v)
	}
	sk := s.Sketch(v)
	if !sk.IsEmpty() {
		t.Errorf("sketch of empty vector = %+v", sk)
	}
	if k := s.BandKeys(sk); k != nil {
		t.Errorf("band keys of empty sketch = %v", k)
	}
	if c := Cosine(sk, sk); c != 0 {
		t.Errorf("Cosine(empty, empty) = %v", c)
	}
	// Weights that are all zero, negative or NaN give an empty sketch too.
	if sk := s.Sketch(Vector{"a": 0, "b": -1, "c": math.NaN()}); !sk.IsEmpty() {
		t.Errorf("sketch of non-positive vector = %+v", sk)
	}
}

func TestSketchDeterministic(t *testing.T) {
	s := mustSigner(t, testModel())
	doc, toks := testDoc("Great offer", strings.Repeat("special discount price click here today only best market ", 5), "http://x.example/a")
	v := s.Weigh(doc, toks)
	a := s.Sketch(v)
	for range 20 {
		if b := s.Sketch(v); !slices.Equal(a.Bits, b.Bits) || !slices.Equal(a.MinHash, b.MinHash) {
			t.Fatal("Sketch depends on map iteration order")
		}
	}
	if b := s.SketchDocument(doc, toks); !slices.Equal(a.Bits, b.Bits) || !slices.Equal(a.MinHash, b.MinHash) {
		t.Fatal("SketchDocument differs from Sketch(Weigh)")
	}
	if c := Cosine(a, a); c != 1 {
		t.Errorf("Cosine(a, a) = %v", c)
	}
	if j := Jaccard(a, a); j != 1 {
		t.Errorf("Jaccard(a, a) = %v", j)
	}
}

// goldenDocs are fixed documents whose sketches are pinned.
var goldenDocs = []struct{ subject, text, url string }{
	{"Cheap meds online", "Buy cheap meds online today. Special discount for our best customers, click here.", "http://meds.example/buy"},
	{"Project meeting", "Please find the weekly project report attached. The team meeting is moved to Thursday.", ""},
	{"", "Save MILLIONS of dollars with this limited offer", "https://www.offer.example.co.uk/x?y=1"},
}

// TestGoldenTestModel pins sketches and band keys of the fixed test model:
// it guards the hashing scheme (the wire format), independent of training.
func TestGoldenTestModel(t *testing.T) {
	want := []string{
		"2d56bd7719b2bd0f68a14364f63c0a1c",
		"f05cdad8997a405a4fef261d3e9b0d1d",
		"c9316d08b75d349cd8f1085aa02eb06c",
	}
	checkGolden(t, mustSigner(t, testModel()), want)
}

// TestGoldenDefaultModel pins the sketches and band keys of the shipped
// model (with the test df table): retraining the model changes them, and
// the change must be deliberate (bump SketchVersion if stores must not mix
// old and new sketches).
func TestGoldenDefaultModel(t *testing.T) {
	m, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"e5a5cb6b73c40f70abdb681fec3f8da7",
		"3dd04491122a7e2d92391a923aaefe75",
		"6cb026480bbd3ea2217c9ee91bbf3fe3",
	}
	checkGolden(t, mustSigner(t, m), want)
}

func checkGolden(t *testing.T, s *Signer, want []string) {
	t.Helper()
	for i, g := range goldenDocs {
		var urls []string
		if g.url != "" {
			urls = []string{g.url}
		}
		doc, toks := testDoc(g.subject, g.text, urls...)
		sk := s.SketchDocument(doc, toks)
		bin, err := sk.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		h.Write(bin)
		for _, k := range s.BandKeys(sk) {
			h.Write(k)
		}
		got := hex.EncodeToString(h.Sum(nil))[:32]
		if got != want[i] {
			t.Errorf("golden doc %d: digest %s, want %s (first bits %016x, first key %x)", i, got, want[i], sk.Bits[0], s.BandKeys(sk)[0])
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	s := mustSigner(t, testModel())
	doc, toks := testDoc("Hello", "some words here about the offer and price", "http://a.example")
	for _, sk := range []Sketch{{}, s.SketchDocument(doc, toks), {Bits: []uint64{1, 2}}, {MinHash: []uint32{7}}} {
		b, err := sk.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalSketch(b)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Bits, sk.Bits) || !slices.Equal(got.MinHash, sk.MinHash) {
			t.Errorf("round trip: got %+v want %+v", got, sk)
		}
	}
	for _, bad := range [][]byte{nil, {1}, {2, 0, 0, 0, 0, 0}, {1, 1, 0, 0, 0, 0}, {1, 0, 1, 0, 0, 0}, {1, 0, 0, 0, 1, 0, 1, 2, 3}} {
		if _, err := UnmarshalSketch(bad); err == nil {
			t.Errorf("UnmarshalSketch(%x) succeeded", bad)
		}
	}
}

// randVectorPair returns two random vectors whose cosine is about target:
// shared terms plus private ones.
func randVectorPair(r *rand.Rand, n int, share float64) (Vector, Vector) {
	a, b := Vector{}, Vector{}
	for i := range n {
		w := 0.1 + r.Float64()
		term := fmt.Sprintf("t%d-%d", i, r.Uint64())
		if r.Float64() < share {
			a[term] = w
			b[term] = w * (0.5 + r.Float64())
		} else if r.IntN(2) == 0 {
			a[term] = w
		} else {
			b[term] = w
		}
	}
	return a, b
}

// TestCosineConvergence is the paper's Fig. 1 as a property: the sketch
// estimate of the cosine converges to the raw cosine as m grows, with an
// error shrinking about as 1/sqrt(m).
func TestCosineConvergence(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type pair struct{ a, b Vector }
	var pairs []pair
	for i := range 60 {
		a, b := randVectorPair(r, 80, float64(i%6)/6+0.1)
		pairs = append(pairs, pair{a, b})
	}
	var errs []float64
	for _, m := range []int{64, 256, 1024, 4096} {
		model := testModel()
		model.LSH.Bits = m
		model.LSH.MinHashes = 0
		s := mustSigner(t, model)
		sum := 0.0
		for _, p := range pairs {
			est := Cosine(s.Sketch(p.a), s.Sketch(p.b))
			sum += math.Abs(est - CosineVectors(p.a, p.b))
		}
		mae := sum / float64(len(pairs))
		errs = append(errs, mae)
		t.Logf("m=%4d mean |estimate - cosine| = %.4f", m, mae)
	}
	for i := 1; i < len(errs); i++ {
		// ×4 bits: ideally ÷2 error; allow slack for noise and quantization.
		if errs[i] > errs[i-1]*0.75 {
			t.Errorf("error did not shrink enough from step %d to %d: %v", i-1, i, errs)
		}
	}
	if errs[len(errs)-1] > 0.03 {
		t.Errorf("error at m=4096 = %v, want < 0.03", errs[len(errs)-1])
	}
}

// minMaxJaccard is Σ min / Σ max of the vectors after the sketch's
// quantization (each normalized by its largest weight).
func minMaxJaccard(a, b Vector, quant float64) float64 {
	q := func(v Vector) map[string]float64 {
		mx := 0.0
		for _, w := range v {
			mx = max(mx, w)
		}
		out := map[string]float64{}
		for t, w := range v {
			out[t] = max(1, math.Floor(w/mx*quant+0.5))
		}
		return out
	}
	qa, qb := q(a), q(b)
	num, den := 0.0, 0.0
	for t, x := range qa {
		y := qb[t]
		num += min(x, y)
		den += max(x, y)
	}
	for t, y := range qb {
		if _, ok := qa[t]; !ok {
			den += y
		}
	}
	return num / den
}

func TestJaccardConvergence(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var errs []float64
	for _, k := range []int{20, 80, 320, 1280} {
		model := testModel()
		model.LSH.MinHashes = k
		s := mustSigner(t, model)
		r2 := rand.New(rand.NewPCG(3, 4))
		sum := 0.0
		const n = 40
		for i := range n {
			a, b := randVectorPair(r2, 60, float64(i%5)/5+0.1)
			est := Jaccard(s.Sketch(a), s.Sketch(b))
			sum += math.Abs(est - minMaxJaccard(a, b, 32))
		}
		errs = append(errs, sum/n)
		t.Logf("k=%4d mean |estimate - weighted Jaccard| = %.4f", k, sum/n)
	}
	_ = r
	if errs[len(errs)-1] > errs[0]*0.5 || errs[len(errs)-1] > 0.03 {
		t.Errorf("min-hash estimate does not converge: %v", errs)
	}
}

// TestBandKeyRecall checks the band layout against its analytic recall
// 1-(1-p^r)^b with p = 1-θ/π: pairs above the threshold share a key, and
// unrelated pairs rarely do.
func TestBandKeyRecall(t *testing.T) {
	model := testModel()
	s := mustSigner(t, model)
	r := rand.New(rand.NewPCG(5, 6))
	hits, total, falseHits, falseTotal := 0, 0, 0, 0
	expect := 0.0
	for range 400 {
		a, b := randVectorPair(r, 60, 0.9)
		c := CosineVectors(a, b)
		ka, kb := s.BandKeys(s.Sketch(a)), s.BandKeys(s.Sketch(b))
		shared := false
		for i := range ka {
			if bytes.Equal(ka[i], kb[i]) {
				shared = true
			}
		}
		if c >= 0.8 {
			total++
			expect += BandRecall(c, model.LSH.Bands, model.LSH.BandBits)
			if shared {
				hits++
			}
		}
		x, y := randVectorPair(r, 60, 0)
		kx, ky := s.BandKeys(s.Sketch(x)), s.BandKeys(s.Sketch(y))
		falseTotal++
		for i := range kx {
			if bytes.Equal(kx[i], ky[i]) {
				falseHits++
				break
			}
		}
	}
	if total < 100 {
		t.Fatalf("only %d pairs above 0.8", total)
	}
	recall := float64(hits) / float64(total)
	expect /= float64(total)
	t.Logf("recall %.3f (analytic %.3f) over %d pairs; unrelated candidates %d/%d", recall, expect, total, falseHits, falseTotal)
	if recall < expect-0.05 || recall < 0.85 {
		t.Errorf("recall %.3f below analytic %.3f", recall, expect)
	}
	if float64(falseHits)/float64(falseTotal) > 0.05 {
		t.Errorf("unrelated pairs share keys too often: %d/%d", falseHits, falseTotal)
	}
	// Keys have the documented form.
	k := s.BandKeys(s.Sketch(Vector{"x": 1}))
	if len(k) != model.LSH.Bands || len(k[3]) != 3+2 || k[3][0] != SketchVersion || k[3][1] != 'A' || k[3][2] != 3 {
		t.Errorf("band key form: %d keys, key 3 = %x", len(k), k[3])
	}
}

func TestBandLayout(t *testing.T) {
	pos := bandLayout(384, 32, 12, 1)
	seen := map[uint16]bool{}
	for _, band := range pos {
		for _, p := range band {
			if p >= 384 || seen[p] {
				t.Fatalf("position %d repeated or out of range", p)
			}
			seen[p] = true
		}
	}
	// More bands than bits: every band still has r distinct positions.
	for _, band := range bandLayout(64, 20, 16, 9) {
		s := slices.Clone(band)
		slices.Sort(s)
		if len(slices.Compact(s)) != 16 {
			t.Fatalf("band with repeated positions: %v", band)
		}
	}
}

// TestWeighMatchesFeatures checks the fast weighting path (pruned df
// look-ups, fused linear combination) against the plain definition
// w = max(0, Σ λj φj) over the full feature vectors used in training.
func TestWeighMatchesFeatures(t *testing.T) {
	for _, m := range []*Model{testModel(), func() *Model { m, _ := DefaultModel(); return m }()} {
		s := mustSigner(t, m)
		ex := newExtractor(testDF(), m.NGram, true)
		for _, d := range synthCampaigns(5, 4, 3, 10) {
			want := Vector{}
			ex.extract(d.Doc, d.Toks, nil, func(term string, phi *[numFeatures]float64, _ float64) {
				if w := s.weight(phi); w > 0 {
					want[term] = w
				}
			})
			got := s.Weigh(d.Doc, d.Toks)
			if len(got) != len(want) {
				t.Fatalf("%d weighted terms, want %d", len(got), len(want))
			}
			for term, w := range want {
				if math.Abs(got[term]-w) > 1e-12 {
					t.Errorf("w(%q) = %v, want %v", term, got[term], w)
				}
			}
		}
	}
}
