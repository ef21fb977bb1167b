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
	"time"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/qgram"
	"github.com/nddmilter/nddmilter/internal/shortsig"
	"github.com/nddmilter/nddmilter/internal/store"
)

// DefaultExpiry is how long a campaign lives without hits or reports.
const DefaultExpiry = 30 * 24 * time.Hour

// Engine is the campaign engine over one store, by job: the Checker
// decides on messages (the milter, checks of the API and the command
// line), the Ingester takes reports and administrative changes, and the
// Reader reads campaigns (the API, the dashboard, the command line). It
// only groups the three for wiring; they share the signers, the policy
// and the Checker's cache of decoded campaigns, which the Ingester's
// writes invalidate. All three are safe for concurrent use.
type Engine struct {
	Checker  *Checker
	Ingester *Ingester
	Reader   *Reader
}

// core is what checking and ingesting share: the store, the signers
// (one pipeline), the policy and the cache of decoded campaign records.
type core struct {
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
	cache     *recordCache       // nil when disabled
	lists     listCounter        // accepted messages by mailing list (graymail.go)
	pipe      *pipeline.Pipeline // parse, analyze and sign in one pass
	// The store's optional capabilities, asserted once (nil: it has
	// not that one).
	senders   store.SenderStore
	reporters store.ReporterLister
	batch     store.BatchReporter
	events    store.EventStore
	sketched  store.SketchLookup
	// trust weighs spam reporters by their records (trust.go); nil when
	// off or the store keeps no history.
	trust *trustBook
}

// capabilities asserts the optional capabilities of e.st.
func (e *core) capabilities() {
	e.senders, _ = e.st.(store.SenderStore)
	e.reporters, _ = e.st.(store.ReporterLister)
	e.batch, _ = e.st.(store.BatchReporter)
	e.events, _ = e.st.(store.EventStore)
	e.sketched, _ = e.st.(store.SketchLookup)
	if ls, ok := e.st.(store.ListStore); ok {
		e.lists = storeLists{ls}
	} else {
		e.lists = newListTable()
	}
	hist, _ := e.st.(store.ReporterHistory)
	e.trust = newTrustBook(hist, &e.policy, e.now)
}

// New returns an Engine over st with the given lexicon and model (model may
// be nil when ANDD is disabled). Its writes go to st until the Ingester is
// given another Writer (a fleet node).
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
	e := &core{
		st:     st,
		imatch: im,
		opts:   opts,
		policy: opts.Policy.WithDefaults(),
		th:     opts.Policy.Thresholds(),
		log:    log,
		now:    opts.Clock,
	}
	e.capabilities()
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
	return e.engine(), nil
}

// engine returns the three jobs over e.
func (e *core) engine() *Engine {
	return &Engine{
		Checker:  &Checker{core: e},
		Ingester: newIngester(e),
		Reader: &Reader{st: e.st, senders: e.senders, reporters: e.reporters, trust: e.trust, policy: e.policy,
			bags: e.imatch.Options().K + 1, now: e.now, log: e.log},
	}
}

// Sibling returns an engine with e's signers, options and policy over
// another store, without a writer, provisional reports, reporter limiter
// or cache: where a fleet node keeps its provisional reports (an
// in-memory store).
func Sibling(e *Engine, st store.Store) *Engine {
	b := e.Checker.core
	s := &core{st: st, imatch: b.imatch, andd: b.andd, threshold: b.threshold, qthresh: b.qthresh,
		opts: b.opts, policy: b.policy, th: b.th, log: b.log, now: b.now, pipe: b.pipe}
	s.capabilities()
	return s.engine()
}

// verifiedThreshold is the estimated cosine from which an ANDD-only
// candidate is verified exactly (Options.ANDDVerifiedThreshold).
func (e *core) verifiedThreshold() float64 {
	if v := e.opts.ANDDVerifiedThreshold; v > 0 && v < e.threshold {
		return v
	}
	return e.threshold
}

// Policy returns the effective policy (defaults filled in).
func (e *core) Policy() Policy { return e.policy }

// ANDDThreshold is the ANDD similarity threshold (0 when ANDD is off).
func (e *core) ANDDThreshold() float64 { return e.threshold }

// candidate is one campaign found through the index.
type candidate struct {
	id       store.CampaignID
	rec      *cachedRecord
	evidence []Evidence
	evKeys   [][]byte // evidence[i]'s key, hex-encoded by hexKeys when needed
	bandKeys [][]byte // band keys that found it
	qKeys    [][]byte // q-gram band keys that found it
	decision Decision
	weights  reporterWeights // its spam reporters' weights (nil: each 1; trust.go)
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
func (e *core) match(ctx context.Context, m *pipeline.Message, wantUnverified bool) (res matches, err error) {
	keys := m.Keys()
	if len(keys) == 0 {
		return res, nil
	}
	var hits []store.Hit
	if e.sketched != nil {
		// Band keys' campaigns are compared with their sketches below.
		hits, err = e.sketched.LookupSketched(ctx, keys, m.ExactKeys())
	} else {
		hits, err = e.st.Lookup(ctx, keys)
	}
	if err != nil {
		return res, fmt.Errorf("lookup signatures: %w", err)
	}
	if len(hits) == 0 {
		return res, nil
	}
	// The hits sorted by campaign (stably: a campaign's keys keep their
	// order) give the candidates in the order they are decided in,
	// without moving candidates, which are large.
	slices.SortStableFunc(hits, func(a, b store.Hit) int { return cmp.Compare(a.Campaign, b.Campaign) })
	cands := make([]candidate, 0, min(len(hits), 8))
	for _, h := range hits {
		if len(cands) == 0 || cands[len(cands)-1].id != h.Campaign {
			cands = append(cands, candidate{id: h.Campaign})
		}
		c := &cands[len(cands)-1]
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

	// spam are the hashes of the campaign's spam reporters (at most
	// trustLimit+1), read the first time they are asked for (spamHashes).
	repMu     sync.Mutex
	repLoaded bool
	spam      []uint64

	// pool are the hashes of the campaign's spam reporters when it has
	// at most poolLimit reporters, poolOver whether it has more, read
	// the first time a pool asks for them (poolReporters).
	poolMu     sync.Mutex
	poolLoaded bool
	poolOver   bool
	pool       []uint64
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

func (e *core) record(ctx context.Context, id store.CampaignID) (*cachedRecord, error) {
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

func (e *core) invalidate(id store.CampaignID) {
	if e.cache != nil && id != 0 {
		e.cache.remove(id)
	}
}
