// Package andd implements adaptive near-duplicate detection (Hajishirzi,
// Yih & Kolcz, "Adaptive near-duplicate detection via similarity
// learning"): term weights learned as a linear combination of features,
// and LSH sketches of the weighted vector (random hyperplanes for cosine,
// min-hash for Jaccard) with band keys for sub-linear candidate search.
package andd

import (
	"io"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// SketchVersion is the version of the sketch and band-key wire format.
const SketchVersion = 1

// DocFreq gives corpus document frequencies; *imatchbag.Lexicon satisfies it.
type DocFreq interface {
	DF(term string) int
	N() int
}

// Model is a trained weighting model plus its LSH parameters.
type Model struct {
	// filled in by the implementation
}

// ReadModel reads a model file.
func ReadModel(r io.Reader) (*Model, error) { panic("not implemented") }

// DefaultModel returns the embedded default model.
func DefaultModel() (*Model, error) { panic("not implemented") }

// Vector is a document's weighted term vector.
type Vector map[string]float64

// Sketch is a document's LSH signature.
type Sketch struct {
	// Bits holds the m random-hyperplane bits (cosine family).
	Bits []uint64
	// MinHash holds the weighted min-hash values (Jaccard family), if enabled.
	MinHash []uint32
}

// MarshalBinary encodes the sketch in its versioned wire form.
func (s Sketch) MarshalBinary() ([]byte, error) { panic("not implemented") }

// UnmarshalSketch decodes MarshalBinary's output.
func UnmarshalSketch(b []byte) (Sketch, error) { panic("not implemented") }

// Cosine estimates the cosine similarity of the vectors behind two sketches.
func Cosine(a, b Sketch) float64 { panic("not implemented") }

// Signer weights documents and sketches them. Safe for concurrent use.
type Signer struct{}

// NewSigner returns a Signer for model m and document frequencies df.
func NewSigner(m *Model, df DocFreq) (*Signer, error) { panic("not implemented") }

// Weigh returns the weighted vector of a document.
func (s *Signer) Weigh(doc *mime.Document, toks []mime.Token) Vector { panic("not implemented") }

// Sketch returns the sketch of a weighted vector (empty if v is empty).
func (s *Signer) Sketch(v Vector) Sketch { panic("not implemented") }

// BandKeys returns the keys under which the store indexes a sketch; two
// sketches above the model's similarity threshold share at least one key
// with high probability.
func (s *Signer) BandKeys(sk Sketch) [][]byte { panic("not implemented") }

// Threshold is the estimated cosine above which two sketches are considered
// near-duplicates by the model.
func (s *Signer) Threshold() float64 { panic("not implemented") }
