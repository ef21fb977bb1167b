// Package qgram is the near-duplicate detection of Montanari & Puglisi,
// "Near Duplicate Document Detection for Large Information Flows"
// (shared/papers/qgram-news-dedup.txt), and a q-gram evidence family for
// the campaign engine built on it.
//
// The paper's method, faithfully:
//
//   - a text's normal form is the text without white space and
//     punctuation ("A rose is a flower" → "Aroseisaflower", sect. 3.3);
//   - its signature is the set of the |Tw| − q + 1 overlapping q-grams of
//     the normal form (Profile), q = 4 by default, the paper's best value
//     (sect. 4); no partial q-gram shorter than q is made;
//   - two documents are compared with the occurrence-based measure of
//     definition 3.32, docq(A, B) = |A ∩ B| / max(|A|, |B|) over their
//     distinct q-grams (Similarity), and are duplicates when it reaches a
//     threshold td (Options.Threshold);
//   - an inverted index maps each q-gram to the documents holding it, one
//     index per hour, and a document is compared with those of the last
//     24 hours only (Index, Options.Window): the counters of fig. 2 are
//     filled from the posting lists, so only documents sharing a q-gram
//     are ever compared.
//
// A q-gram is identified by a 64-bit hash of its characters: two distinct
// q-grams share one with probability 2^-64, which no text of a mail
// server approaches.
//
// For the campaign engine, Sketch summarizes a profile in a fixed number
// of values (one-permutation min-hashing) from which docq is estimated
// without the texts, and BandKeys are its locality-sensitive index keys:
// a copy whose words are misspelled keeps most of its q-grams, where it
// loses its words (see sketch.go). Sketches and keys are a wire format,
// pinned by golden vectors (testdata/golden.json).
package qgram

import (
	"slices"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultQ is the q-gram length the paper found best (sect. 4).
const DefaultQ = 4

// DefaultThreshold is the duplicate threshold td of the paper's headline
// result (the abstract: F-measure at a similarity threshold of 0.8).
const DefaultThreshold = 0.8

// Normalize returns the paper's normal form of s: s without white space
// and punctuation marks (Unicode classes Z, P and the white-space
// controls). Case is kept, as in the paper's example; Options.FoldCase
// lower-cases in Profile.
func Normalize(s string) string {
	return string(appendNormal(nil, s, false))
}

// appendNormal appends the runes of s's normal form to dst.
func appendNormal(dst []rune, s string, fold bool) []rune {
	for _, r := range s {
		if drop(r) {
			continue
		}
		if fold {
			r = unicode.ToLower(r)
		}
		dst = append(dst, r)
	}
	return dst
}

// drop reports whether r leaves the normal form.
func drop(r rune) bool {
	if r < utf8.RuneSelf {
		c := byte(r)
		return c <= ' ' || c == 0x7f || asciiPunct[c]
	}
	return unicode.IsSpace(r) || unicode.IsPunct(r) || unicode.In(r, unicode.Z)
}

// asciiPunct marks the ASCII characters of Unicode class P.
var asciiPunct = func() (t [utf8.RuneSelf]bool) {
	for c := 0; c < utf8.RuneSelf; c++ {
		t[c] = unicode.IsPunct(rune(c))
	}
	return t
}()

// Gram is a positional q-gram: its 1-based position and its characters.
type Gram struct {
	Pos  int
	Text string
}

// Grams returns the positional q-grams of s as the paper defines them
// (sect. 3.2): the |s| − q + 1 windows of q characters, none when s is
// shorter than q. s is taken as it is (see Normalize).
func Grams(s string, q int) []Gram {
	rs := []rune(s)
	if q <= 0 || len(rs) < q {
		return nil
	}
	out := make([]Gram, 0, len(rs)-q+1)
	for i := 0; i+q <= len(rs); i++ {
		out = append(out, Gram{Pos: i + 1, Text: string(rs[i : i+q])})
	}
	return out
}

// Options configure the paper's method. The zero value selects the
// documented defaults.
type Options struct {
	// Q is the q-gram length. Default DefaultQ (4).
	Q int
	// Threshold is the duplicate threshold td of definition 3.33: two
	// documents are duplicates when docq reaches it. Default
	// DefaultThreshold (0.8).
	Threshold float64
	// FoldCase lower-cases the normal form (the paper keeps case).
	FoldCase bool
	// MaxRunes bounds the characters of the normal form read from a text:
	// the first MaxRunes are kept (and no more than 8 × MaxRunes
	// characters looked at), so that the work and memory of a hostile
	// text stay bounded. Default 1 << 16.
	MaxRunes int
	// Window is how far back in time a document is compared (sect. 3.6).
	// Default 24 hours.
	Window time.Duration
	// Slot is the span of one index of the window. Default one hour.
	Slot time.Duration
}

func (o Options) withDefaults() Options {
	if o.Q <= 0 {
		o.Q = DefaultQ
	}
	if o.Threshold <= 0 {
		o.Threshold = DefaultThreshold
	}
	if o.MaxRunes <= 0 {
		o.MaxRunes = 1 << 16
	}
	if o.Slot <= 0 {
		o.Slot = time.Hour
	}
	if o.Window <= 0 {
		o.Window = 24 * time.Hour
	}
	return o
}

// Profile is the paper's signature Tw,q of a text: its distinct q-grams,
// each a 64-bit hash, sorted.
type Profile []uint64

// NewProfile returns the profile of text with the options' q, case
// folding and bound.
func NewProfile(text string, opts Options) Profile {
	o := opts.withDefaults()
	hs := appendGramHashes(nil, text, o)
	slices.Sort(hs)
	return Profile(slices.Compact(hs))
}

// appendGramHashes appends the hash of every q-gram of text's normal form
// (repeats included) to dst.
func appendGramHashes(dst []uint64, text string, o Options) []uint64 {
	var win [maxQ]rune
	q := min(o.Q, maxQ)
	n, seen := 0, 0
	for _, r := range text {
		if n == o.MaxRunes || seen == 8*o.MaxRunes {
			break // as Sketcher.Sketch: a bounded read
		}
		seen++
		if drop(r) {
			continue
		}
		if o.FoldCase {
			r = unicode.ToLower(r)
		}
		copy(win[:q-1], win[1:q])
		win[q-1] = r
		n++
		if n >= q {
			dst = append(dst, hashGram(win[:q]))
		}
	}
	return dst
}

// maxQ is the longest q-gram supported.
const maxQ = 16

// hashGram is FNV-1a (64 bits) over the little-endian 32-bit code points
// of g: the same on every architecture.
func hashGram(g []rune) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, r := range g {
		u := uint32(r)
		for range 4 {
			h ^= uint64(u & 0xff)
			h *= prime
			u >>= 8
		}
	}
	return h
}

// Similarity is the paper's document similarity docq(A, B) (definition
// 3.32): the number of q-grams a and b share over the larger of their
// sizes; 0 when either is empty.
func Similarity(a, b Profile) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	return float64(intersect(a, b)) / float64(max(len(a), len(b)))
}

// intersect counts the values two sorted sets share.
func intersect(a, b []uint64) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			n++
			i++
			j++
		}
	}
	return n
}

// unicodeToLower is unicode.ToLower, for toLower's non-ASCII path.
func unicodeToLower(r rune) rune { return unicode.ToLower(r) }
