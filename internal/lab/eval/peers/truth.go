package peers

import (
	"math"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// DefaultNearDupCosine is the cosine similarity at or above which a message
// counts as a near-duplicate of a reported one (the ground truth of the
// near-duplicate recall).
const DefaultNearDupCosine = 0.9

// Terms returns the sorted unique terms of a raw message with nddmilter's
// default parsing and the paper's preprocessing (mime.TokenOptions zero
// value: words of at least 4 letters, at most one digit).
func Terms(raw []byte) []string {
	doc := mime.Parse(raw, mime.Options{})
	return mime.UniqueTerms(mime.Tokenize(doc, mime.TokenOptions{}))
}

// Cosine is the cosine similarity of two sets given as sorted unique
// string slices (binary term vectors): |a∩b| / sqrt(|a|·|b|). Empty sets
// have similarity 0.
func Cosine(a, b []string) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	i, j, n := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			n++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return float64(n) / math.Sqrt(float64(len(a))*float64(len(b)))
}

// NearDupIndex finds, for any document, the most similar of a fixed set of
// reference documents (the reported spam) by cosine similarity of their
// unique-term sets. It is an inverted index, so a query costs the total
// length of the posting lists of its terms.
type NearDupIndex struct {
	sizes    []int
	postings map[string][]int32
}

// NewNearDupIndex indexes the term sets refs (each sorted and unique).
func NewNearDupIndex(refs [][]string) *NearDupIndex {
	ix := &NearDupIndex{sizes: make([]int, len(refs)), postings: make(map[string][]int32)}
	for r, terms := range refs {
		ix.sizes[r] = len(terms)
		for _, t := range terms {
			ix.postings[t] = append(ix.postings[t], int32(r))
		}
	}
	return ix
}

// Best returns the index of the most similar reference and the cosine
// similarity; (-1, 0) when no reference shares a term with terms. terms
// must be sorted and unique.
func (ix *NearDupIndex) Best(terms []string) (int, float64) {
	if len(terms) == 0 || len(ix.sizes) == 0 {
		return -1, 0
	}
	counts := make(map[int32]int)
	for _, t := range terms {
		for _, r := range ix.postings[t] {
			counts[r]++
		}
	}
	best, bestCos := -1, 0.0
	for r, c := range counts {
		cos := float64(c) / math.Sqrt(float64(len(terms))*float64(ix.sizes[r]))
		if cos > bestCos || (cos == bestCos && int(r) < best) {
			best, bestCos = int(r), cos
		}
	}
	return best, bestCos
}
