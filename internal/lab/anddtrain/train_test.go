package anddtrain

import (
	"math"
	"slices"
	"testing"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/lab/stats"
)

func mustSigner(t testing.TB, m *andd.Model) *andd.Signer {
	t.Helper()
	s, err := andd.NewSigner(m, testDF())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGradient checks the analytic gradient of the training loss against
// central finite differences, for both similarity functions.
func TestGradient(t *testing.T) {
	docs := synthCampaigns(11, 6, 4, 8)
	features := andd.FeatureNames()
	tds, err := prepare(docs, testDF(), features, 1)
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := samplePairs(docs, 300, 3)
	if err != nil {
		t.Fatal(err)
	}
	// A point where every weight is positive and away from the kink of
	// max(0, ·): finite differences are then exact up to O(h²).
	lambda := []float64{1, 0.4, 0.8, 0.2, -0.1, -0.2, 0.1, 0.05, 0.05, 0.3, 0.2, 0.4, 0.1}
	for _, sim := range []string{andd.SimCosine, andd.SimJaccard} {
		t.Run(sim, func(t *testing.T) {
			ts := &trainSet{nf: len(features), simFn: sim, docs: tds, pairs: pairs, gamma: 5, alpha: 0.1, init: DefaultInit(features)}
			grad := make([]float64, len(features))
			ts.lossGrad(lambda, grad)
			scratch := make([]float64, len(features))
			const h = 1e-6
			for j := range lambda {
				lp, lm := slices.Clone(lambda), slices.Clone(lambda)
				lp[j] += h
				lm[j] -= h
				num := (ts.lossGrad(lp, scratch) - ts.lossGrad(lm, scratch)) / (2 * h)
				if d := math.Abs(num - grad[j]); d > 1e-6*(1+math.Abs(num)) {
					t.Errorf("∂L/∂λ[%s]: analytic %.9g, numeric %.9g", features[j], grad[j], num)
				}
			}
		})
	}
}

// TestTrain checks that training lowers the loss, improves the separation
// of near-duplicate from unrelated pairs, and is reproducible.
func TestTrain(t *testing.T) {
	docs := synthCampaigns(21, 12, 5, 30)
	opts := Options{Seed: 7, Pairs: 3000, MaxIter: 60}
	m1, res, err := Train(docs, testDF(), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loss %.4f -> %.4f in %d iterations (%s); λ = %v", res.InitLoss, res.Loss, res.Iterations, res.Status, m1.Lambda)
	if res.Loss >= res.InitLoss {
		t.Errorf("training did not lower the loss: %v -> %v", res.InitLoss, res.Loss)
	}
	m2, _, err := Train(docs, testDF(), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m1.Lambda, m2.Lambda) {
		t.Errorf("same seed, different λ:\n%v\n%v", m1.Lambda, m2.Lambda)
	}
	// Held-out campaigns: Max F1 of the learned weights ≥ that of the
	// initial ones.
	test := synthCampaigns(99, 10, 5, 30)
	f1 := func(m *andd.Model) float64 {
		s := mustSigner(t, m)
		vs := make([]andd.Vector, len(test))
		for i, d := range test {
			vs[i] = s.Weigh(d.Doc, d.Toks)
		}
		var scores []float64
		var labels []bool
		for i := range vs {
			for j := i + 1; j < len(vs); j++ {
				scores = append(scores, andd.CosineVectors(vs[i], vs[j]))
				labels = append(labels, test[i].Cluster >= 0 && test[i].Cluster == test[j].Cluster)
			}
		}
		return stats.MaxF1(scores, labels).F1
	}
	init := m1.Clone()
	init.Lambda = DefaultInit(init.Features)
	before, after := f1(init), f1(m1)
	t.Logf("held-out Max F1: initial weights %.3f, trained %.3f", before, after)
	if after < before-0.01 {
		t.Errorf("trained Max F1 %.3f < initial %.3f", after, before)
	}
}

func TestTrainErrors(t *testing.T) {
	one := synthCampaigns(1, 1, 3, 0)
	if _, _, err := Train(one, nil, nil, Options{Pairs: 10}); err == nil {
		t.Error("training on a single cluster succeeded")
	}
	singles := synthCampaigns(1, 0, 0, 5)
	if _, _, err := Train(singles, nil, nil, Options{Pairs: 10}); err == nil {
		t.Error("training without near-duplicates succeeded")
	}
	docs := synthCampaigns(1, 3, 3, 3)
	if _, _, err := Train(docs, nil, nil, Options{Pairs: 10, Features: []string{"bogus"}}); err == nil {
		t.Error("unknown feature accepted")
	}
	if _, _, err := Train(docs, nil, nil, Options{Pairs: 10, Similarity: "dice"}); err == nil {
		t.Error("unknown similarity accepted")
	}
}
