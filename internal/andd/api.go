// Package andd implements adaptive near-duplicate detection (Hajishirzi,
// Yih & Kolcz, "Adaptive near-duplicate detection via similarity
// learning"): term weights learned as a linear combination of features,
// and LSH sketches of the weighted vector (random hyperplanes for cosine,
// min-hash for Jaccard) with band keys for sub-linear candidate search.
package andd

// SketchVersion is the version of the sketch and band-key wire format.
const SketchVersion = 1

// DocFreq gives corpus document frequencies; *imatchbag.Lexicon satisfies it.
type DocFreq interface {
	DF(term string) int
	N() int
}

// Model (model.go) is a trained weighting model plus its LSH parameters;
// ReadModel reads a model file and DefaultModel returns the embedded one.

// Vector is a document's weighted term vector.
type Vector map[string]float64

// Sketch is a document's LSH signature.
type Sketch struct {
	// Bits holds the m random-hyperplane bits (cosine family).
	Bits []uint64
	// MinHash holds the weighted min-hash values (Jaccard family), if enabled.
	MinHash []uint32
}

// Sketch.MarshalBinary, UnmarshalSketch and Cosine are in sketch.go.

// Signer (signer.go) weights documents and sketches them: NewSigner,
// Weigh, Sketch, BandKeys and Threshold.
