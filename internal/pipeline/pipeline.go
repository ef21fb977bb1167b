// Package pipeline is the only place where a message's bytes become
// evidence. Sign (SignReport for reports: an ARF wrapper is unwrapped)
// returns one immutable Message: the I-Match signatures, the ANDD sketch
// and its band keys, the short-message keys (shortsig: digests of images
// and attachments, links, short text, leading text), the mailing-list
// footer located (footer.go) with the signatures that are the footer's
// alone left out, the sketch of the body without the footer on demand, a
// typed skip reason when nothing usable is left, and the parse warnings. The campaign engine matches, decides and
// ingests Messages; it never parses.
//
// Underneath, every signature of one message is computed in one pass:
// the message is parsed once (mime.Parse), its words are analyzed once
// (mime.Analyze: distinct terms, sorted, with per-term statistics), and
// that one analysis feeds both signature families — the bagged I-Match
// signatures (imatchbag) and the ANDD sketch with its band keys (andd).
// Neither family tokenizes the text again or builds a token list.
//
// The results are, bit for bit, those of the separate calls
//
//	doc := mime.Parse(raw, opts.Mime)
//	toks := mime.Tokenize(doc, opts.Tokens)
//	res := imatch.Sign(mime.UniqueTerms(toks))
//	sk := andd.SketchDocument(doc, toks)
//	keys := andd.BandKeys(sk)
//
// (tested beside the code; the I-Match part through Signer.SignSorted,
// Analyze's terms being sorted), at a lower cost: see docs/RESULTS.md for the figures and the
// commands that measure them.
package pipeline

import (
	"errors"
	"sync"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/qgram"
	"github.com/nddmilter/nddmilter/internal/shortsig"
)

// MimeOptions and TokenOptions are mime's, under the pipeline's name:
// the campaign engine configures parsing through the pipeline without
// importing mime.
type (
	MimeOptions  = mime.Options
	TokenOptions = mime.TokenOptions
)

// Options configure a Pipeline. The zero value selects the defaults of each
// package.
type Options struct {
	// Mime bounds the parsing of a message (mime.Options defaults).
	Mime mime.Options
	// Tokens selects the words that become terms (mime.TokenOptions
	// defaults: the preprocessing of Kolcz & Chowdhury).
	Tokens mime.TokenOptions
	// ANDDMinTerms is the minimum number of distinct terms a document needs
	// for an ANDD sketch. Default 0: any document with a weighted term.
	ANDDMinTerms int
	// Short configures the short-message keys (shortsig.Options defaults).
	Short shortsig.Options
	// DisableShort turns the short-message keys off.
	DisableShort bool
	// QGram configures the q-gram sketches (qgram.SketchOptions
	// defaults).
	QGram qgram.SketchOptions
	// DisableQGram turns the q-gram sketches and keys off.
	DisableQGram bool
}

// Pipeline computes the signatures of messages. It is safe for concurrent
// use (the signers are).
type Pipeline struct {
	imatch *imatchbag.Signer
	andd   *andd.Signer
	short  *shortsig.Signer // nil when Options.DisableShort
	qgram  *qgram.Sketcher  // nil when Options.DisableQGram
	opts   Options
	// shareDF is set when the ANDD signer's document frequencies are the
	// I-Match lexicon's: the I-Match look-up of a message's terms then
	// gives them to ANDD (imatchbag.Signer.SignSortedDF), and dfs
	// recycles their buffers.
	shareDF bool
	dfs     sync.Pool // *[]int32
}

// ErrNoSigner is returned by New without any signer.
var ErrNoSigner = errors.New("pipeline: no I-Match signer and no ANDD signer")

// New returns a Pipeline for the given signers; either may be nil to skip
// its family, not both.
func New(imatch *imatchbag.Signer, anddSigner *andd.Signer, opts Options) (*Pipeline, error) {
	if imatch == nil && anddSigner == nil {
		return nil, ErrNoSigner
	}
	p := &Pipeline{imatch: imatch, andd: anddSigner, opts: opts}
	if imatch != nil && anddSigner != nil {
		lex, ok := anddSigner.DocFreq().(*imatchbag.Lexicon)
		p.shareDF = ok && lex == imatch.Lexicon()
	}
	if !opts.DisableShort {
		p.short = shortsig.New(opts.Short)
	}
	if !opts.DisableQGram {
		p.qgram = qgram.NewSketcher(opts.QGram)
	}
	return p, nil
}

// Result holds everything computed for one message.
type Result struct {
	// Doc is the parsed message.
	Doc *mime.Document
	// Terms is the word analysis of Doc; Terms.Sorted are the unique terms
	// (mime.UniqueTerms of the tokens).
	Terms *mime.Terms
	// IMatch is the I-Match result (zero without an I-Match signer).
	IMatch imatchbag.Result
	// Sketch is the ANDD sketch; it is empty without an ANDD signer, when
	// the document has fewer than Options.ANDDMinTerms distinct terms, or
	// when no term has a positive weight.
	Sketch andd.Sketch
	// BandKeys are the store keys of Sketch (nil when it is empty).
	BandKeys [][]byte
}

// Analyze parses raw and computes its signatures. It never fails and never
// panics on malformed input (see mime.Parse).
func (p *Pipeline) Analyze(raw []byte) *Result {
	return p.AnalyzeDocument(mime.Parse(raw, p.opts.Mime))
}

// AnalyzeDocument computes the signatures of a parsed document. A nil doc
// is an empty document.
func (p *Pipeline) AnalyzeDocument(doc *mime.Document) *Result {
	if doc == nil {
		doc = &mime.Document{}
	}
	r := &Result{Doc: doc, Terms: mime.Analyze(doc, p.opts.Tokens)}
	if p.imatch != nil {
		r.IMatch = p.imatch.SignSorted(r.Terms.Sorted) // sorted by Analyze
	}
	if p.andd != nil && len(r.Terms.Sorted) >= p.opts.ANDDMinTerms {
		r.Sketch = p.andd.SketchTerms(doc, r.Terms)
		if !r.Sketch.IsEmpty() {
			r.BandKeys = p.andd.BandKeys(r.Sketch)
		}
	}
	return r
}

// QGramThreshold returns the estimated docq a q-gram match needs (0 when
// q-gram sketches are off).
func (p *Pipeline) QGramThreshold() float64 {
	if p.qgram == nil {
		return 0
	}
	return p.qgram.Threshold()
}

// AttachedOptions and Attached are mime's, under the pipeline's name.
type (
	AttachedOptions = mime.AttachedOptions
	Attached        = mime.Attached
)

// AttachedMessages returns the messages a report sent by mail carries
// (mime.AttachedMessages): its message/rfc822 parts, or the original of
// an ARF feedback report. Each is then a report of its own (SignReport).
func AttachedMessages(raw []byte, o AttachedOptions) Attached {
	return mime.AttachedMessages(raw, o)
}
