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
	"sync"
	"sync/atomic"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/qgram"
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
	qthresh   float64 // estimated docq of a q-gram match (0: family off)
	opts      Options
	policy    Policy
	th        []Threshold // policy.Thresholds()
	log       *slog.Logger
	now       func() time.Time
	cache     *recordCache
	pipe      *pipeline.Pipeline            // parse, analyze and sign in one pass
	repl      atomic.Pointer[replicatorBox] // fleet mode (SetReplicator)
	limiter   atomic.Pointer[limiterBox]    // reports per reporter (SetReporterLimiter)
	senders   store.SenderStore             // nil when the store keeps no sender domains
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
	if (opts.Policy.MatchModel == "" || opts.Policy.MatchModel == MatchConfirmed) && (opts.DisableANDD || opts.DisableQGram || model == nil) {
		// The calibrated model is fitted with every family on.
		opts.Policy.MatchModel = MatchConfidences
	}
	senders, _ := st.(store.SenderStore)
	e := &Engine{
		senders: senders,
		st:      st,
		imatch:  im,
		opts:    opts,
		policy:  opts.Policy.WithDefaults(),
		th:      opts.Policy.Thresholds(),
		log:     log,
		now:     opts.Clock,
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
	e.pipe, err = pipeline.New(e.imatch, e.andd, pipeline.Options{Mime: opts.Mime, Tokens: opts.Tokens, ANDDMinTerms: opts.ANDDMinTerms,
		Short: opts.Short, DisableShort: opts.DisableShort, QGram: opts.QGram, DisableQGram: opts.DisableQGram})
	if err != nil {
		return nil, fmt.Errorf("campaign engine: %w", err)
	}
	e.qthresh = e.pipe.QGramThreshold()
	return e, nil
}

// verifiedThreshold is the estimated cosine from which an ANDD-only
// candidate is verified exactly (Options.ANDDVerifiedThreshold).
func (e *Engine) verifiedThreshold() float64 {
	if v := e.opts.ANDDVerifiedThreshold; v > 0 && v < e.threshold {
		return v
	}
	return e.threshold
}

// Policy returns the effective policy (defaults filled in).
func (e *Engine) Policy() Policy { return e.policy }

// ANDDThreshold is the ANDD similarity threshold (0 when ANDD is off).
func (e *Engine) ANDDThreshold() float64 { return e.threshold }

// Store returns the engine's store.
func (e *Engine) Store() store.Store { return e.st }

// candidate is one campaign found through the index.
type candidate struct {
	id       store.CampaignID
	rec      *cachedRecord
	evidence []Evidence
	evKeys   [][]byte // evidence[i]'s key, hex-encoded by hexKeys when needed
	bandKeys [][]byte // band keys that found it
	qKeys    [][]byte // q-gram band keys that found it
	decision Decision
	// footerNote tells how an ANDD-only match was confirmed despite the
	// message's mailing-list footer ("" when it has none).
	footerNote string
	// wholeANDD and wholeQ are the message's whole-message similarities
	// to the campaign, whether or not they reach a threshold: the
	// estimated ANDD cosine of its whole sketch with the campaign's
	// closest kept sketch (or the band estimate), and the q-gram
	// similarity with its closest q-gram sketch; unset when the message or
	// the campaign has no such sketch (not measured). They weigh an
	// allowed campaign against a campaign to act on (exempt.go).
	wholeANDD, wholeQ measure
	// anddFooterOnly is set when the ANDD match rested on the message's
	// mailing-list footer only (not measured for the match model).
	anddFooterOnly bool
	// inputs are the measurements the match model weighs (set by match).
	inputs MatchInputs
	// gray are the checked message's graymail signs (nil: none).
	gray *Graymail
}

// matchInputs gathers the candidate's measurements for the match model:
// its evidence, and the whole-message ANDD and q-gram estimates below
// their thresholds (an ANDD match through the footer only is left out).
func (c *candidate) matchInputs() MatchInputs {
	in := inputsOf(c.evidence)
	if !in.ANDDVerified && c.wholeANDD.ok && !c.anddFooterOnly {
		in.ANDD = c.wholeANDD.v
	}
	if c.wholeQ.ok {
		in.QGram = max(in.QGram, c.wholeQ.v)
	}
	return in
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

// imatchBag returns the bag of an I-Match key of m, or -1 when k is not
// one of them (it is a short or band key). A message has one I-Match key per
// lexicon, a handful: a scan beats building a map per message.
func imatchBag(m *pipeline.Message, k []byte) int {
	for i, ik := range m.IMatchKeys {
		if bytes.Equal(ik, k) {
			return int(m.IMatch[i].Bag)
		}
	}
	return -1
}

// matches is what match found for one message.
type matches struct {
	// matched are the campaigns the message matches, with evidence.
	matched []*candidate
	// unverified are the band keys through which only campaigns the
	// sketch does not verify were found (when asked for: reports need
	// them, Check does not).
	unverified map[string]bool
	// footerOnly are the campaigns matched through the message's
	// mailing-list footer only (their ANDD evidence was not counted).
	footerOnly []FooterOnly
	// found are all the candidates the lookup found, matched or not,
	// with their inputs (Inspect).
	found []*candidate
}

// match looks up a signed message in the store and returns the campaigns
// it matches, with evidence: I-Match keys are exact evidence; band hits
// are verified against the campaign's sketches, and an ANDD match no
// I-Match signature supports must not rest on a mailing-list footer
// (confirmANDD).
func (e *Engine) match(ctx context.Context, m *pipeline.Message, wantUnverified bool) (res matches, err error) {
	keys := m.Keys()
	if len(keys) == 0 {
		return res, nil
	}
	hits, err := e.st.Lookup(ctx, keys)
	if err != nil {
		return res, fmt.Errorf("lookup signatures: %w", err)
	}
	if len(hits) == 0 {
		return res, nil
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
		if bag := imatchBag(m, h.Key); bag >= 0 {
			c.addEvidence(Evidence{Family: FamilyIMatch, Bag: bag, Similarity: 1}, h.Key)
		} else if kind, ok := shortsig.KindOf(h.Key); ok {
			c.addEvidence(Evidence{Family: FamilyShort, Kind: kind.String(), Similarity: 1}, h.Key)
		} else if qgram.IsKey(h.Key) {
			c.qKeys = append(c.qKeys, h.Key)
		} else {
			c.bandKeys = append(c.bandKeys, h.Key)
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(a.id, b.id) })
	if wantUnverified {
		res.unverified = map[string]bool{}
	}
	for i := range cands {
		c := &cands[i]
		rec, err := e.record(ctx, c.id)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted or expired meanwhile
		}
		if err != nil {
			return matches{}, err
		}
		c.rec = rec
		if m.HasSketch() && len(rec.sketches) > 0 {
			best := -1.0
			for _, sk := range rec.sketches {
				if cos := andd.Cosine(m.Sketch, sk); cos > best {
					best = cos
				}
			}
			if best < e.threshold {
				// The campaign keeps a few representative sketches only:
				// a message sharing most of its band keys with the
				// campaign is near-identical to members no longer kept.
				if est := bandEstimate(m, len(c.bandKeys)); est >= e.threshold {
					best = est
				}
			}
			c.wholeANDD = measure{best, true}
			exact := 0.0
			if !c.hasFamily(FamilyIMatch) && e.opts.ANDDExactCosine > 0 && len(rec.terms) > 0 && len(m.TermHashes()) > 0 &&
				best >= e.verifiedThreshold() {
				// ANDD without I-Match: the estimate must hold exactly.
				switch exact = exactTermCosine(m.TermHashes(), rec.terms, e.opts.ANDDExactCosine); {
				case exact < e.opts.ANDDExactCosine:
					best = -1
				case best < e.threshold:
					best = e.threshold
				}
			}
			if best >= e.threshold && !c.hasFamily(FamilyIMatch) {
				// ANDD without I-Match: it must not rest on a
				// mailing-list footer.
				note, fo := e.confirmANDD(ctx, m, c, best)
				if fo != nil {
					res.footerOnly = append(res.footerOnly, *fo)
					best = -1
					c.anddFooterOnly = true
				}
				c.footerNote = note
			}
			if best >= e.threshold {
				var key []byte
				if len(c.bandKeys) > 0 {
					key = c.bandKeys[0]
				} else if len(m.BandKeys) > 0 {
					key = m.BandKeys[0]
				}
				c.addEvidence(Evidence{Family: FamilyANDD, Similarity: best, Exact: exact}, key)
			}
		}
		if m.HasQSketch() && len(rec.qsketches) > 0 {
			// q-grams: the estimated docq with the campaign's closest
			// q-gram sketch (computed without mailing-list footers).
			best := -1.0
			for i := range rec.qsketches {
				best = max(best, qgram.EstimateSimilarity(&m.QSketch, &rec.qsketches[i]))
			}
			c.wholeQ = measure{best, true}
			if best >= e.qthresh {
				var key []byte
				if len(c.qKeys) > 0 {
					key = c.qKeys[0]
				} else if len(m.QKeys) > 0 {
					key = m.QKeys[0]
				}
				c.addEvidence(Evidence{Family: FamilyQGram, Similarity: best, Threshold: e.qthresh}, key)
			}
		}
		c.inputs = c.matchInputs()
		res.found = append(res.found, c)
		if len(c.evidence) == 0 {
			if wantUnverified {
				for _, k := range c.bandKeys {
					res.unverified[string(k)] = true
				}
				for _, k := range c.qKeys {
					res.unverified[string(k)] = true
				}
			}
			continue
		}
		res.matched = append(res.matched, c)
	}
	return res, nil
}

// bandQuorum is the share of a message's band keys that must point at a
// campaign for the band agreement alone to verify the match.
const bandQuorum = 0.5

// bandEstimate estimates the cosine between a message and a campaign from
// the share of the message's band keys that point at the campaign (see
// bandEstimateOf).
func bandEstimate(m *pipeline.Message, shared int) float64 {
	return bandEstimateOf(m.Sketch, len(m.BandKeys), shared)
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
	MaxAction action.Action
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

// check is the path of every checked message: the pipeline makes the
// raw bytes evidence (pipeline.Sign), and decide looks it up in the store
// and applies the policy.
func (e *Engine) check(ctx context.Context, raw []byte, record bool, o CheckOptions) (Verdict, error) {
	m, err := e.pipe.Sign(ctx, raw)
	if err != nil {
		v := Verdict{Action: action.Accept, Failed: "sign"}
		v.Rule = v.Explain()
		return v, fmt.Errorf("check: %w", err)
	}
	return e.decide(ctx, m, record, o)
}

// decide is check after signing: lookup, verification, policy, and the
// campaign's statistics when record is set.
func (e *Engine) decide(ctx context.Context, m *pipeline.Message, record bool, o CheckOptions) (Verdict, error) {
	v, err := e.verdict(ctx, m, o)
	v.Rule = v.Explain()
	if err != nil || !record {
		return v, err
	}
	if v.Campaign == 0 {
		// Counted in the store's hourly totals of checked messages (this
		// node's own, in a fleet too).
		if err := e.st.RecordCheck(ctx, v.Taken().String(), e.now()); err != nil {
			e.log.Warn("record check", "err", err)
		}
		if e.senders != nil && v.Taken() == action.Accept {
			if d := SenderDomain(m.From); d != "" {
				e.senders.RecordHam(d)
			}
		}
		return v, nil
	}
	// The sender domains of a campaign's copies (this node's own, in
	// memory until the hit flush): the false-positive watch.
	if e.senders != nil {
		if d := SenderDomain(m.From); d != "" {
			e.senders.RecordSender(v.Campaign, d)
		}
	}
	if r := e.replicator(ctx); r != nil {
		r.RecordHit(v.Campaign, v.Taken().String(), e.now())
		return v, nil
	}
	if err := e.st.RecordHit(ctx, v.Campaign, v.Taken().String(), e.now()); err != nil {
		e.log.Warn("record hit", "campaign", v.Campaign, "err", err)
	}
	return v, nil
}

// verdict fills a verdict's fields (not its Rule).
func (e *Engine) verdict(ctx context.Context, m *pipeline.Message, o CheckOptions) (Verdict, error) {
	v := Verdict{Action: action.Accept, Warnings: m.Warnings}
	if m.Skip != pipeline.NoSkip {
		v.Skip = skipOf(m)
		return v, nil
	}
	res, err := e.match(ctx, m, false)
	if err != nil {
		v.Failed = "store"
		return v, fmt.Errorf("check: %w", err)
	}
	v.FooterOnly = res.footerOnly
	if len(res.matched) == 0 {
		return v, nil
	}
	gray := e.graymailOf(m)
	for _, c := range res.matched {
		c.gray = gray
		c.decision = e.policy.decide(c.rec.rec, c.evidence, c.inputs, gray, e.threshold, e.th)
	}
	best, ex := e.choose(ctx, m, res.matched)
	v.Exempt = ex
	for _, c := range res.matched {
		if c != best {
			v.OtherCampaigns = append(v.OtherCampaigns, c.rec.rec.ID)
		}
	}
	best.hexKeys()
	best.decision.Rule = best.decision.Explain()
	v.Decision = &best.decision
	v.Action = best.decision.Action
	v.Campaign = best.rec.rec.ID
	v.Score = best.decision.P
	v.Evidence = best.evidence
	v.FooterNote = best.footerNote
	if o.CapBy != "" && v.Action > o.MaxAction {
		v.Cap = &Cap{From: v.Action, To: o.MaxAction, By: o.CapBy}
		v.Action = o.MaxAction
	}
	v.Deferred = o.DeferRejects && v.Action == action.Reject
	return v, nil
}

// skipOf says why m has no usable signature.
func skipOf(m *pipeline.Message) *Skip {
	s := &Skip{Unique: m.Unique, Signer: m.SignerReason}
	switch m.Skip {
	case pipeline.FooterIMatch:
		s.Reason = SkipFooterIMatch
	case pipeline.FooterSketch:
		s.Reason = SkipFooterSketch
	default:
		s.Reason = SkipTooShort
	}
	return s
}

// SetState changes a campaign's administrative state.
func (e *Engine) SetState(ctx context.Context, id store.CampaignID, s store.State) error {
	if r := e.replicator(ctx); r != nil {
		return r.SetState(ctx, id, s)
	}
	err := e.st.SetState(ctx, id, s)
	e.invalidate(id)
	return err
}

// Delete removes a campaign and every key pointing at it.
func (e *Engine) Delete(ctx context.Context, id store.CampaignID) error {
	if r := e.replicator(ctx); r != nil {
		return r.Delete(ctx, id)
	}
	err := e.st.Delete(ctx, id)
	e.invalidate(id)
	return err
}

// Expire deletes campaigns not seen nor reported for Options.Expiry and
// returns how many were deleted.
// In a fleet, the decision is published and applied by every node in
// stream order (0 deleted here).
func (e *Engine) Expire(ctx context.Context) (int, error) {
	cutoff := e.nowFor(ctx).Add(-e.opts.Expiry)
	if r := e.replicator(ctx); r != nil {
		return 0, r.Expire(ctx, cutoff)
	}
	return e.ExpireBefore(ctx, cutoff)
}

// cachedRecord is a campaign record with its sketches decoded. The
// record is read without its keys (store.Store.Record): the footer check,
// the one reader of them, loads them on demand (keys).
type cachedRecord struct {
	rec       *store.Campaign
	sketches  []andd.Sketch
	qsketches []qgram.Sketch
	// terms are the campaign's kept term sets (pipeline.DecodeTerms).
	terms [][]uint32

	keysMu     sync.Mutex
	keysLoaded bool
	campKeys   [][]byte
}

// keys returns the campaign's index keys, read from the store the first
// time they are asked for.
func (r *cachedRecord) keys(ctx context.Context, st store.Store) ([][]byte, error) {
	r.keysMu.Lock()
	defer r.keysMu.Unlock()
	if r.keysLoaded {
		return r.campKeys, nil
	}
	if r.rec.Keys != nil {
		r.campKeys, r.keysLoaded = r.rec.Keys, true
		return r.campKeys, nil
	}
	c, err := st.Get(ctx, r.rec.ID)
	if err != nil {
		return nil, fmt.Errorf("keys of campaign %d: %w", r.rec.ID, err)
	}
	r.campKeys, r.keysLoaded = c.Keys, true
	return r.campKeys, nil
}

func (e *Engine) record(ctx context.Context, id store.CampaignID) (*cachedRecord, error) {
	if e.cache != nil {
		if r := e.cache.get(id, e.now()); r != nil {
			return r, nil
		}
	}
	c, err := e.st.Record(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get campaign %d: %w", id, err)
	}
	r := &cachedRecord{rec: c}
	for _, b := range c.Sketches {
		if !qgram.IsSketch(b) {
			continue
		}
		if e.qthresh > 0 {
			sk, err := qgram.UnmarshalSketch(b)
			if err != nil {
				e.log.Warn("undecodable q-gram sketch", "campaign", id, "err", err)
				continue
			}
			r.qsketches = append(r.qsketches, sk)
		}
	}
	if e.andd != nil {
		for _, b := range c.Sketches {
			if qgram.IsSketch(b) {
				continue
			}
			sk, err := andd.UnmarshalSketch(b)
			if err != nil {
				e.log.Warn("undecodable sketch", "campaign", id, "err", err)
				continue
			}
			r.sketches = append(r.sketches, sk)
		}
		for _, b := range c.Terms {
			ts, err := pipeline.DecodeTerms(b)
			if err != nil {
				e.log.Warn("undecodable term set", "campaign", id, "err", err)
				continue
			}
			r.terms = append(r.terms, ts)
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
