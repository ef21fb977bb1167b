package andd

import (
	"fmt"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// FeatureExtractor gives the feature values φ of a document's terms: a
// model weighs a term max(0, λ·φ), λ aligned with the features. It is the
// seam of learning λ (internal/lab/anddtrain): the features and their
// scaling are the model's definition and stay here, the optimizer that
// weighs them is the lab's. The daemon weighs through a Signer only.
// A FeatureExtractor is used by one goroutine.
type FeatureExtractor struct {
	ex  *extractor
	idx []int // the selected features' positions in the full vector
	phi []float64
}

// NewFeatureExtractor returns the extractor of the named features (see
// FeatureNames), in that order, over k-gram terms of size ngram, with the
// corpus document frequencies df (nil: every term unseen).
func NewFeatureExtractor(df DocFreq, features []string, ngram int) (*FeatureExtractor, error) {
	idx := make([]int, len(features))
	hosts := false
	for i, f := range features {
		j := featureIndex(f)
		if j < 0 {
			return nil, fmt.Errorf("unknown feature %q", f)
		}
		idx[i] = j
		hosts = hosts || j == fHost
	}
	return &FeatureExtractor{ex: newExtractor(df, ngram, hosts), idx: idx, phi: make([]float64, len(idx))}, nil
}

// Terms calls fn once for every distinct term of the document (doc and
// its tokens toks) with its feature values. phi is reused between calls:
// fn copies what it keeps.
func (f *FeatureExtractor) Terms(doc *mime.Document, toks []mime.Token, fn func(term string, phi []float64)) {
	f.ex.extract(doc, toks, nil, func(term string, full *[numFeatures]float64, _ float64) {
		for i, j := range f.idx {
			f.phi[i] = full[j]
		}
		fn(term, f.phi)
	})
}
