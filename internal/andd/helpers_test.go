package andd

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"unicode"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// mapDF is a DocFreq backed by a map.
type mapDF struct {
	df map[string]int
	n  int
}

func (m mapDF) DF(t string) int { return m.df[t] }
func (m mapDF) N() int          { return m.n }

// testDF knows the common English words used by the tests.
func testDF() mapDF {
	words := strings.Fields(`this that with from have your will about there their which would
	offer price money free click order today only best great now here more information
	please email message meeting report project team week time people business market
	account service product online special limited discount save dollars million cheap`)
	df := map[string]int{}
	for i, w := range words {
		df[w] = 50 + 37*i%900
	}
	return mapDF{df: df, n: 1000}
}

// tokens is a minimal tokenizer for tests: words of at least 4 letters,
// lower-cased, subject first.
func tokens(subject, text string) []mime.Token {
	var out []mime.Token
	add := func(s string, subj bool) {
		for w := range strings.FieldsFuncSeq(s, func(r rune) bool { return !unicode.IsLetter(r) }) {
			if len([]rune(w)) < 4 {
				continue
			}
			caps := unicode.IsUpper([]rune(w)[0])
			all := strings.ToUpper(w) == w && len(w) > 1
			out = append(out, mime.Token{Term: strings.ToLower(w), Pos: len(out), InSubject: subj, Capitalized: caps, AllCaps: all})
		}
	}
	add(subject, true)
	add(text, false)
	return out
}

func testDoc(subject, text string, urls ...string) (*mime.Document, []mime.Token) {
	d := &mime.Document{Subject: subject, Text: text, URLs: urls}
	for _, u := range urls {
		h := strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
		if i := strings.IndexAny(h, "/?#"); i >= 0 {
			h = h[:i]
		}
		d.Hosts = append(d.Hosts, strings.ToLower(h))
	}
	return d, tokens(subject, text)
}

// randWord returns a random lower-case word (a hash-buster).
func randWord(r *rand.Rand) string {
	n := 5 + r.IntN(6)
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}

// labeledDoc is a test document and its campaign (negative: unrelated).
type labeledDoc struct {
	Doc     *mime.Document
	Toks    []mime.Token
	Cluster int
}

// synthCampaigns builds nc campaigns of size copies each: a payload of
// campaign-specific words plus common words, randomized with hash-buster
// words and an appended innocent paragraph; plus nneg unrelated messages.
func synthCampaigns(seed uint64, nc, size, nneg int) []labeledDoc {
	r := rand.New(rand.NewPCG(seed, 7))
	common := strings.Fields("this that with from have your will about there their which would offer price money free click order today only best great")
	innocent := strings.Fields("meeting report project team week time people business market account service please information message")
	var docs []labeledDoc
	for c := range nc {
		payload := make([]string, 12)
		for i := range payload {
			payload[i] = randWord(r)
		}
		host := fmt.Sprintf("http://%s.example/%s", payload[0], payload[1])
		subj := strings.Join(payload[:2], " ")
		for range size {
			var b strings.Builder
			for i, w := range payload {
				if r.IntN(10) == 0 {
					continue // dropped word
				}
				fmt.Fprintf(&b, "%s %s ", w, common[(i+c)%len(common)])
				for range r.IntN(3) {
					b.WriteString(randWord(r) + " ")
				}
			}
			for range r.IntN(25) {
				b.WriteString(innocent[r.IntN(len(innocent))] + " ")
			}
			d, t := testDoc(subj+" "+randWord(r), b.String(), host)
			docs = append(docs, labeledDoc{Doc: d, Toks: t, Cluster: c})
		}
	}
	for range nneg {
		var b strings.Builder
		for range 20 + r.IntN(40) {
			if r.IntN(2) == 0 {
				b.WriteString(innocent[r.IntN(len(innocent))] + " ")
			} else {
				b.WriteString(common[r.IntN(len(common))] + " ")
			}
		}
		d, t := testDoc("Re: "+innocent[r.IntN(len(innocent))], b.String())
		docs = append(docs, labeledDoc{Doc: d, Toks: t, Cluster: -1})
	}
	return docs
}

// testModel is a fixed model for golden tests, independent of the shipped
// default model.
func testModel() *Model {
	return &Model{
		Format: ModelFormat, Version: ModelVersion,
		Features:   FeatureNames(),
		Lambda:     []float64{0.1, 0.5, 1.0, 0, -0.3, -0.2, 0, 0, 0, 0.3, 0.3, 0.5, 0},
		Similarity: SimCosine, NGram: 1,
		LSH:       LSH{Bits: 384, MinHashes: 80, Quant: 32, Bands: 32, BandBits: 12, Seed: 1},
		Threshold: 0.6,
	}
}
