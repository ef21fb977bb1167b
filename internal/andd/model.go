package andd

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// ModelFormat is the value of the "format" field of every model file.
const ModelFormat = "nddmilter-andd-model"

// ModelVersion is the version of the model file format.
const ModelVersion = 1

// Similarity function names.
const (
	SimCosine  = "cosine"
	SimJaccard = "jaccard"
)

// LSH holds the locality-sensitive hashing parameters of a model. They are
// part of the sketch wire format: sketches made with different LSH
// parameters are not comparable.
type LSH struct {
	// Bits is the number of random-hyperplane bits m of the cosine sketch,
	// a multiple of 64. Default 384.
	Bits int `json:"bits"`
	// MinHashes is the number of weighted min-hash values of the Jaccard
	// sketch; 0 disables the Jaccard family. Default 80 (set explicitly in
	// the model file; a model without the field has no min-hashes).
	MinHashes int `json:"minhashes"`
	// Quant is the number of min-hash elements given to a term of unit
	// normalized weight (the paper's "multiply by a big integer and bucket").
	// Default 32.
	Quant int `json:"quant,omitempty"`
	// Bands is the number b of band keys per sketch. Default 32.
	Bands int `json:"bands"`
	// BandBits is the number r of sketch bits per band. Default 12.
	BandBits int `json:"band_bits"`
	// Seed seeds the hyperplanes, min-hash functions and band layout.
	Seed uint64 `json:"seed"`
}

// Training records how a model was trained (informational only).
type Training struct {
	Source       string  `json:"source,omitempty"`
	Seed         int64   `json:"seed"`
	Pairs        int     `json:"pairs"`
	L2           float64 `json:"l2"`
	Scale        float64 `json:"scale"`
	Iterations   int     `json:"iterations"`
	Loss         float64 `json:"loss"`
	HeldOutMaxF1 float64 `json:"heldout_max_f1"`
	Docs         int     `json:"docs"`
	Clusters     int     `json:"clusters"`
}

// Model is a trained weighting model plus its LSH parameters. It is
// serialized as a small versioned JSON document (see WriteTo).
type Model struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Features lists the feature names in the order of Lambda
	// (see FeatureNames for the known ones).
	Features []string `json:"features"`
	// Lambda holds the learned weight λj of each feature.
	Lambda []float64 `json:"lambda"`
	// Similarity is the function the weights were trained for: "cosine"
	// (default) or "jaccard".
	Similarity string `json:"similarity"`
	// NGram is the k of the k-gram terms. Default 1 (unigrams).
	NGram int `json:"ngram,omitempty"`
	LSH   LSH `json:"lsh"`
	// Threshold is the estimated cosine of two sketches above which they
	// are considered near-duplicates.
	Threshold float64 `json:"threshold"`
	// Training documents how the model was made.
	Training *Training `json:"training,omitempty"`
}

//go:embed data/default-model.json
var defaultModelJSON []byte

// DefaultModel returns the embedded default model.
func DefaultModel() (*Model, error) {
	m, err := ReadModel(bytes.NewReader(defaultModelJSON))
	if err != nil {
		return nil, fmt.Errorf("embedded default model: %w", err)
	}
	return m, nil
}

//go:embed data/jaccard-model.json
var jaccardModelJSON []byte

// DefaultJaccardModel returns the embedded model trained for the extended
// Jaccard coefficient, with 80 weighted min-hashes. The daemon uses the
// cosine DefaultModel; this one serves comparisons (nddlab train compare).
func DefaultJaccardModel() (*Model, error) {
	m, err := ReadModel(bytes.NewReader(jaccardModelJSON))
	if err != nil {
		return nil, fmt.Errorf("embedded jaccard model: %w", err)
	}
	return m, nil
}

// maxModelBytes bounds the size of a model file.
const maxModelBytes = 1 << 20

// ReadModel reads a model file.
func ReadModel(r io.Reader) (*Model, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxModelBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read model: %w", err)
	}
	if len(data) > maxModelBytes {
		return nil, errors.New("read model: file larger than 1 MiB")
	}
	var m Model
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decode model: %w", err)
	}
	m.applyDefaults()
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// WriteTo writes the model as indented JSON.
func (m *Model) WriteTo(w io.Writer) (int64, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return 0, fmt.Errorf("encode model: %w", err)
	}
	data = append(data, '\n')
	n, err := w.Write(data)
	if err != nil {
		return int64(n), fmt.Errorf("write model: %w", err)
	}
	return int64(n), nil
}

// Clone returns a deep copy of m.
func (m *Model) Clone() *Model {
	c := *m
	c.Features = append([]string(nil), m.Features...)
	c.Lambda = append([]float64(nil), m.Lambda...)
	if m.Training != nil {
		t := *m.Training
		c.Training = &t
	}
	return &c
}

func (m *Model) applyDefaults() {
	if m.Similarity == "" {
		m.Similarity = SimCosine
	}
	if m.NGram == 0 {
		m.NGram = 1
	}
	if m.LSH.Bits == 0 {
		m.LSH.Bits = 384
	}
	if m.LSH.Quant == 0 {
		m.LSH.Quant = 32
	}
	if m.LSH.Bands == 0 {
		m.LSH.Bands = 32
	}
	if m.LSH.BandBits == 0 {
		m.LSH.BandBits = 12
	}
}

// Validate checks that the model is usable.
func (m *Model) Validate() error {
	if m.Format != ModelFormat {
		return fmt.Errorf("model: format %q, want %q", m.Format, ModelFormat)
	}
	if m.Version != ModelVersion {
		return fmt.Errorf("model: version %d not supported (want %d)", m.Version, ModelVersion)
	}
	if len(m.Features) == 0 || len(m.Features) != len(m.Lambda) {
		return fmt.Errorf("model: %d features but %d weights", len(m.Features), len(m.Lambda))
	}
	seen := map[string]bool{}
	for i, f := range m.Features {
		if featureIndex(f) < 0 {
			return fmt.Errorf("model: unknown feature %q", f)
		}
		if seen[f] {
			return fmt.Errorf("model: duplicate feature %q", f)
		}
		seen[f] = true
		if math.IsNaN(m.Lambda[i]) || math.IsInf(m.Lambda[i], 0) {
			return fmt.Errorf("model: weight of %q is not finite", f)
		}
	}
	if m.Similarity != SimCosine && m.Similarity != SimJaccard {
		return fmt.Errorf("model: similarity %q (want cosine or jaccard)", m.Similarity)
	}
	if m.NGram < 1 || m.NGram > 5 {
		return fmt.Errorf("model: ngram %d out of range 1..5", m.NGram)
	}
	l := m.LSH
	if l.Bits < 64 || l.Bits > 8192 || l.Bits%64 != 0 {
		return fmt.Errorf("model: lsh bits %d (want a multiple of 64 in 64..8192)", l.Bits)
	}
	if l.MinHashes < 0 || l.MinHashes > 4096 {
		return fmt.Errorf("model: lsh minhashes %d out of range 0..4096", l.MinHashes)
	}
	if l.Quant < 1 || l.Quant > 1024 {
		return fmt.Errorf("model: lsh quant %d out of range 1..1024", l.Quant)
	}
	if l.Bands < 1 || l.Bands > 255 {
		return fmt.Errorf("model: lsh bands %d out of range 1..255", l.Bands)
	}
	if l.BandBits < 1 || l.BandBits > 64 || l.BandBits > l.Bits {
		return fmt.Errorf("model: lsh band_bits %d out of range 1..min(64, bits)", l.BandBits)
	}
	if !(m.Threshold > -1 && m.Threshold < 1) {
		return fmt.Errorf("model: threshold %v out of range (-1, 1)", m.Threshold)
	}
	return nil
}
