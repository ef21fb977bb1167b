// Package imatchbag computes bagged I-Match signatures (Kolcz & Chowdhury,
// "Lexicon randomization for near-duplicate detection with I-Match"): a
// primary idf-window lexicon L, a secondary lexicon B for long messages, and
// K bootstrap-sampled copies of both derived deterministically from a seed.
//
// A document's extended signature is the (K+1)-tuple of the signatures of
// its unique terms with the original lexicon (bag 0) and the K bagged ones
// (bags 1..K); two documents are near duplicates when any coordinate is
// equal. See docs/design/imatch.md for the lexicon file, the choice of defaults and
// the signature wire format.
package imatchbag

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// SignatureVersion is the version of the signature wire format. Any change
// to how signatures are computed from a document's terms bumps it.
const SignatureVersion = 1

// FamilyIMatch is the family byte of I-Match signature keys.
const FamilyIMatch = 'I'

// KeyLen is the length of Signature.Key: version, family, lexicon ID (4),
// bag (1), hash (16).
const KeyLen = 1 + 1 + 4 + 1 + 16

// Options configure signature computation. Zero values select defaults.
type Options struct {
	// K is the number of bagged lexicons besides the original. Default 10;
	// use a negative value for none; at most MaxK.
	K int
	// MinTerms is the minimum |S| for a signature; when L ∩ U is smaller,
	// S is extended with the top-ranked terms of B ∩ U. Default
	// DefaultMinTerms (7); negative means 1.
	MinTerms int
	// MinRatio is the minimum |S|/|U|; below it S is extended with the
	// top-ranked terms of B ∩ U (paper sect. 3), and when B cannot make up
	// the difference there is no signature. Default DefaultMinRatio (0.05);
	// negative disables the rule.
	MinRatio float64
	// MinUnique is the minimum number of unique terms of a document. Default 5.
	MinUnique int
}

// Signature defaults.
const (
	DefaultK         = 10
	DefaultMinTerms  = 7
	DefaultMinRatio  = 0.05
	DefaultMinUnique = 5
)

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.K == 0:
		o.K = DefaultK
	case o.K < 0:
		o.K = 0
	case o.K > MaxK:
		return o, fmt.Errorf("imatchbag: K = %d, at most %d bagged lexicons are supported", o.K, MaxK)
	}
	switch {
	case o.MinTerms == 0:
		o.MinTerms = DefaultMinTerms
	case o.MinTerms < 0:
		o.MinTerms = 1
	}
	switch {
	case o.MinRatio == 0:
		o.MinRatio = DefaultMinRatio
	case o.MinRatio < 0:
		o.MinRatio = 0
	case o.MinRatio > 1:
		return o, fmt.Errorf("imatchbag: MinRatio = %g, want at most 1", o.MinRatio)
	}
	if o.MinUnique <= 0 {
		o.MinUnique = DefaultMinUnique
	}
	return o, nil
}

// Signature is one I-Match signature: a 128-bit hash of the sorted terms of
// S, tagged with the lexicon and the bag (0 = original lexicon, 1..K = bags).
type Signature struct {
	Lexicon uint32
	Bag     uint8
	Hash    [16]byte
}

// Key returns the signature's wire form, used as the store's index key:
//
//	byte 0      SignatureVersion
//	byte 1      'I' (FamilyIMatch)
//	bytes 2-5   lexicon ID, big-endian
//	byte 6      bag (0 = original lexicon)
//	bytes 7-22  hash
func (s Signature) Key() []byte {
	k := make([]byte, KeyLen)
	s.putKey(k)
	return k
}

func (s Signature) putKey(k []byte) {
	k[0] = SignatureVersion
	k[1] = FamilyIMatch
	binary.BigEndian.PutUint32(k[2:6], s.Lexicon)
	k[6] = s.Bag
	copy(k[7:], s.Hash[:])
}

// AppendKey appends the signature's wire form to b.
func (s Signature) AppendKey(b []byte) []byte {
	b = append(b, make([]byte, KeyLen)...)
	s.putKey(b[len(b)-KeyLen:])
	return b
}

// ParseKey decodes the output of Key.
func ParseKey(k []byte) (Signature, error) {
	if len(k) != KeyLen {
		return Signature{}, fmt.Errorf("imatchbag: key of %d bytes, want %d", len(k), KeyLen)
	}
	if k[0] != SignatureVersion || k[1] != FamilyIMatch {
		return Signature{}, fmt.Errorf("imatchbag: key version %d family %q, want %d %q", k[0], k[1], SignatureVersion, FamilyIMatch)
	}
	var s Signature
	s.Lexicon = binary.BigEndian.Uint32(k[2:6])
	s.Bag = k[6]
	copy(s.Hash[:], k[7:])
	return s, nil
}

// String renders the signature as "lexicon/bag/hash" in hex, for logs.
func (s Signature) String() string {
	return fmt.Sprintf("%08x/%d/%s", s.Lexicon, s.Bag, hex.EncodeToString(s.Hash[:]))
}

// Result is the outcome of signing one document.
type Result struct {
	// Signatures holds one signature per lexicon that produced one, in
	// increasing bag order.
	Signatures []Signature
	// Unique is |U|, the number of unique terms of the document.
	Unique int
	// Terms is |S| for the original lexicon (including the terms taken from
	// the secondary lexicon), 0 when the document is too short.
	Terms int
	// Secondary is how many of those Terms came from the secondary lexicon.
	Secondary int
	// Reason says why there is no signature of the original lexicon ("" if there is).
	Reason string
}

// ErrNilLexicon is returned by NewSigner without a lexicon.
var ErrNilLexicon = errors.New("imatchbag: nil lexicon")

// ReadLexiconFile is a convenience for reading a lexicon from an io.Reader
// that must be closed; it is ReadLexicon followed by Close.
func ReadLexiconFile(rc io.ReadCloser) (*Lexicon, error) {
	l, err := ReadLexicon(rc)
	if cerr := rc.Close(); err == nil && cerr != nil {
		return nil, fmt.Errorf("read lexicon: %w", cerr)
	}
	return l, err
}
