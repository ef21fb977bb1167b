package campaign

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/mime"
)

// bodySketch is the ANDD sketch of a message without its mailing-list
// footer (footer.go), computed once per message and only when an ANDD
// match needs confirming.
type bodySketch struct {
	hasFooter bool // the message has a footer; the fields below are then set
	sketch    andd.Sketch
	hasSketch bool     // false: no weighted word outside the footer
	bandKeys  [][]byte // band keys of sketch
}

// footerOnly is a campaign an ANDD match found only through the message's
// mailing-list footer: the evidence was not counted.
type footerOnly struct {
	campaign CampaignID
	full     float64 // best estimated cosine of the whole message
	body     float64 // the same without the footer, unless why is set
	why      string  // why there is no similarity without the footer
}

// body returns the message's body sketch, computing it on first use.
func (e *Engine) body(s *signed) *bodySketch {
	if s.body != nil {
		return s.body
	}
	b := &bodySketch{}
	s.body = b
	if e.andd == nil {
		return b
	}
	if s.footerAt < 0 {
		return b
	}
	doc := withoutFooterAt(s.doc, s.footerAt)
	b.hasFooter = true
	terms := mime.Analyze(doc, e.opts.Tokens)
	sk := e.andd.SketchTerms(doc, terms)
	if sk.IsEmpty() {
		return b
	}
	b.sketch, b.hasSketch = sk, true
	b.bandKeys = e.andd.BandKeys(sk)
	return b
}

// confirmANDD checks an ANDD match of s with candidate c that no I-Match
// signature supports, best being its estimated cosine. When the message
// has a mailing-list footer, the match must hold without it:
//
//   - a message with no weighted word outside its footer never matches
//     through ANDD alone (its sketch is the list's, not its own);
//   - an exact copy (sketch equal to one of the campaign's within
//     exactCopyBits bits, or every band key but at most one pointing at
//     the campaign) matches, footer included;
//   - otherwise the sketch of the message cut before its footer is
//     compared with the campaign's sketches (and its band keys with the
//     campaign's keys) and must reach the model's threshold. The message
//     already passed Options.ANDDMinTerms whole; its body is not held to
//     it again (a spam's own unsubscribe block after a rule can leave few
//     words above it, its subject and links still carrying the match).
//
// It returns whether the evidence stands and, when the footer was taken
// into account, a note for the verdict's rule; when the evidence does not
// stand, c.footerOnly says why.
func (e *Engine) confirmANDD(s *signed, c *candidate, best float64) (ok bool, note string) {
	b := e.body(s)
	if !b.hasFooter {
		return true, ""
	}
	if !b.hasSketch {
		c.footerOnly = &footerOnly{campaign: c.id, full: best, why: "no weighted word without it"}
		return false, ""
	}
	if max(best, bandEstimate(s, len(c.bandKeys))) >= exactCosine(s.sketch) {
		// An exact copy of a reported message, footer included: its
		// body's words have the same weights as the campaign's.
		return true, "ANDD: exact copy, mailing-list footer included"
	}
	body := -1.0
	for _, sk := range c.rec.sketches {
		body = max(body, andd.Cosine(b.sketch, sk))
	}
	if body < e.threshold {
		// One pass over the campaign's keys (a large campaign has
		// thousands) against the message's few band keys.
		mine := make(map[string]bool, len(b.bandKeys))
		for _, k := range b.bandKeys {
			mine[string(k)] = false
		}
		shared := 0
		for _, ck := range c.rec.rec.Keys {
			if seen, ok := mine[string(ck)]; ok && !seen {
				mine[string(ck)] = true
				shared++
			}
		}
		if est := bandEstimateOf(b.sketch, len(b.bandKeys), shared); est >= e.threshold {
			body = est
		}
	}
	if body < e.threshold {
		c.footerOnly = &footerOnly{campaign: c.id, full: best, body: body}
		return false, ""
	}
	return true, fmt.Sprintf("ANDD still %.3f without the mailing-list footer", body)
}

// exactCopyBits is the largest number of sketch bits in which an exact
// copy may differ from the campaign's sketch (weights are quantized).
const exactCopyBits = 2

// exactCosine is the estimated cosine of two sketches of sk's size that
// differ in exactCopyBits bits: at or above it a message is an exact copy.
func exactCosine(sk andd.Sketch) float64 {
	if len(sk.Bits) == 0 {
		return 2 // no exact copy without bits
	}
	return math.Cos(math.Pi * exactCopyBits / float64(64*len(sk.Bits)))
}

// footerIMatchReason is the skip reason of a message whose only I-Match
// signatures were those of its footer and that has no ANDD sketch.
const footerIMatchReason = "no usable signature (its only I-Match signatures are those of its mailing-list footer alone)"

// dropFooterIMatch removes from s the I-Match signatures that are those
// of its mailing-list footer alone: when no word outside the footer is in
// a lexicon, the signature of that lexicon hashes the footer's words only
// and is shared by every post to the list. It signs the message's words
// again with each word that is not in the footer replaced by a word of no
// lexicon (the same number of words, so the same minimum of lexicon
// words per signature): a signature that comes out the same
// hashed no word of the message's own. The message's other signatures,
// and every signature of a message without a footer, are kept.
// Signatures are a wire format: they are not changed, only not used.
func (e *Engine) dropFooterIMatch(s *signed, terms []string) {
	foot := mime.Analyze(&mime.Document{Text: s.doc.Text[s.footerAt:]}, e.opts.Tokens).Sorted
	// The footer's words, in order, after n placeholders: "\x00" is not a
	// word (tokens have no control characters), so it is in no lexicon,
	// and it sorts first.
	masked := make([]string, len(terms))
	n := 0
	for _, t := range terms {
		if _, ok := slices.BinarySearch(foot, t); !ok {
			n++
		}
	}
	if n == 0 {
		return // every word is the footer's: the signatures are the message's too
	}
	for i := range n {
		masked[i] = "\x00"
	}
	k := n
	for _, t := range terms {
		if _, ok := slices.BinarySearch(foot, t); ok {
			masked[k] = t
			k++
		}
	}
	same := e.imatch.SignSorted(masked).Signatures
	if len(same) == 0 {
		return
	}
	kept := s.imatch[:0:0]
	for _, sig := range s.imatch {
		if slices.Contains(same, sig) {
			s.footerIMatch++
			continue
		}
		kept = append(kept, sig)
	}
	s.imatch = kept
}

// footerOnlyReason is the skip reason of a message whose ANDD sketch
// weighs only words of its mailing-list footer and that has no I-Match
// signature (signed.footerOnlySketch): a campaign made of it would match
// every post to the list, and no copy of it would match (confirmANDD).
const footerOnlyReason = "no usable signature (no I-Match signature, and every word its ANDD sketch weighs is in its mailing-list footer)"

// String explains an ignored footer-only match for a verdict's rule.
func (f *footerOnly) String(threshold float64) string {
	without := f.why
	if without == "" {
		without = fmt.Sprintf("%.3f without it", f.body)
	}
	return fmt.Sprintf("campaign %d matched through the mailing-list footer only (ANDD %.3f with the footer, %s; %.3f needed)",
		f.campaign, f.full, without, threshold)
}

// footerOnlySummary explains the footer-only matches of a message.
func footerOnlySummary(fs []*footerOnly, threshold float64) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.String(threshold)
	}
	return strings.Join(parts, "; ")
}
