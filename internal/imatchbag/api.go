// Package imatchbag computes bagged I-Match signatures (Kolcz & Chowdhury,
// "Lexicon randomization for near-duplicate detection with I-Match"): a
// primary idf-window lexicon L, a secondary lexicon B for long messages, and
// K bootstrap-sampled copies of both derived deterministically from a seed.
package imatchbag

import "io"

// SignatureVersion is the version of the signature wire format. Any change
// to how signatures are computed from a document's terms bumps it.
const SignatureVersion = 1

// Lexicon holds the document-frequency table of a corpus and the primary
// and secondary lexicons derived from it.
type Lexicon struct {
	// filled in by the implementation
}

// ID identifies the lexicon (a hash of its content); it is part of every
// signature so that signatures of different lexicons never collide.
func (l *Lexicon) ID() uint32 { panic("not implemented") }

// N is the number of documents of the corpus the lexicon was built from.
func (l *Lexicon) N() int { panic("not implemented") }

// DF is the document frequency of term in that corpus (0 if unseen).
func (l *Lexicon) DF(term string) int { panic("not implemented") }

// ReadLexicon reads a lexicon file.
func ReadLexicon(r io.Reader) (*Lexicon, error) { panic("not implemented") }

// DefaultLexicon returns the embedded lexicon built from the Brown corpus.
func DefaultLexicon() (*Lexicon, error) { panic("not implemented") }

// Options configure signature computation. Zero values select defaults.
type Options struct {
	// K is the number of bagged lexicons besides the original. Default 10;
	// use a negative value for none.
	K int
	// MinTerms is the minimum |S| for a signature. Default 5? (documented by the implementation)
	MinTerms int
	// MinRatio is the minimum |S|/|U|; below it B is used to extend S.
	MinRatio float64
	// MinUnique is the minimum number of unique terms of a document. Default 5.
	MinUnique int
}

// Signature is one I-Match signature: a 128-bit hash of the sorted terms of
// S, tagged with the lexicon and the bag (0 = original lexicon, 1..K = bags).
type Signature struct {
	Lexicon uint32
	Bag     uint8
	Hash    [16]byte
}

// Key returns the signature's wire form, used as the store's index key.
func (s Signature) Key() []byte { panic("not implemented") }

// Result is the outcome of signing one document.
type Result struct {
	// Signatures holds one signature per lexicon that produced one.
	Signatures []Signature
	// Unique is |U|, the number of unique terms of the document.
	Unique int
	// Reason says why there is no signature of the original lexicon ("" if there is).
	Reason string
}

// Signer computes signatures with one lexicon. It is safe for concurrent use.
type Signer struct{}

// NewSigner prepares the K bagged lexicons of lex.
func NewSigner(lex *Lexicon, opts Options) (*Signer, error) { panic("not implemented") }

// Sign signs a document given its sorted unique terms (mime.UniqueTerms).
func (s *Signer) Sign(terms []string) Result { panic("not implemented") }
