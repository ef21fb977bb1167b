package andd

import (
	"math/rand/v2"
	"testing"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// zReference is the plain computation of a term's z from its feature
// vector, in the order the Signer has always used: the features in
// canonical order, then the df-dependent group (idf, idf2, unseen) added
// as one sum. Weights and sketches must stay bit-identical to it.
func zReference(lam *[numFeatures]float64, phi *[numFeatures]float64) float64 {
	z := 0.0
	// float64(...) rounds each product, as the Signer does: no FMA fusion.
	z += float64(lam[fBias] * phi[fBias])
	z += float64(lam[fTF] * phi[fTF])
	for f := fLoc; f < numFeatures; f++ {
		z += float64(lam[f] * phi[f])
	}
	z += float64(float64(lam[fIDF]*phi[fIDF])+float64(lam[fIDF2]*phi[fIDF2])) + float64(lam[fUnseen]*phi[fUnseen])
	return z
}

// TestWeighBitIdentical checks that the table-driven weights of the
// Signer equal zReference exactly (==, not within a tolerance), with
// random weights, with and without the vocabulary table, and for terms
// past the tf table.
func TestWeighBitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	docs := synthCampaigns(9, 4, 3, 10)
	// A term repeated past the tf table and a capitalized one.
	var long []mime.Token
	for i := range 100 {
		long = append(long, mime.Token{Term: "money", Capitalized: i%3 == 0, AllCaps: i%7 == 0})
	}
	docs = append(docs, labeledDoc{Toks: long})
	for trial := range 6 {
		m := testModel()
		for i := range m.Lambda {
			m.Lambda[i] = r.Float64()*2 - 0.7
		}
		var df DocFreq = testDF()
		if trial%2 == 1 {
			df = rangeDF{testDF()} // with the vocabulary table
		}
		s, err := NewSigner(m, df)
		if err != nil {
			t.Fatal(err)
		}
		if (s.ex.vocab != nil) != (trial%2 == 1) {
			t.Fatalf("trial %d: vocabulary table %v", trial, s.ex.vocab != nil)
		}
		ex := newExtractor(df, m.NGram, true)
		weighted := 0
		for _, d := range docs {
			want := Vector{}
			ex.extract(d.Doc, d.Toks, nil, func(term string, phi *[numFeatures]float64, _ float64) {
				if z := zReference(&s.lam, phi); z > 0 {
					want[term] = z
				}
			})
			got := s.Weigh(d.Doc, d.Toks)
			if len(got) != len(want) {
				t.Fatalf("trial %d: %d weighted terms, want %d", trial, len(got), len(want))
			}
			weighted += len(want)
			for term, w := range want {
				if got[term] != w {
					t.Errorf("trial %d: w(%q) = %v, want exactly %v", trial, term, got[term], w)
				}
			}
		}
		if weighted == 0 {
			t.Errorf("trial %d: no weighted term", trial)
		}
	}
}
