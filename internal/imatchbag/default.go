package imatchbag

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"
)

// defaultLexiconData is the lexicon built from the Brown corpus by
// scripts/build-default-lexicon.sh (see docs/design/imatch.md).
//
//go:embed data/brown.lex
var defaultLexiconData []byte

// defaultLexicon parses the embedded lexicon once; the result is immutable.
var defaultLexicon = sync.OnceValues(func() (*Lexicon, error) {
	l, err := ReadLexicon(bytes.NewReader(defaultLexiconData))
	if err != nil {
		return nil, fmt.Errorf("embedded default lexicon: %w", err)
	}
	return l, nil
})

// DefaultLexicon returns the embedded lexicon built from the Brown corpus.
// It is parsed once and shared: a Lexicon is immutable.
func DefaultLexicon() (*Lexicon, error) { return defaultLexicon() }

// DefaultLexiconData returns the bytes of the embedded lexicon file.
func DefaultLexiconData() []byte { return bytes.Clone(defaultLexiconData) }
