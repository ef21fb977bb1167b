package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/qgram"
	"github.com/nddmilter/nddmilter/internal/shortsig"
)

// Message is one message made evidence: everything the campaign engine
// needs to match, decide and ingest it, computed by Sign or SignReport.
// It is not changed after it is returned and is safe for concurrent use
// (Body is computed once, on first use).
type Message struct {
	// ARF is set when the raw message was an ARF feedback report: the
	// fields describe the message it carried (SignReport only).
	ARF bool
	// Subject and From are the message's, for a campaign's samples.
	Subject, From string
	// MessageID is its Message-ID without angle brackets ("" if none); it
	// enters no signature (a report's once-per-message rule uses it).
	MessageID string
	// List names the mailing list the message came through and Bulk says
	// it carries a bulk-mail header (mime.Document.List, Bulk): the signs
	// of graymail a check weighs. They are the checked message's own and
	// not part of the evidence format (a replicated report has none).
	List string
	Bulk bool
	// ListID is the list's whole identifier (mime.Document.ListID), what
	// the graymail signs count accepted messages under.
	ListID string
	// ListPost is the list's posting address and Recipients the To and
	// Cc addresses (mime.Document.ListPost, Recipients): a reply sent
	// straight to a known list's members is graymail too. Not part of the
	// evidence format.
	ListPost   string
	Recipients []string
	// Reply says the message answers another and Precedence is its
	// Precedence field (mime.Document.Reply, Precedence): graymail signs.
	// Not part of the evidence format.
	Reply      bool
	Precedence string
	// AuthPasses are the passing DKIM and DMARC results of the message's
	// Authentication-Results fields (authpass.go), a graymail sign when
	// the server's own MTA added them; not part of the evidence format.
	AuthPasses []AuthPass
	// Excerpt is the start of the message's visible text (at most
	// MaxExcerpt bytes, cut between characters), for a campaign's sample.
	Excerpt string
	// Warnings are the parse warnings (mime.Document.Warnings).
	Warnings []string
	// Unique is the number of distinct terms of the message.
	Unique int
	// SignerReason is the I-Match signer's reason for giving no
	// signature ("" when it gave some).
	SignerReason string
	// IMatch are the usable I-Match signatures: those of the mailing-list
	// footer alone are left out (FooterIMatch counts them).
	IMatch []imatchbag.Signature
	// IMatchKeys are the store keys of IMatch, in the same order.
	IMatchKeys [][]byte
	// FooterIMatch is the number of I-Match signatures left out because
	// they hash the message's mailing-list footer alone.
	FooterIMatch int
	// Sketch is the ANDD sketch (empty: see HasSketch), SketchBytes its
	// encoding and BandKeys its store keys.
	Sketch      andd.Sketch
	SketchBytes []byte
	BandKeys    [][]byte
	// ShortKeys are the short-message keys (shortsig: all, media, links,
	// body, lead) a report is indexed under; ShortLookup the lead keys at
	// smaller levels a message is looked up under too, never indexed.
	// Both are computed on the text without the mailing-list footer.
	ShortKeys   [][]byte
	ShortLookup [][]byte
	// SignedNote is set when the body key among ShortKeys comes from a
	// rest that is mostly a signature (shortsig.Result.SignedNote): weak
	// evidence, since one person's notes share it. Not part of the
	// evidence; a ledger entry keeps it among its Signs.
	SignedNote bool
	// QSketch is the q-gram sketch of the subject and text without the
	// mailing-list footer (qgram; empty: see HasQSketch), QSketchBytes
	// its encoding and QKeys its band keys.
	QSketch      qgram.Sketch
	QSketchBytes []byte
	QKeys        [][]byte
	// FooterAt is the byte offset of the mailing-list footer in the
	// message's text, -1 when it has none (see messageFooter).
	FooterAt int
	// Skip is set when the message has no usable signature.
	Skip Skip

	keys  [][]byte // IMatchKeys, ShortKeys, ShortLookup, BandKeys, QKeys: one backing array
	exact int      // len(IMatchKeys)+len(ShortKeys)+len(ShortLookup)
	p     *Pipeline
	doc   *mime.Document // for Body
	// footless is doc without its footer (withoutFooterAt, with doc's
	// parts and list), set by sign when FooterAt ≥ 0: the short keys and
	// Body share it.
	footless *mime.Document
	bodyOnce sync.Once
	body     Body
	// sorted are the distinct terms, for TermHashes
	sorted    []string
	termsOnce sync.Once
	terms     []uint32
}

// TermHashes returns the hashes of the message's distinct terms, sorted
// (EncodeTerms renders them as a campaign keeps them). They are computed
// on first use: only the exact check of ANDD matches needs them.
func (m *Message) TermHashes() []uint32 {
	m.termsOnce.Do(func() { m.terms = termHashes(m.sorted) })
	return m.terms
}

// Body is the ANDD evidence of a message without its mailing-list footer.
type Body struct {
	// HasFooter is set when the message has a footer; the other fields
	// are then set.
	HasFooter bool
	// Sketch is the ANDD sketch of the text above the footer (empty when
	// no weighted word is left: see HasSketch), BandKeys its store keys.
	Sketch   andd.Sketch
	BandKeys [][]byte
}

// MaxExcerpt bounds Message.Excerpt, in bytes.
const MaxExcerpt = 1024

// excerpt is the start of text, at most MaxExcerpt bytes, cut between
// characters, without leading and trailing white space.
func excerpt(text string) string {
	if len(text) > MaxExcerpt {
		cut := MaxExcerpt
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	return strings.Clone(strings.TrimSpace(text))
}

// HasSketch reports whether the body has an ANDD sketch.
func (b *Body) HasSketch() bool { return !b.Sketch.IsEmpty() }

// Skip says why a message has no usable signature.
type Skip uint8

// Skip reasons.
const (
	// NoSkip: the message has a usable signature.
	NoSkip Skip = iota
	// TooShort: too few words for an I-Match signature and an ANDD
	// sketch, and no short-message key.
	TooShort
	// FooterIMatch: its only I-Match signatures hash its mailing-list
	// footer alone, and it has no ANDD sketch.
	FooterIMatch
	// FooterSketch: no I-Match signature, and every word its ANDD sketch
	// weighs is in its mailing-list footer: the sketch is the list's, not
	// the message's.
	FooterSketch
)

// String names the reason.
func (s Skip) String() string {
	switch s {
	case NoSkip:
		return "none"
	case TooShort:
		return "too short"
	case FooterIMatch:
		return "footer I-Match only"
	case FooterSketch:
		return "footer sketch only"
	}
	return fmt.Sprintf("skip(%d)", int(s))
}

// HasSketch reports whether the message has an ANDD sketch.
func (m *Message) HasSketch() bool { return len(m.SketchBytes) > 0 }

// HasQSketch reports whether the message has a q-gram sketch.
func (m *Message) HasQSketch() bool { return len(m.QSketchBytes) > 0 }

// Keys returns the I-Match keys, the short keys, the short lookup keys,
// the band keys and the q-gram band keys, for one store lookup. The slice
// is shared: do not modify it.
func (m *Message) Keys() [][]byte { return m.keys }

// ExactKeys returns how many of Keys, from the first, are keys a hit on
// which is evidence in itself (I-Match and short keys); the others are
// band keys of sketches, whose campaigns are compared with the message's
// sketches.
func (m *Message) ExactKeys() int { return m.exact }

// Body returns the ANDD evidence of the message without its mailing-list
// footer (HasFooter false when it has none or there is no ANDD signer). It
// is computed on first use: most messages never need it.
func (m *Message) Body() *Body {
	m.bodyOnce.Do(func() {
		if m.FooterAt < 0 || m.p == nil || m.p.andd == nil {
			return
		}
		doc := m.footless
		if doc == nil {
			doc = m.withoutFooter()
		}
		m.body.HasFooter = true
		sk := m.p.andd.SketchTerms(doc, mime.Analyze(doc, m.p.opts.Tokens))
		if sk.IsEmpty() {
			return
		}
		m.body.Sketch = sk
		m.body.BandKeys = m.p.andd.BandKeys(sk)
	})
	return &m.body
}

// withoutFooter returns m's document without its footer (FooterAt ≥ 0),
// with the document's parts and list.
func (m *Message) withoutFooter() *mime.Document {
	d := withoutFooterAt(m.doc, m.FooterAt)
	d.Parts, d.List = m.doc.Parts, m.doc.List
	return d
}

// Sign parses raw and makes it evidence: its signatures and sketch, its
// mailing-list footer located and the signatures that are the footer's
// alone left out. It checks ctx between its stages (parse, analyze,
// sign; mime.ParseContext also checks it within a long message) and
// returns ctx's error, wrapped, when it is done; malformed input is never
// an error (see mime.Parse).
func (p *Pipeline) Sign(ctx context.Context, raw []byte) (*Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	doc, err := mime.ParseContext(ctx, raw, p.opts.Mime)
	if err != nil {
		return nil, fmt.Errorf("sign: parse: %w", err)
	}
	return p.sign(ctx, doc, false)
}

// SignReport is Sign for a junk or not-junk report: an ARF feedback
// report is unwrapped first (Message.ARF), and the message it carries is
// signed.
func (p *Pipeline) SignReport(ctx context.Context, raw []byte) (*Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	orig, arf := mime.UnwrapARF(raw)
	doc, err := mime.ParseContext(ctx, orig, p.opts.Mime)
	if err != nil {
		return nil, fmt.Errorf("sign: parse: %w", err)
	}
	return p.sign(ctx, doc, arf)
}

// stageErr returns ctx's error after stage, wrapped, or nil.
func stageErr(ctx context.Context, stage string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sign: after %s: %w", stage, err)
	}
	return nil
}

func (p *Pipeline) sign(ctx context.Context, doc *mime.Document, arf bool) (*Message, error) {
	if err := stageErr(ctx, "parse"); err != nil {
		return nil, err
	}
	// The statistics are used only below: their memory is reused from
	// message to message.
	sp, _ := p.stats.Get().(*[]mime.TermStats)
	if sp == nil {
		sp = new([]mime.TermStats)
	}
	terms := mime.AnalyzeReuse(doc, p.opts.Tokens, *sp)
	defer func() {
		if cap(terms.Stats) <= maxPooledStats {
			*sp = terms.Stats[:0]
			p.stats.Put(sp)
		}
	}()
	if err := stageErr(ctx, "analyze"); err != nil {
		return nil, err
	}
	m := &Message{
		ARF: arf, Subject: doc.Subject, From: doc.From, MessageID: doc.MessageID, List: doc.List, ListID: doc.ListID, ListPost: doc.ListPost, Recipients: doc.Recipients, Bulk: doc.Bulk, Reply: doc.Reply, Precedence: doc.Precedence, AuthPasses: authPasses(doc.AuthResults), Excerpt: excerpt(doc.Text), Warnings: doc.Warnings,
		Unique: len(terms.Sorted), FooterAt: messageFooter(doc), p: p, doc: doc,
		sorted: terms.Sorted,
	}
	if m.FooterAt >= 0 {
		m.footless = m.withoutFooter()
	}
	var df []int32 // the document frequencies of terms.Sorted, when shareDF
	if p.shareDF {
		dp, _ := p.dfs.Get().(*[]int32)
		if dp == nil {
			dp = new([]int32)
		}
		defer p.dfs.Put(dp)
		df = *dp
		defer func() { *dp = df[:0] }()
	}
	if p.imatch != nil {
		var res imatchbag.Result
		if p.shareDF {
			res, df = p.imatch.SignSortedDF(terms.Sorted, df)
		} else {
			res = p.imatch.SignSorted(terms.Sorted) // sorted by Analyze
		}
		m.IMatch, m.SignerReason = res.Signatures, res.Reason
		if res.Unique != 0 {
			m.Unique = res.Unique
		}
		if m.FooterAt >= 0 && len(m.IMatch) > 0 {
			m.IMatch, m.FooterIMatch = p.dropFooterIMatch(doc, m.FooterAt, terms.Sorted, m.IMatch)
		}
	}
	var sk andd.Sketch
	var bandKeys [][]byte
	if p.andd != nil && len(terms.Sorted) >= p.opts.ANDDMinTerms {
		sk = p.andd.SketchTermsDF(doc, terms, df) // df nil unless shareDF
		if !sk.IsEmpty() {
			bandKeys = p.andd.BandKeys(sk)
		}
	}
	if !sk.IsEmpty() {
		b, err := sk.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("sign: encode sketch: %w", err)
		}
		m.Sketch, m.SketchBytes, m.BandKeys = sk, b, bandKeys
	}
	switch {
	case len(m.IMatch) > 0:
	case m.HasSketch():
		if b := m.Body(); b.HasFooter && !b.HasSketch() {
			m.Skip = FooterSketch
		}
	case m.FooterIMatch > 0:
		m.Skip = FooterIMatch
	default:
		m.Skip = TooShort
	}
	if p.short != nil {
		p.signShort(m, doc)
	}
	if p.qgram != nil && m.Skip == NoSkip {
		if err := p.signQGram(m, doc); err != nil {
			return nil, err
		}
	}
	// One slice for all keys: the store lookup takes them in one call.
	m.keys = make([][]byte, 0, len(m.IMatch)+len(m.ShortKeys)+len(m.BandKeys)+len(m.QKeys)+len(m.ShortLookup))
	kb := make([]byte, 0, len(m.IMatch)*imatchbag.KeyLen) // the I-Match keys in one array
	for _, sig := range m.IMatch {
		start := len(kb)
		kb = sig.AppendKey(kb)
		m.keys = append(m.keys, kb[start:len(kb):len(kb)])
	}
	m.IMatchKeys = m.keys[:len(m.keys):len(m.keys)]
	m.keys = append(m.keys, m.ShortKeys...)
	m.keys = append(m.keys, m.ShortLookup...)
	m.exact = len(m.keys)
	m.keys = append(m.keys, m.BandKeys...)
	m.keys = append(m.keys, m.QKeys...)
	if err := stageErr(ctx, "sign"); err != nil {
		return nil, err
	}
	return m, nil
}

// signShort computes the short-message keys of m (shortsig) on the text
// without its mailing-list footer, so that a one-line post to a list is
// not signed by the list's footer. A message with no signature of its own
// (Skip set) is signed whatever its length (shortsig.SignUnsigned); when
// that gives it keys it is no longer skipped, and a sketch that is its
// footer's (FooterSketch) is dropped.
func (p *Pipeline) signShort(m *Message, doc *mime.Document) {
	if m.footless != nil {
		doc = m.footless
	}
	var r shortsig.Result
	if m.Skip != NoSkip {
		r = p.short.SignUnsigned(doc)
	} else {
		r = p.short.Sign(doc)
	}
	m.ShortKeys, m.ShortLookup, m.SignedNote = r.Keys, r.Lookup, r.SignedNote
	if m.Skip == NoSkip || len(m.ShortKeys) == 0 {
		return
	}
	if m.Skip == FooterSketch {
		m.Sketch, m.SketchBytes, m.BandKeys = andd.Sketch{}, nil, nil
	}
	m.Skip = NoSkip
}

// signQGram computes the q-gram sketch and band keys of m (qgram) on the
// subject and text without the mailing-list footer: misspelled copies
// keep most of their q-grams where they lose their words.
func (p *Pipeline) signQGram(m *Message, doc *mime.Document) error {
	text := doc.Text
	if m.FooterAt >= 0 && m.FooterAt <= len(text) {
		text = text[:m.FooterAt]
	}
	sk, ok := p.qgram.Sketch(doc.Subject, "\n", text)
	if !ok {
		return nil
	}
	b, err := sk.MarshalBinary()
	if err != nil {
		return fmt.Errorf("sign: encode q-gram sketch: %w", err)
	}
	m.QSketch, m.QSketchBytes, m.QKeys = sk, b, qgram.BandKeys(&sk)
	return nil
}
