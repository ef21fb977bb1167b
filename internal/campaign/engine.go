package campaign

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/shortsig"
	"github.com/nddmilter/nddmilter/internal/store"
)

// DefaultExpiry is how long a campaign lives without hits or reports.
const DefaultExpiry = 30 * 24 * time.Hour

// Engine matches and decides. It is safe for concurrent use.
type Engine struct {
	st        store.Store
	imatch    *imatchbag.Signer
	andd      *andd.Signer // nil when ANDD is off
	threshold float64
	opts      Options
	policy    Policy
	th        []Threshold // policy.Thresholds()
	log       *slog.Logger
	now       func() time.Time
	cache     *recordCache
	pipe      *pipeline.Pipeline // parse, analyze and sign in one pass
	short     *shortsig.Signer   // short-message keys of footer-less text
}

// New returns an Engine over st with the given lexicon and model (model may
// be nil when ANDD is disabled).
func New(st store.Store, lex *imatchbag.Lexicon, model *andd.Model, opts Options, log *slog.Logger) (*Engine, error) {
	if st == nil {
		return nil, errors.New("campaign engine: nil store")
	}
	if lex == nil {
		return nil, errors.New("campaign engine: nil lexicon")
	}
	if err := opts.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("campaign engine: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Expiry == 0 {
		opts.Expiry = DefaultExpiry
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = 2 * time.Second
	}
	if opts.ANDDMinTerms <= 0 {
		opts.ANDDMinTerms = 10
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = 4096
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	im, err := imatchbag.NewSigner(lex, opts.IMatch)
	if err != nil {
		return nil, fmt.Errorf("campaign engine: I-Match signer: %w", err)
	}
	e := &Engine{
		st:     st,
		imatch: im,
		opts:   opts,
		policy: opts.Policy.WithDefaults(),
		th:     opts.Policy.Thresholds(),
		log:    log,
		now:    opts.Clock,
	}
	if opts.CacheTTL > 0 {
		e.cache = newRecordCache(opts.CacheSize, opts.CacheTTL)
	}
	if !opts.DisableANDD && model != nil {
		as, err := andd.NewSigner(model, lex)
		if err != nil {
			return nil, fmt.Errorf("campaign engine: ANDD signer: %w", err)
		}
		e.andd = as
		e.threshold = as.Threshold()
	}
	e.short = shortsig.New(opts.Short)
	e.pipe, err = pipeline.New(e.imatch, e.andd, pipeline.Options{Mime: opts.Mime, Tokens: opts.Tokens, ANDDMinTerms: opts.ANDDMinTerms, Short: opts.Short})
	if err != nil {
		return nil, fmt.Errorf("campaign engine: %w", err)
	}
	return e, nil
}

// Policy returns the effective policy (defaults filled in).
func (e *Engine) Policy() Policy { return e.policy }

// ANDDThreshold is the ANDD similarity threshold (0 when ANDD is off).
func (e *Engine) ANDDThreshold() float64 { return e.threshold }

// Store returns the engine's store.
func (e *Engine) Store() store.Store { return e.st }

// signed is one message's signatures.
type signed struct {
	doc       *mime.Document
	unique    int
	reason    string
	imatch    []imatchbag.Signature
	imKeys    [][]byte // keys[:len(imKeys)]
	keys      [][]byte // I-Match keys, short keys, band keys, short lookup keys
	sketch    andd.Sketch
	hasSketch bool
	sketchRaw []byte
	bandKeys  [][]byte
	// shortKeys are the short-message keys (shortsig) a report is indexed
	// under; shortLookup the lead keys a message is looked up under too.
	// Both are computed on the text without its mailing-list footer.
	shortKeys   [][]byte
	shortLookup [][]byte
	// body is the sketch without the mailing-list footer (evidence.go),
	// computed when an ANDD-only match needs confirming.
	body *bodySketch
	// footerOnly lists the campaigns match found through the footer only
	// (their ANDD evidence was not counted).
	footerOnly []*footerOnly
	// footerAt is the offset of the mailing-list footer in doc.Text, -1
	// when it has none (footerStart).
	footerAt int
	// footerIMatch counts the I-Match signatures dropped because they are
	// those of the footer alone (dropFooterIMatch).
	footerIMatch int
	// footerOnlySketch is set when the message has no I-Match signature
	// and every word its ANDD sketch weighs is in its mailing-list footer:
	// the sketch is the list's, not the message's, and is not used.
	footerOnlySketch bool
}

// allKeys is the I-Match keys, the short keys, the band keys and the
// short lookup keys, for one store lookup.
func (s *signed) allKeys() [][]byte {
	n := len(s.imKeys) + len(s.shortKeys) + len(s.bandKeys) + len(s.shortLookup)
	if len(s.keys) == n {
		return s.keys
	}
	keys := make([][]byte, 0, n)
	keys = append(keys, s.imKeys...)
	keys = append(keys, s.shortKeys...)
	keys = append(keys, s.bandKeys...)
	return append(keys, s.shortLookup...)
}

// empty reports whether s has no usable signature: no I-Match signature,
// no short-message key, and no ANDD sketch or one that weighs only words
// of the message's mailing-list footer (footerOnlySketch).
func (s *signed) empty() bool {
	return len(s.imKeys) == 0 && len(s.shortKeys) == 0 && (!s.hasSketch || s.footerOnlySketch)
}

// skipReason says why a message without signatures cannot be used:
// "too short for a signature (N unique words)", or the signer's reason.
func (s *signed) skipReason() string {
	switch {
	case s.footerOnlySketch:
		return footerOnlyReason
	case s.footerIMatch > 0 && len(s.imKeys) == 0 && !s.hasSketch:
		return footerIMatchReason
	case s.reason == "", strings.HasPrefix(s.reason, "too short for a signature"):
		return fmt.Sprintf("too short for a signature (%d unique words)", s.unique)
	default:
		return fmt.Sprintf("too short for a signature (%d unique words; %s)", s.unique, s.reason)
	}
}

// sign parses and signs a raw message (internal/pipeline: one parse, one
// word analysis for both signature families).
func (e *Engine) sign(raw []byte) (*signed, error) {
	r := e.pipe.Analyze(raw)
	res := r.IMatch
	s := &signed{doc: r.Doc, unique: res.Unique, reason: res.Reason, imatch: res.Signatures, footerAt: -1}
	if s.unique == 0 {
		s.unique = len(r.Terms.Sorted)
	}
	s.footerAt = messageFooter(r.Doc)
	if s.footerAt >= 0 && len(s.imatch) > 0 {
		e.dropFooterIMatch(s, r.Terms.Sorted)
	}
	if !r.Sketch.IsEmpty() {
		b, err := r.Sketch.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("encode sketch: %w", err)
		}
		s.sketch, s.hasSketch, s.sketchRaw = r.Sketch, true, b
		s.bandKeys = r.BandKeys
		if len(s.imatch) == 0 {
			b := e.body(s)
			s.footerOnlySketch = b.hasFooter && !b.hasSketch
		}
	}
	if !e.opts.DisableShort {
		short := r.Short
		if s.footerAt >= 0 {
			// Without the footer: a one-line post to a list must not be
			// signed by the list's footer. Signatures that are the
			// footer's do not count as the message's own.
			doc := withoutFooterKeepParts(r.Doc, s.footerAt)
			if len(s.imatch) == 0 && (!s.hasSketch || s.footerOnlySketch) {
				short = e.short.SignUnsigned(doc)
			} else {
				short = e.short.Sign(doc)
			}
		}
		s.shortKeys, s.shortLookup = short.Keys, short.Lookup
		if s.footerOnlySketch && len(s.shortKeys) > 0 {
			// The message is signed by its short keys; its sketch is the
			// list's and is not used.
			s.sketch, s.hasSketch, s.sketchRaw, s.bandKeys = andd.Sketch{}, false, nil, nil
			s.footerOnlySketch = false
		}
	}
	// One slice for all keys: the store lookup takes them in one call
	// without another copy.
	s.keys = make([][]byte, 0, len(s.imatch)+len(s.shortKeys)+len(s.bandKeys)+len(s.shortLookup))
	for _, sig := range s.imatch {
		s.keys = append(s.keys, sig.Key())
	}
	s.imKeys = s.keys[:len(s.keys):len(s.keys)]
	s.keys = append(s.keys, s.shortKeys...)
	s.keys = append(s.keys, s.bandKeys...)
	s.keys = append(s.keys, s.shortLookup...)
	return s, nil
}

// withoutFooterKeepParts is withoutFooterAt keeping the document's parts
// and list name (the short-message keys use them).
func withoutFooterKeepParts(doc *mime.Document, at int) *mime.Document {
	d := withoutFooterAt(doc, at)
	d.Parts, d.List = doc.Parts, doc.List
	return d
}

// candidate is one campaign found through the index.
type candidate struct {
	id       store.CampaignID
	rec      *cachedRecord
	evidence []Evidence
	evKeys   [][]byte // evidence[i]'s key, hex-encoded by hexKeys when needed
	bandKeys [][]byte // band keys that found it
	decision Decision
	// footerNote tells how an ANDD-only match was confirmed despite the
	// message's mailing-list footer ("" when it has none).
	footerNote string
	// footerOnly is set when the ANDD match held through the footer only.
	footerOnly *footerOnly
}

// hasFamily reports whether c has evidence of the family.
func (c *candidate) hasFamily(family string) bool {
	return slices.ContainsFunc(c.evidence, func(ev Evidence) bool { return ev.Family == family })
}

// addEvidence appends evidence whose Key is filled later by hexKeys (only
// the verdict's campaign needs its keys spelled out).
func (c *candidate) addEvidence(ev Evidence, key []byte) {
	c.evidence = append(c.evidence, ev)
	c.evKeys = append(c.evKeys, key)
}

// hexKeys fills the evidence keys, hex, in one allocation.
func (c *candidate) hexKeys() {
	n := 0
	for _, k := range c.evKeys {
		n += hex.EncodedLen(len(k))
	}
	buf := make([]byte, 0, n)
	for _, k := range c.evKeys {
		buf = hex.AppendEncode(buf, k)
	}
	all := string(buf)
	off := 0
	for i, k := range c.evKeys {
		l := hex.EncodedLen(len(k))
		c.evidence[i].Key = all[off : off+l]
		off += l
	}
}

// imatchBag returns the bag of an I-Match key of s, or -1 when k is not
// one of them (it is a band key). A message has one I-Match key per
// lexicon, a handful: a scan beats building a map per message.
func (s *signed) imatchBag(k []byte) int {
	for i, ik := range s.imKeys {
		if bytes.Equal(ik, k) {
			return int(s.imatch[i].Bag)
		}
	}
	return -1
}

// match looks up a signed message and returns the campaigns it matches,
// with evidence (I-Match keys are exact evidence; band hits are verified
// against the campaign's sketches). When wantUnverified is set, the band
// keys through which only unverified campaigns were found are returned in
// unverified (reports need them; Check does not).
func (e *Engine) match(ctx context.Context, s *signed, wantUnverified bool) (matched []*candidate, unverified map[string]bool, err error) {
	keys := s.allKeys()
	if len(keys) == 0 {
		return nil, nil, nil
	}
	hits, err := e.st.Lookup(ctx, keys)
	if err != nil {
		return nil, nil, fmt.Errorf("lookup signatures: %w", err)
	}
	if len(hits) == 0 {
		return nil, nil, nil
	}
	// A message hits few campaigns: a slice searched linearly is cheaper
	// than a map.
	cands := make([]candidate, 0, min(len(hits), 8))
	for _, h := range hits {
		i := slices.IndexFunc(cands, func(c candidate) bool { return c.id == h.Campaign })
		if i < 0 {
			cands = append(cands, candidate{id: h.Campaign})
			i = len(cands) - 1
		}
		c := &cands[i]
		if bag := s.imatchBag(h.Key); bag >= 0 {
			c.addEvidence(Evidence{Family: FamilyIMatch, Bag: bag, Similarity: 1}, h.Key)
		} else if kind, ok := shortsig.KindOf(h.Key); ok {
			c.addEvidence(Evidence{Family: FamilyShort, Kind: kind.String(), Similarity: 1}, h.Key)
		} else {
			c.bandKeys = append(c.bandKeys, h.Key)
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(a.id, b.id) })
	if wantUnverified {
		unverified = map[string]bool{}
	}
	for i := range cands {
		c := &cands[i]
		rec, err := e.record(ctx, c.id)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted or expired meanwhile
		}
		if err != nil {
			return nil, nil, err
		}
		c.rec = rec
		if s.hasSketch && len(rec.sketches) > 0 {
			best := -1.0
			for _, sk := range rec.sketches {
				if cos := andd.Cosine(s.sketch, sk); cos > best {
					best = cos
				}
			}
			if best < e.threshold {
				// The campaign keeps a few representative sketches only:
				// a message sharing most of its band keys with the
				// campaign is near-identical to members no longer kept.
				if est := bandEstimate(s, len(c.bandKeys)); est >= e.threshold {
					best = est
				}
			}
			if best >= e.threshold && !c.hasFamily(FamilyIMatch) {
				// ANDD without I-Match: it must not rest on a
				// mailing-list footer.
				ok, note := e.confirmANDD(s, c, best)
				if !ok {
					s.footerOnly = append(s.footerOnly, c.footerOnly)
					best = -1
				}
				c.footerNote = note
			}
			if best >= e.threshold {
				var key []byte
				if len(c.bandKeys) > 0 {
					key = c.bandKeys[0]
				} else if len(s.bandKeys) > 0 {
					key = s.bandKeys[0]
				}
				c.addEvidence(Evidence{Family: FamilyANDD, Similarity: best}, key)
			}
		}
		if len(c.evidence) == 0 {
			if wantUnverified {
				for _, k := range c.bandKeys {
					unverified[string(k)] = true
				}
			}
			continue
		}
		matched = append(matched, c)
	}
	return matched, unverified, nil
}

// bandQuorum is the share of a message's band keys that must point at a
// campaign for the band agreement alone to verify the match.
const bandQuorum = 0.5

// bandEstimate estimates the cosine between a message and a campaign from
// the share of the message's band keys that point at the campaign (see
// bandEstimateOf).
func bandEstimate(s *signed, shared int) float64 {
	return bandEstimateOf(s.sketch, len(s.bandKeys), shared)
}

// bandEstimateOf estimates the cosine between a sketch and a campaign from
// the share of the sketch's b band keys that point at the campaign: with
// b bands of r bits, a band agrees with probability (1 − θ/π)^r, so a
// share q of agreeing bands gives θ ≈ π(1 − q^(1/r)). It returns -1
// below bandQuorum (too few bands to say) or when the sketch has no bits.
func bandEstimateOf(sketch andd.Sketch, b, shared int) float64 {
	if b == 0 || len(sketch.Bits) == 0 {
		return -1
	}
	q := float64(shared) / float64(b)
	if q < bandQuorum {
		return -1
	}
	r := float64(64*len(sketch.Bits)) / float64(b)
	if r < 1 {
		r = 1
	}
	return math.Cos(math.Pi * (1 - math.Pow(math.Min(q, 1), 1/r)))
}

// Check decides what to do with a raw message and, when a campaign
// matched, counts the message and the action in the campaign's statistics
// (which refreshes it against expiry and feeds its volume).
func (e *Engine) Check(ctx context.Context, raw []byte) (Verdict, error) {
	return e.check(ctx, raw, true, CheckOptions{})
}

// CheckOptions adjust one Check.
type CheckOptions struct {
	// MaxAction caps the verdict's action, on top of the policy's
	// max_action: the milter passes the cap of the message's recipients
	// (milter.overrides), so that the verdict, its rule and the campaign's
	// counters all say what was done. Capping applies only when CapBy is
	// set.
	MaxAction Action
	// CapBy names what set MaxAction, for the verdict's rule (e.g.
	// "milter.overrides abuse@example.org").
	CapBy string
	// DeferRejects says that the MTA will defer (4xx) what the verdict
	// rejects (milter.reject_with: tempfail): the rule says so and the
	// campaign counts a "tempfail" instead of a "reject". The verdict's
	// action stays Reject.
	DeferRejects bool
}

// CheckWith is Check with per-message options.
func (e *Engine) CheckWith(ctx context.Context, raw []byte, o CheckOptions) (Verdict, error) {
	return e.check(ctx, raw, true, o)
}

// Evaluate is Check without counting the message: the same verdict, for
// dry runs (nddmilter check, evaluations) that must not change the
// campaigns' statistics.
func (e *Engine) Evaluate(ctx context.Context, raw []byte) (Verdict, error) {
	return e.check(ctx, raw, false, CheckOptions{})
}

func (e *Engine) check(ctx context.Context, raw []byte, record bool, o CheckOptions) (Verdict, error) {
	s, err := e.sign(raw)
	if err != nil {
		return Verdict{Action: Accept, Rule: "accept: " + err.Error()}, fmt.Errorf("check: %w", err)
	}
	return e.decideSigned(ctx, s, record, o)
}

// decideSigned is check after signing: lookup, verification, policy.
func (e *Engine) decideSigned(ctx context.Context, s *signed, record bool, o CheckOptions) (Verdict, error) {
	v := Verdict{Action: Accept, Warnings: s.doc.Warnings}
	if s.empty() {
		v.Rule = "accept: no signature, " + s.skipReason()
		return v, nil
	}
	matched, _, err := e.match(ctx, s, false)
	if err != nil {
		v.Rule = "accept: store error"
		return v, fmt.Errorf("check: %w", err)
	}
	if len(matched) == 0 {
		v.Rule = "accept: no campaign matched"
		if len(s.footerOnly) > 0 {
			v.Rule = "accept: " + footerOnlySummary(s.footerOnly, e.threshold)
		}
		return v, nil
	}
	var best *candidate
	for _, c := range matched {
		c.decision = e.policy.decide(c.rec.rec, c.evidence, e.threshold, e.th)
		if best == nil || c.decision.P > best.decision.P ||
			(c.decision.P == best.decision.P && len(c.evidence) > len(best.evidence)) {
			best = c
		}
	}
	best.hexKeys()
	v.Action = best.decision.Action
	v.Campaign = best.rec.rec.ID
	v.Score = best.decision.P
	v.Rule = best.decision.Rule
	v.Evidence = best.evidence
	if best.footerNote != "" {
		v.Rule += "; " + best.footerNote
	}
	if len(matched) > 1 {
		v.Rule += fmt.Sprintf("; %d campaigns matched", len(matched))
	}
	if len(s.footerOnly) > 0 {
		v.Rule += "; ignored: " + footerOnlySummary(s.footerOnly, e.threshold)
	}
	if o.CapBy != "" && v.Action > o.MaxAction {
		v.Rule += fmt.Sprintf("; %s capped to %s by %s", v.Action, o.MaxAction, o.CapBy)
		v.Action = o.MaxAction
	}
	taken := v.Action.String()
	if o.DeferRejects && v.Action == Reject {
		v.Rule += "; deferred with a 4xx reply (milter.reject_with: tempfail)"
		taken = "tempfail"
	}
	if record {
		if err := e.st.RecordHit(ctx, v.Campaign, taken, e.now()); err != nil {
			e.log.Warn("record hit", "campaign", v.Campaign, "err", err)
		}
	}
	return v, nil
}

// Report applies a junk (store.KindSpam) or not-junk (store.KindHam) report.
func (e *Engine) Report(ctx context.Context, raw []byte, kind store.Kind, reporter string) (ReportOutcome, error) {
	p, err := e.prepareReport(ctx, raw, kind, reporter)
	if err != nil {
		return p.out, fmt.Errorf("report: %w", err)
	}
	if p.skip {
		return p.out, nil
	}
	res, err := e.st.Report(ctx, p.in)
	e.invalidateReport(p, res)
	if err != nil {
		return p.out, fmt.Errorf("report: %w", err)
	}
	return e.finishReport(ctx, p, res)
}

// preparedReport is a signed and matched report, ready for the store.
type preparedReport struct {
	out     ReportOutcome
	skip    bool // out.Skipped says why; nothing to store
	in      store.ReportInput
	sketch  andd.Sketch
	hasSk   bool
	nIM     int // in.Keys[:nIM] are I-Match and short keys, the rest band keys
	matched []store.CampaignID
	// body is the sketch without the mailing-list footer, when the
	// message has one (batch.go holds ANDD joins within a batch to the
	// rule confirmANDD applies against the store).
	body *bodySketch
}

// prepareReport unwraps, signs and matches a report. It only reads the
// store.
func (e *Engine) prepareReport(ctx context.Context, raw []byte, kind store.Kind, reporter string) (*preparedReport, error) {
	s, arf, err := e.signReport(raw, kind)
	if err != nil {
		p := &preparedReport{}
		p.out.ARF = arf
		return p, err
	}
	return e.prepareSigned(ctx, s, arf, kind, reporter)
}

// invalidateReport drops from the cache whatever a report may have
// touched (even when it failed).
func (e *Engine) invalidateReport(p *preparedReport, res store.ReportResult) {
	e.invalidate(res.Campaign)
	for _, id := range res.Merged {
		e.invalidate(id)
	}
	for _, id := range p.matched {
		e.invalidate(id)
	}
	for _, id := range p.in.Join {
		e.invalidate(id)
	}
}

// finishReport fills the outcome of a stored report and revokes the
// campaign when not-spam evidence outweighs its spam reports.
func (e *Engine) finishReport(ctx context.Context, p *preparedReport, res store.ReportResult) (ReportOutcome, error) {
	out := p.out
	out.ReportResult = res
	if res.Created {
		out.Joined = nil
	}
	if p.in.Kind == store.KindHam && res.Campaign != 0 {
		c, err := e.st.Get(ctx, res.Campaign)
		if err != nil {
			return out, fmt.Errorf("report: read campaign %d: %w", res.Campaign, err)
		}
		if c.State == store.StateActive && e.policy.ShouldRevoke(c) {
			if err := e.SetState(ctx, c.ID, store.StateRevoked); err != nil {
				return out, fmt.Errorf("report: revoke campaign %d: %w", c.ID, err)
			}
			out.Revoked = true
			e.log.Info("campaign revoked", "campaign", c.ID,
				"ham_reporters", c.HamReporters, "spam_reporters", c.SpamReporters)
		}
	}
	return out, nil
}

// SetState changes a campaign's administrative state.
func (e *Engine) SetState(ctx context.Context, id store.CampaignID, s store.State) error {
	err := e.st.SetState(ctx, id, s)
	e.invalidate(id)
	return err
}

// Delete removes a campaign and every key pointing at it.
func (e *Engine) Delete(ctx context.Context, id store.CampaignID) error {
	err := e.st.Delete(ctx, id)
	e.invalidate(id)
	return err
}

// Expire deletes campaigns not seen nor reported for Options.Expiry and
// returns how many were deleted.
func (e *Engine) Expire(ctx context.Context) (int, error) {
	n, err := e.st.Expire(ctx, e.now().Add(-e.opts.Expiry))
	if e.cache != nil && n > 0 {
		e.cache.purge()
	}
	if err != nil {
		return n, fmt.Errorf("expire campaigns: %w", err)
	}
	return n, nil
}

// cachedRecord is a campaign record with its sketches decoded.
type cachedRecord struct {
	rec      *store.Campaign
	sketches []andd.Sketch
}

func (e *Engine) record(ctx context.Context, id store.CampaignID) (*cachedRecord, error) {
	if e.cache != nil {
		if r := e.cache.get(id, e.now()); r != nil {
			return r, nil
		}
	}
	c, err := e.st.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get campaign %d: %w", id, err)
	}
	r := &cachedRecord{rec: c}
	if e.andd != nil {
		for _, b := range c.Sketches {
			sk, err := andd.UnmarshalSketch(b)
			if err != nil {
				e.log.Warn("undecodable sketch", "campaign", id, "err", err)
				continue
			}
			r.sketches = append(r.sketches, sk)
		}
	}
	if e.cache != nil {
		e.cache.put(id, r, e.now())
	}
	return r, nil
}

// CacheStats returns the hit and miss counts of the record cache (zero
// when the cache is disabled).
func (e *Engine) CacheStats() CacheStats {
	if e.cache == nil {
		return CacheStats{}
	}
	return CacheStats{Hits: e.cache.hits.Load(), Misses: e.cache.misses.Load()}
}

func (e *Engine) invalidate(id store.CampaignID) {
	if e.cache != nil && id != 0 {
		e.cache.remove(id)
	}
}
