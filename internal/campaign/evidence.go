package campaign

import (
	"context"
	"fmt"
	"math"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/ppjoin"
)

// exactTermCosine is the largest exact cosine between the term set msg and
// one of the campaign's sets that reaches at, or 0 when none does (PPJoin's
// verification: the size filter and the positional bound reject most
// misses without a full merge).
func exactTermCosine(msg []uint32, sets [][]uint32, at float64) float64 {
	best := 0.0
	for _, s := range sets {
		if c, ok := ppjoin.Verify(ppjoin.Cosine, max(at, best), msg, s); ok {
			best = max(best, c)
		}
	}
	return best
}

// confirmANDD checks an ANDD match of m with candidate c that no I-Match
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
// When the evidence stands, it returns a note for the verdict when the
// footer was taken into account; when it does not, it returns why.
func (e *core) confirmANDD(ctx context.Context, m *pipeline.Message, c *candidate, best float64) (note string, footerOnly *FooterOnly) {
	b := m.Body()
	if !b.HasFooter {
		return "", nil
	}
	if !b.HasSketch() {
		return "", &FooterOnly{Campaign: c.id, Full: best, Why: "no weighted word without it", Threshold: e.threshold}
	}
	if max(best, bandEstimate(m, len(c.bandKeys))) >= exactCosine(m.Sketch) {
		// An exact copy of a reported message, footer included: its
		// body's words have the same weights as the campaign's.
		return "ANDD: exact copy, mailing-list footer included", nil
	}
	body := -1.0
	for _, sk := range c.rec.sketches {
		body = max(body, andd.Cosine(b.Sketch, sk))
	}
	if body < e.threshold {
		// One pass over the campaign's keys (a large campaign has
		// thousands) against the message's few band keys. Unreadable
		// keys count as none shared: the match falls, the mail passes.
		ckeys, err := c.rec.keys(ctx, e.st)
		if err != nil {
			e.log.Warn("footer check: campaign keys unreadable", "campaign", c.id, "err", err)
		}
		mine := make(map[string]bool, len(b.BandKeys))
		for _, k := range b.BandKeys {
			mine[string(k)] = false
		}
		shared := 0
		for _, ck := range ckeys {
			if seen, ok := mine[string(ck)]; ok && !seen {
				mine[string(ck)] = true
				shared++
			}
		}
		if est := bandEstimateOf(b.Sketch, len(b.BandKeys), shared); est >= e.threshold {
			body = est
		}
	}
	if body < e.threshold {
		return "", &FooterOnly{Campaign: c.id, Full: best, Body: body, Threshold: e.threshold}
	}
	return fmt.Sprintf("ANDD still %.3f without the mailing-list footer", body), nil
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
