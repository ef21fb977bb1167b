// Package spotsigs implements SpotSigs (Theobald, Siddharth & Paepcke,
// "SpotSigs: robust and efficient near duplicate detection in large web
// collections", SIGIR 2008): spot signatures anchored on antecedent words
// (stopwords), each a chain of the non-stopwords that follow the antecedent
// at a fixed spot distance, compared as multi-sets with the weighted Jaccard
// similarity; and the paper's exact matcher, which partitions documents by
// signature-vector length and prunes inverted-index traversals with length
// bounds.
//
// Two deviations from the paper, both for exactness: the bounds that end an
// inverted-list traversal (Algorithm 1, lines 16, 18 and 26) are replaced by
// the tight bound on the weighted Jaccard similarity of a document that
// shares none of the signatures already traversed (the paper's δ1+δ2 test
// can drop true pairs; TestPaperBoundDropsPair shows one), and a query
// searches every partition whose lengths can reach the threshold instead of
// only the right neighbour (a query is not a self-join).
package spotsigs

import (
	"hash/fnv"
	"math"
	"slices"
)

// Default parameters: the paper's best configuration (sect. 5.3.2).
const (
	// DefaultDistance is the uniform spot distance d.
	DefaultDistance = 2
	// DefaultChainLength is the chain length c.
	DefaultChainLength = 3
	// DefaultThreshold is τ at the paper's best F1 on its Gold Set (Table 1).
	DefaultThreshold = 0.44
	// DefaultRange is the partitioning range ρ of the paper's runs.
	DefaultRange = 1000
)

// DefaultAntecedents are the paper's best antecedents (sect. 5.3.2, Fig. 6):
// the articles and the flexions of be, can, will, have and do.
var defaultAntecedents = []string{
	"a", "an", "the",
	"be", "am", "is", "are", "was", "were", "been", "being",
	"can", "could", "cannot",
	"will", "would", "wont",
	"have", "has", "had", "having",
	"do", "does", "did", "done", "doing",
}

// defaultStopwords are the words a chain skips (sect. 3.1): common English
// function words, the antecedents included.
var defaultStopwords = []string{
	"a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "as", "at",
	"be", "because", "been", "before", "being", "below", "between", "both", "but", "by",
	"can", "cannot", "could", "did", "do", "does", "doing", "done", "down", "during",
	"each", "either", "else", "ever", "every", "few", "for", "from", "further",
	"had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how",
	"i", "if", "in", "into", "is", "it", "its", "itself", "just",
	"may", "me", "might", "more", "most", "must", "my", "myself",
	"no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own",
	"same", "shall", "she", "should", "so", "some", "such",
	"than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
	"under", "until", "up", "upon", "us", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "wont", "would",
	"yet", "you", "your", "yours", "yourself", "yourselves",
}

// DefaultAntecedents returns a copy of the default antecedents.
func DefaultAntecedents() []string { return slices.Clone(defaultAntecedents) }

// DefaultStopwords returns a copy of the default stopwords.
func DefaultStopwords() []string { return slices.Clone(defaultStopwords) }

// Options are the parameters of spot-signature extraction. The zero value
// means the paper's best configuration.
type Options struct {
	// Antecedents are the anchor words; nil means DefaultAntecedents.
	Antecedents []string
	// Stopwords are the words a chain skips; nil means DefaultStopwords.
	// An antecedent that is not a stopword may itself be a chain word.
	Stopwords []string
	// Distance is the spot distance d (≥ 1); 0 means DefaultDistance.
	Distance int
	// ChainLength is the chain length c (≥ 1); 0 means DefaultChainLength.
	ChainLength int
}

// Extractor turns token streams into spot-signature vectors. It is safe
// for concurrent use.
type Extractor struct {
	antecedent map[string]bool
	stop       map[string]bool
	d, c       int
}

// NewExtractor returns an extractor with opts' parameters.
func NewExtractor(opts Options) *Extractor {
	ants, stops := opts.Antecedents, opts.Stopwords
	if ants == nil {
		ants = defaultAntecedents
	}
	if stops == nil {
		stops = defaultStopwords
	}
	e := &Extractor{
		antecedent: make(map[string]bool, len(ants)),
		stop:       make(map[string]bool, len(stops)),
		d:          max(opts.Distance, 0),
		c:          max(opts.ChainLength, 0),
	}
	if e.d == 0 {
		e.d = DefaultDistance
	}
	if e.c == 0 {
		e.c = DefaultChainLength
	}
	for _, a := range ants {
		e.antecedent[a] = true
	}
	for _, s := range stops {
		e.stop[s] = true
	}
	return e
}

// chains calls f for every spot signature of tokens: the antecedent and
// the positions of its chain words. Per sect. 3.1, the chain takes the word
// d positions after the antecedent (or after the previous chain word); when
// that word is a stopword it moves on to the next non-stopword; a chain cut
// off by the end of the document is kept when it has at least one word.
// The next non-stopword of every position is computed once, so a long run
// of stopwords costs linear time, not quadratic.
func (e *Extractor) chains(tokens []string, f func(ant string, chain []int)) {
	next := make([]int32, len(tokens)+1) // next[i]: first non-stopword at or after i
	next[len(tokens)] = int32(len(tokens))
	for i := len(tokens) - 1; i >= 0; i-- {
		if e.stop[tokens[i]] {
			next[i] = next[i+1]
		} else {
			next[i] = int32(i)
		}
	}
	chain := make([]int, 0, e.c)
	for i, t := range tokens {
		if !e.antecedent[t] {
			continue
		}
		chain = chain[:0]
		pos := i
		for len(chain) < e.c {
			pos += e.d
			if pos >= len(tokens) {
				break
			}
			pos = int(next[pos])
			if pos >= len(tokens) {
				break
			}
			chain = append(chain, pos)
		}
		if len(chain) > 0 {
			f(t, chain)
		}
	}
}

// Strings returns the spot signatures of tokens in document order, written
// as the paper does ("the:south:carolina"). Tokens are compared as given:
// callers lowercase them.
func (e *Extractor) Strings(tokens []string) []string {
	var out []string
	e.chains(tokens, func(ant string, chain []int) {
		s := ant
		for _, p := range chain {
			s += ":" + tokens[p]
		}
		out = append(out, s)
	})
	return out
}

// Extract returns the spot-signature multi-set of tokens as a vector.
func (e *Extractor) Extract(tokens []string) Vector {
	var hs []uint64
	h := fnv.New64a()
	sep := []byte{0x1f}
	e.chains(tokens, func(ant string, chain []int) {
		h.Reset()
		h.Write([]byte(ant))
		for _, p := range chain {
			h.Write(sep)
			h.Write([]byte(tokens[p]))
		}
		hs = append(hs, h.Sum64())
	})
	return FromHashes(hs)
}

// Spot is one distinct spot signature of a document and its frequency.
type Spot struct {
	Hash uint64
	Freq uint32
}

// Vector is a document's spot-signature multi-set, sorted by Hash, each
// Hash once. Its length |d| is the sum of the frequencies.
type Vector []Spot

// FromHashes builds a vector from signature hashes (repeats counted).
func FromHashes(hs []uint64) Vector {
	if len(hs) == 0 {
		return nil
	}
	hs = slices.Clone(hs)
	slices.Sort(hs)
	v := make(Vector, 0, len(hs))
	for _, h := range hs {
		if n := len(v); n > 0 && v[n-1].Hash == h {
			v[n-1].Freq++
			continue
		}
		v = append(v, Spot{Hash: h, Freq: 1})
	}
	return v
}

// Len is |d|, the sum of the frequencies.
func (v Vector) Len() int {
	n := 0
	for _, s := range v {
		n += int(s.Freq)
	}
	return n
}

// Jaccard is the weighted (multi-set) Jaccard similarity of a and b
// (eq. 4): Σ min(freq) / Σ max(freq). Two empty vectors have similarity 0.
func Jaccard(a, b Vector) float64 {
	var num, den int
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i].Hash < b[j].Hash:
			den += int(a[i].Freq)
			i++
		case a[i].Hash > b[j].Hash:
			den += int(b[j].Freq)
			j++
		default:
			num += int(min(a[i].Freq, b[j].Freq))
			den += int(max(a[i].Freq, b[j].Freq))
			i++
			j++
		}
	}
	for ; i < len(a); i++ {
		den += int(a[i].Freq)
	}
	for ; j < len(b); j++ {
		den += int(b[j].Freq)
	}
	if den == 0 {
		return 0
	}
	return float64(num) / float64(den)
}

// Paper's IDF range (sect. 5.3.1): signatures whose normalized IDF falls
// outside it are left out of every vector.
const (
	DefaultIDFLow  = 0.2
	DefaultIDFHigh = 0.85
)

// FilterIDF returns the vectors without the signatures whose normalized
// IDF over the collection vs, log(N/df)/log(N) (sect. 5.1), is outside
// [lo, hi]: signatures in nearly every document say little, those in one
// document alone match nothing. vs is not modified. With fewer than two
// documents the vectors are returned as they are.
func FilterIDF(vs []Vector, lo, hi float64) []Vector {
	if len(vs) < 2 {
		return vs
	}
	df := make(map[uint64]int)
	for _, v := range vs {
		for _, s := range v {
			df[s.Hash]++
		}
	}
	logN := math.Log(float64(len(vs)))
	out := make([]Vector, len(vs))
	for i, v := range vs {
		var f Vector
		for _, s := range v {
			if idf := math.Log(float64(len(vs))/float64(df[s.Hash])) / logN; idf >= lo && idf <= hi {
				f = append(f, s)
			}
		}
		out[i] = f
	}
	return out
}
