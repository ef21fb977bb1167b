package andd

import (
	"math"
	"testing"
)

// TestFeatureExtractor: the feature values the extractor gives, weighed
// by a model's λ as max(0, λ·φ), are the weights the model's Signer gives
// (the contract a trainer relies on); an unknown feature is an error.
func TestFeatureExtractor(t *testing.T) {
	def, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Model{testModel(), def} {
		s := mustSigner(t, m)
		fx, err := NewFeatureExtractor(testDF(), m.Features, m.NGram)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range synthCampaigns(5, 4, 3, 10) {
			want := s.Weigh(d.Doc, d.Toks)
			n := 0
			fx.Terms(d.Doc, d.Toks, func(term string, phi []float64) {
				if len(phi) != len(m.Features) {
					t.Fatalf("%d feature values, want %d", len(phi), len(m.Features))
				}
				z := 0.0
				for i, l := range m.Lambda {
					z += l * phi[i]
				}
				if z <= 0 {
					return
				}
				n++
				if math.Abs(want[term]-z) > 1e-9 {
					t.Errorf("λ·φ(%q) = %v, Signer weighs %v", term, z, want[term])
				}
			})
			if n != len(want) {
				t.Errorf("%d terms of positive weight, Signer weighs %d", n, len(want))
			}
		}
	}
	if _, err := NewFeatureExtractor(testDF(), []string{"tf", "bogus"}, 1); err == nil {
		t.Error("unknown feature accepted")
	}
}
