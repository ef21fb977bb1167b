package campaign

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/shortsig"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Ingestion: junk and not-junk reports.
//
// Every report takes one path, whatever the caller: Report is a batch of
// one, ReportBatch one batch, and a ReportStream consecutive batches.
// A batch is signed on one bounded pool (pipeline.SignReport, CPU only),
// matched against the store on the same pool (prepare, reads only), then
// applied in order in one store transaction (store.Badger.ReportBatch:
// one fsync); apply is where reports become campaigns.

// ReportRequest is one report of a batch: the raw message, or its
// evidence as another host signed it (Evidence, from Ingester.Evidence),
// which is then ingested without signing.
type ReportRequest struct {
	Raw      []byte
	Evidence []byte
	Kind     store.Kind
	Reporter string
	// ReporterHashed: Reporter is the hash the store keeps of the id
	// (store.ReporterHashHex), as a fleet's events carry it.
	ReporterHashed bool
}

// Ingester takes junk and not-junk reports and administrative changes
// (allow, delete, expiry): it signs reports, matches them against the
// store and applies the merge rule, and writes to the local store or,
// when the daemon gave it one, to a Writer (a fleet node), which
// publishes the writes for every node to apply (the Apply methods). It
// is safe for concurrent use.
type Ingester struct {
	*core
	local   target                     // the local store, at the engine's clock
	writer  atomic.Pointer[writerBox]  // SetWriter; nil: the local store
	limiter atomic.Pointer[limiterBox] // reports per reporter (SetReporterLimiter)
}

func newIngester(c *core) *Ingester {
	return &Ingester{core: c, local: target{st: c.st, batch: c.batch}}
}

// target is where a batch of reports is written: the local store at the
// engine's clock, or the store as a replicated event writes it
// (ApplyReports).
type target struct {
	st    store.Store
	batch store.BatchReporter // nil: one report at a time
	at    time.Time           // the time stored; zero: the engine's clock
	round *store.Round        // a round of a report event, or nil
}

// time is the time a report prepared now is stored with.
func (t *target) time(now func() time.Time) time.Time {
	if !t.at.IsZero() {
		return t.at
	}
	return now()
}

// Report applies a junk (store.KindSpam) or not-junk (store.KindHam) report.
func (e *Ingester) Report(ctx context.Context, raw []byte, kind store.Kind, reporter string) (ReportOutcome, error) {
	outs, err := e.ReportBatch(ctx, []ReportRequest{{Raw: raw, Kind: kind, Reporter: reporter}})
	if len(outs) == 1 {
		return outs[0], err
	}
	return ReportOutcome{}, fmt.Errorf("report: %w", errors.Unwrap(err))
}

// ReportBatch applies many reports, for bulk ingestion: messages are
// signed and matched in parallel, then applied in order in as few store
// transactions (and fsyncs) as possible. Each report is still atomic, and
// the outcomes are those Report would give one by one, except that a
// message near-duplicate of an earlier message of the same batch joins its
// campaign through shared signature keys only (its ANDD band keys are kept
// only when the earlier sketch verifies, and the merge rule of merge.go
// applies to it as if the earlier campaign were stored), that links
// within a batch never merge campaigns, and that not-spam reports are
// checked for revocation after the whole batch.
//
// Reporter ids are normalized first (NormalizeReporter with
// Options.ReporterRealm): every report of every entry ends here or in
// ReportStream.Add. Then each reporter's reports are admitted by the
// reporter limiter, if the engine has one (SetReporterLimiter): a
// reporter over its bound fails the whole batch, nothing stored, with a
// *RateLimitError (ErrRateLimited).
//
// On error, a *BatchError, outs holds the outcomes of reqs[:len(outs)],
// which are applied; reqs[len(outs)] failed and the reports after it were
// not applied.
func (e *Ingester) ReportBatch(ctx context.Context, reqs []ReportRequest) ([]ReportOutcome, error) {
	reqs = e.normalizeReports(reqs)
	if err := e.admitReports(ctx, reqs); err != nil {
		return nil, &BatchError{Index: 0, Err: err}
	}
	if w := e.writer.Load(); w != nil {
		return w.w.Report(ctx, reqs)
	}
	return e.write(ctx, e.local, reqs)
}

// write signs, prepares and applies reqs to t (ReportBatch's local path,
// and ApplyReports').
func (e *Ingester) write(ctx context.Context, t target, reqs []ReportRequest) ([]ReportOutcome, error) {
	workers := pool.New().WithMaxGoroutines(runtime.GOMAXPROCS(0))
	jobs := make([]*job, len(reqs))
	for i, r := range reqs {
		jobs[i] = e.signAsync(ctx, workers, r)
	}
	outs, err := e.apply(ctx, workers, jobs, t)
	workers.Wait() // every task is done; errors are per report
	return outs, err
}

// BatchError is the error of a batch that stopped at report Index: the
// reports before it are applied, it and those after it are not.
type BatchError struct {
	Index int
	Err   error
}

func (e *BatchError) Error() string { return fmt.Sprintf("report %d: %v", e.Index, e.Err) }
func (e *BatchError) Unwrap() error { return e.Err }

// job is one report on its way: signed, then prepared, then applied.
type job struct {
	req   ReportRequest
	ready chan struct{} // closed once signed (or failed)
	msg   *pipeline.Message
	err   error
}

// signAsync starts signing a report on workers (a pool of reused
// goroutines that bounds how many tasks run at once: Go waits for a free
// one, and the task has started when it returns).
func (e *Ingester) signAsync(ctx context.Context, workers *pool.Pool, r ReportRequest) *job {
	j := &job{req: r, ready: make(chan struct{})}
	workers.Go(func() {
		defer close(j.ready)
		if r.Kind != store.KindSpam && r.Kind != store.KindHam {
			j.err = fmt.Errorf("unknown kind %d", r.Kind)
			return
		}
		if r.Evidence != nil {
			j.msg, j.err = pipeline.UnmarshalEvidence(r.Evidence)
		} else {
			j.msg, j.err = e.pipe.SignReport(ctx, r.Raw)
		}
	})
	return j
}

// Evidence signs the raw messages of reqs (on a pool bounded as
// ReportBatch's) and returns each one's evidence, for a ReportRequest
// that another engine ingests without signing (a fleet's report events).
// It encodes the term hashes when the engine's options need them
// (Options.ANDDExactCosine); a request that has Evidence keeps it. On
// error, the evidence of reqs[:len(out)] is returned.
func (e *Ingester) Evidence(ctx context.Context, reqs []ReportRequest) ([][]byte, error) {
	out := make([][]byte, len(reqs))
	errs := make([]error, len(reqs))
	workers := pool.New().WithMaxGoroutines(runtime.GOMAXPROCS(0))
	opts := pipeline.EvidenceOptions{Terms: e.opts.ANDDExactCosine > 0}
	for i, r := range reqs {
		if r.Evidence != nil {
			out[i] = r.Evidence
			continue
		}
		workers.Go(func() {
			m, err := e.pipe.SignReport(ctx, r.Raw)
			if err == nil {
				out[i], err = m.MarshalEvidence(opts)
			}
			errs[i] = err
		})
	}
	workers.Wait()
	for i, err := range errs {
		if err != nil {
			return out[:i], &BatchError{Index: i, Err: fmt.Errorf("evidence: %w", err)}
		}
	}
	return out, nil
}

// preparedReport is a signed and matched report, ready for the store.
type preparedReport struct {
	out     ReportOutcome
	skip    bool // out.Skip says why; nothing to store
	in      store.ReportInput
	msg     *pipeline.Message
	matched []store.CampaignID
	nIM     int // in.Keys[:nIM] are exact keys (I-Match, then short keys but lead keys), the rest lead and band keys
	// plan is what the merge rule allows the report (merge.go).
	plan reportPlan
}

// apply prepares signed reports (matching them against the store, on the
// pool that signs them) and applies them, in order, in one store
// transaction when the store can. It stops at the first report that
// cannot be prepared or stored: outs are the outcomes of
// jobs[:len(outs)], applied, and the error, a *BatchError, names
// jobs[len(outs)], not applied, nor are those after it.
func (e *Ingester) apply(ctx context.Context, workers *pool.Pool, jobs []*job, t target) ([]ReportOutcome, error) {
	preps := make([]*preparedReport, len(jobs))
	errs := make([]error, len(jobs))
	var prepared sync.WaitGroup
	for i, j := range jobs {
		prepared.Add(1)
		workers.Go(func() {
			defer prepared.Done()
			<-j.ready // signing started before: it does not wait for a slot
			if j.err != nil {
				errs[i] = j.err
				return
			}
			preps[i], errs[i] = e.prepare(ctx, j.msg, j.req.Kind, j.req.Reporter, t.time(e.now))
			if preps[i] != nil {
				preps[i].in.ReporterHashed = j.req.ReporterHashed
			}
		})
	}
	prepared.Wait()
	return e.store(ctx, t, preps, errs)
}

// prepare matches a signed report against the store (reads only) and
// prepares its store input, at time at.
func (e *Ingester) prepare(ctx context.Context, m *pipeline.Message, kind store.Kind, reporter string, at time.Time) (*preparedReport, error) {
	p := &preparedReport{msg: m}
	p.out.ARF = m.ARF
	if m.Skip != pipeline.NoSkip {
		p.skipWith(*skipOf(m))
		return p, nil
	}
	res, err := e.match(ctx, m, true)
	if err != nil {
		return p, err
	}
	if kind == store.KindSpam {
		res.matched = dropQGramOnly(res.matched, res.unverified)
	}
	// Band keys that point at campaigns the sketch does not verify are
	// left out: the store joins every campaign sharing a key. Short keys
	// are exact, as I-Match keys are, except lead keys (the subject and
	// leading text only): those go with the band keys, as weak evidence.
	keys := slices.Clone(m.IMatchKeys)
	var lead [][]byte
	for _, k := range m.ShortKeys {
		if kind, _ := shortsig.KindOf(k); kind == shortsig.KindLead {
			lead = append(lead, k)
		} else {
			keys = append(keys, k)
		}
	}
	nExact := len(keys)
	keys = append(keys, lead...)
	for _, k := range m.BandKeys {
		if !res.unverified[string(k)] {
			keys = append(keys, k)
		}
	}
	for _, k := range m.QKeys {
		if !res.unverified[string(k)] {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 && len(res.matched) == 0 {
		// Only band keys, all owned by dissimilar campaigns: a campaign
		// made of them could never be found again.
		p.skipWith(Skip{Reason: SkipBandsTaken})
		return p, nil
	}
	p.in = store.ReportInput{
		Time:     at,
		Kind:     kind,
		Reporter: reporter,
		Keys:     keys,
		Digest:   reportDigest(m),
	}
	p.nIM = nExact
	for _, c := range res.matched {
		p.matched = append(p.matched, c.rec.rec.ID)
	}
	p.out.Joined = p.matched
	if kind == store.KindSpam {
		p.in.Create, p.in.Index = true, true
		p.in.Sketch = m.SketchBytes
		if m.HasQSketch() {
			p.in.MoreSketches = [][]byte{m.QSketchBytes}
		}
		if m.HasSketch() && e.opts.ANDDExactCosine > 0 {
			p.in.Terms = pipeline.EncodeTerms(m.TermHashes())
		}
		p.in.Subject, p.in.From, p.in.Text = m.Subject, m.From, m.Excerpt
	} else {
		// Not-spam evidence may revoke the campaign: decided by the
		// policy in the store's transaction of the report.
		pol := e.policy
		p.in.Revoke = pol.ShouldRevoke
	}
	// What the report joins and merges: the merge rule (merge.go).
	apart := kind == store.KindSpam && p.nIM > 0
	var sk *andd.Sketch
	if m.HasSketch() {
		sk = &m.Sketch
	}
	e.applyPlan(p, planReport(mergeCandidates(res.matched, sk), e.threshold, apart), res.matched)
	return p, nil
}

// skipWith marks p skipped.
func (p *preparedReport) skipWith(s Skip) {
	p.skip = true
	p.out.Skip, p.out.Skipped = s.Reason, s.String()
}

// store is apply after preparation: preps[i] (or errs[i]) is the
// prepared report i of the batch, all matched against the same state of
// the store, written to t.
func (e *Ingester) store(ctx context.Context, t target, preps []*preparedReport, errs []error) ([]ReportOutcome, error) {
	outs := make([]ReportOutcome, 0, len(preps))
	// A report that cannot be prepared stops the batch there: the reports
	// before it are applied, it and the rest are not.
	var prepErr error
	for i, err := range errs {
		if err != nil {
			preps, prepErr = preps[:i], &BatchError{Index: i, Err: err}
			break
		}
	}
	e.dropUnverifiedInBatch(preps)
	var ins []store.ReportInput
	var idx []int // ins[k] is the report of preps[idx[k]]
	for i, p := range preps {
		if !p.skip {
			ins = append(ins, p.in)
			idx = append(idx, i)
		}
	}
	var results []store.ReportResult
	var err error
	round := t.round
	if round != nil {
		// A round of a fleet's report event (store.Round): the store
		// commits a prefix of ins; the caller matches the rest again.
		base := round.Step
		round.Next = make([]int, len(idx))
		for k, i := range idx {
			round.Next[k] = base + i + 1
		}
	}
	if t.batch != nil && (len(ins) > 1 || round != nil) {
		results, err = t.batch.ReportBatch(ctx, ins)
		if errors.Is(err, store.ErrRoundAgain) {
			// Campaigns merged, no report applied: the caller matches
			// them again (store.Round).
			if e.cache != nil {
				e.cache.purge()
			}
			return nil, nil
		}
	} else {
		for _, in := range ins {
			var r store.ReportResult
			r, err = t.st.Report(ctx, in)
			if err != nil {
				break
			}
			results = append(results, r)
		}
	}
	for k, r := range results {
		e.invalidateReport(preps[idx[k]], r)
	}
	// Outcomes in order, up to the first report not applied.
	k := 0
	for _, p := range preps {
		if p.skip {
			outs = append(outs, p.out)
			continue
		}
		if k >= len(results) {
			break
		}
		o, ferr := e.finishReport(ctx, p, results[k])
		k++
		if ferr != nil {
			// The report is applied; only the revocation check failed.
			e.log.Warn("report: after report", "campaign", o.Campaign, "err", ferr)
		}
		outs = append(outs, o)
	}
	if err != nil {
		if k < len(idx) {
			e.invalidateReport(preps[idx[k]], store.ReportResult{})
		}
		return outs, &BatchError{Index: len(outs), Err: err}
	}
	if round != nil && len(idx) > 0 {
		// The round ends after the last report the store applied, where
		// its progress is recorded: the reports after it, skipped ones
		// included, are matched again in the next round against the
		// store as this one left it — as a node resuming there would.
		n := 0
		if len(results) > 0 {
			n = idx[len(results)-1] + 1
		}
		if len(results) < len(idx) || n < len(outs) {
			return outs[:n], nil
		}
	}
	return outs, prepErr
}

// dropUnverifiedInBatch removes from each report the band keys it shares
// with an earlier report of the batch whose sketch it does not verify, so
// that the store does not join them through an unverified LSH collision.
// It also holds links within the batch to the merge rule (merge.go), as
// if the earlier reports' campaigns were already stored: a report that
// matched no stored campaign and is linked to earlier reports of the
// batch through band keys only (an ANDD-only match) joins it when it is
// a near copy of each such report (nearCopyCosine) and each started or
// joined a campaign of the batch, else starts a campaign of its own when
// it has I-Match signatures (those band keys are dropped) and otherwise
// only counts on the campaign of such a report; one linked
// through I-Match keys keeps only the band keys it shares with reports it
// shares I-Match keys with, so that the store joins one of those. Links
// within a batch never merge campaigns.
func (e *Ingester) dropUnverifiedInBatch(preps []*preparedReport) {
	var nIM, nBand int // sized up front: a batch holds thousands of keys
	for _, p := range preps {
		if !p.skip {
			nIM += p.nIM
			nBand += len(p.in.Keys) - p.nIM
		}
	}
	owners := make(map[string][]int, nBand) // band key → earlier reports with it
	imOwners := make(map[string][]int, nIM) // I-Match key → earlier reports with it
	// The pair tests of p with an earlier report j, once per pair however
	// many band keys they share (a campaign's copies share dozens).
	memo := make([]pairMemo, len(preps))
	var touched []int
	for i, p := range preps {
		for _, j := range touched {
			memo[j] = 0
		}
		touched = touched[:0]
		if p.skip {
			continue
		}
		joinOK := func(j int) bool {
			if memo[j]&joinKnown == 0 {
				if memo[j] == 0 {
					touched = append(touched, j)
				}
				memo[j] |= joinKnown
				if e.andd != nil && p.msg.HasSketch() && e.batchJoinOK(preps[j].msg, p.msg) {
					memo[j] |= joinYes
				}
			}
			return memo[j]&joinYes != 0
		}
		near := func(j int) bool {
			if memo[j]&nearKnown == 0 {
				if memo[j] == 0 {
					touched = append(touched, j)
				}
				memo[j] |= nearKnown
				q := preps[j]
				if q.in.Target == 0 && !q.plan.VoteOnly &&
					andd.Cosine(q.msg.Sketch, p.msg.Sketch) >= max(e.threshold, nearCopyCosine) {
					memo[j] |= nearYes
				}
			}
			return memo[j]&nearYes != 0
		}
		var imLinked []int
		for _, k := range p.in.Keys[:p.nIM] {
			for _, j := range imOwners[string(k)] {
				if !slices.Contains(imLinked, j) {
					imLinked = append(imLinked, j)
				}
			}
		}
		keep := p.in.Keys[:p.nIM:p.nIM]
		var linked [][]byte // kept band keys of earlier reports
		nearCopy := true    // p is a near copy of every report it is linked with
		for _, k := range p.in.Keys[p.nIM:] {
			js := owners[string(k)]
			ok := true
			for _, j := range js {
				if !joinOK(j) || (len(imLinked) > 0 && !slices.Contains(imLinked, j)) {
					ok = false
					break
				}
			}
			if ok {
				keep = append(keep, k)
				if len(js) > 0 {
					linked = append(linked, k)
				}
				for _, j := range js {
					nearCopy = nearCopy && near(j)
				}
			}
		}
		p.in.Keys = keep
		switch {
		case p.in.Target != 0 || len(imLinked) > 0 || len(linked) == 0:
		case nearCopy:
			// A near copy of the earlier reports it shares band keys
			// with, which started or joined campaigns of this batch:
			// joined as planReport joins a near copy of a stored
			// campaign.
		case p.in.Kind == store.KindSpam && p.nIM > 0:
			// ANDD-only within the batch, with I-Match signatures: a
			// campaign of its own, as planReport decides against the
			// store.
			keep = p.in.Keys[:p.nIM:p.nIM]
			for _, k := range p.in.Keys[p.nIM:] {
				if len(owners[string(k)]) == 0 {
					keep = append(keep, k)
				}
			}
			p.in.Keys = keep
			p.plan = reportPlan{Apart: true, Why: voteANDDOnly}
		default:
			// ANDD-only within the batch, no I-Match signature: a vote on
			// the campaign of the earlier report, found through the
			// shared band keys.
			p.in.Keys, p.in.Sketch, p.in.MoreSketches, p.in.Terms = linked, nil, nil, nil
			p.in.Create, p.in.Index = false, false
			p.nIM = 0
			p.plan = reportPlan{VoteOnly: true, Why: voteANDDOnly}
		}
		if len(p.in.Keys) == 0 && p.in.Target == 0 && len(p.matched) == 0 {
			p.skipWith(Skip{Reason: SkipBandsInBatch})
			continue
		}
		if p.in.Index {
			for _, k := range p.in.Keys[:p.nIM] {
				imOwners[string(k)] = append(imOwners[string(k)], i)
			}
			for _, k := range p.in.Keys[p.nIM:] {
				owners[string(k)] = append(owners[string(k)], i)
			}
		}
	}
}

// pairMemo holds dropUnverifiedInBatch's tests of one pair of reports.
type pairMemo uint8

const (
	joinKnown pairMemo = 1 << iota // batchJoinOK computed
	joinYes                        // and true
	nearKnown                      // the near-copy test computed
	nearYes                        // and true
)

// batchJoinOK says whether report p may share a band key with the earlier
// report j of the same batch (the store then joins their campaigns): the
// rule Report applies when j is already in the store — the cosine must
// reach the threshold and, when p has a mailing-list footer, hold without
// it unless p is an exact copy (confirmANDD).
func (e *Ingester) batchJoinOK(j, p *pipeline.Message) bool {
	cos := andd.Cosine(j.Sketch, p.Sketch)
	if cos < e.threshold {
		return false
	}
	if p.FooterAt < 0 || cos >= exactCosine(p.Sketch) {
		return true
	}
	b := p.Body()
	return !b.HasFooter || b.HasSketch() && andd.Cosine(j.Sketch, b.Sketch) >= e.threshold
}

// invalidateReport drops from the cache whatever a report may have
// touched (even when it failed).
func (e *Ingester) invalidateReport(p *preparedReport, res store.ReportResult) {
	e.invalidate(res.Campaign)
	for _, id := range res.Merged {
		e.invalidate(id)
	}
	for _, id := range p.matched {
		e.invalidate(id)
	}
	for _, id := range p.in.MayMerge {
		e.invalidate(id)
	}
}

// finishReport fills the outcome of a stored report and revokes the
// campaign when not-spam evidence outweighs its spam reports.
func (e *Ingester) finishReport(ctx context.Context, p *preparedReport, res store.ReportResult) (ReportOutcome, error) {
	out := p.out
	out.ReportResult = res
	if p.plan.VoteOnly && res.Campaign != 0 {
		out.VoteOnly = p.plan.Why
	}
	out.Apart = p.plan.Apart && res.Created
	if res.Created {
		out.Joined = nil
	}
	if res.Revoked {
		// Revoked in the report's own transaction (ReportInput.Revoke).
		e.invalidate(res.Campaign)
		e.trust.forget() // its spam reporters' records changed
		e.log.Info("campaign revoked", "campaign", res.Campaign)
	}
	return out, nil
}

// DefaultStreamBatch is the number of reports a ReportStream applies per
// store transaction by default.
const DefaultStreamBatch = 256

// StreamOptions configure a ReportStream. Zero values select the defaults.
type StreamOptions struct {
	// Batch is the number of reports applied together, as one ReportBatch
	// (one store transaction and fsync). Default DefaultStreamBatch (256).
	Batch int
	// Workers bounds the messages signed (ahead of the store) and matched
	// against the store at once. Default runtime.GOMAXPROCS(0).
	Workers int
	// Ahead is the number of full batches queued behind the one being
	// applied: at most (Ahead+2)×Batch messages (raw and signed) are held.
	// Default 1.
	Ahead int
}

// StreamResult is the result of one report of a ReportStream.
type StreamResult struct {
	// Seq is the report's position among those added, from 0.
	Seq     int
	Outcome ReportOutcome
	// Err is non-nil when the report could not be applied.
	Err error
}

// A ReportStream applies a stream of reports as ReportBatch calls on
// consecutive batches of Batch reports, in the order they were added,
// while the messages of the next batches are signed on other cores:
// signing (CPU only) runs ahead; matching against the store and applying
// stay in order, each batch being matched against the store as the
// previous batches left it.
//
// When a batch stops at a report that cannot be prepared or stored, that
// report's result carries the error and the rest of the batch is applied
// as the next batch.
//
// Add and Close must be called from one goroutine; the results are
// delivered in order, from another goroutine.
type ReportStream struct {
	e        *Ingester
	ctx      context.Context
	opts     StreamOptions
	onResult func(StreamResult)

	workers *pool.Pool // signs ahead, and prepares each batch
	waited  bool       // workers.Wait was called (Close)

	batch   []*job        // being filled by Add
	batches chan []*job   // full batches, to the applier
	done    chan struct{} // closed when the applier returns
	seq     int
	closed  bool
	errs    []error // set by the applier before done is closed
}

// NewReportStream starts a stream of reports applied through e. onResult
// receives every report's result in order, from the stream's applying
// goroutine; it must not call the stream. ctx bounds the whole stream.
func (e *Ingester) NewReportStream(ctx context.Context, opts StreamOptions, onResult func(StreamResult)) *ReportStream {
	if opts.Batch <= 0 {
		opts.Batch = DefaultStreamBatch
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.Ahead <= 0 {
		opts.Ahead = 1
	}
	if onResult == nil {
		onResult = func(StreamResult) {}
	}
	s := &ReportStream{
		e:        e,
		ctx:      ctx,
		opts:     opts,
		onResult: onResult,
		batches:  make(chan []*job, opts.Ahead),
		done:     make(chan struct{}),
	}
	s.workers = pool.New().WithMaxGoroutines(opts.Workers)
	go s.applier()
	return s
}

// Add queues a report. It blocks while the stream holds as many reports
// as its options allow, and fails once the stream has stopped (its
// context was canceled). req.Raw must not be modified until the report's
// result is delivered.
func (s *ReportStream) Add(req ReportRequest) error {
	if s.closed {
		return errors.New("report stream: Add after Close")
	}
	select {
	case <-s.done:
		return s.stopErr()
	default:
	}
	req = s.e.normalizeReports([]ReportRequest{req})[0]
	s.batch = append(s.batch, s.e.signAsync(s.ctx, s.workers, req))
	s.seq++
	if len(s.batch) < s.opts.Batch {
		return nil
	}
	return s.send()
}

// send hands the batch being filled to the applier.
func (s *ReportStream) send() error {
	b := s.batch
	s.batch = make([]*job, 0, s.opts.Batch)
	select {
	case s.batches <- b:
		return nil
	case <-s.done:
		return s.stopErr()
	}
}

// Close applies the reports still pending, waits for their results and
// stops the stream's goroutines. It returns the context's error when the
// stream was stopped by it (the reports not yet applied are then not
// applied and have no result), and errors that belong to no single
// report.
func (s *ReportStream) Close() error {
	if !s.closed {
		s.closed = true
		if len(s.batch) > 0 {
			_ = s.send() // a stopped stream says why below
		}
		close(s.batches)
	}
	<-s.done
	if !s.waited {
		s.waited = true
		s.workers.Wait()
	}
	return errors.Join(s.errs...)
}

func (s *ReportStream) stopErr() error {
	if err := errors.Join(s.errs...); err != nil {
		return err
	}
	return errors.New("report stream stopped")
}

// applier applies the batches in order, and stops at the first one after
// the context is canceled.
func (s *ReportStream) applier() {
	defer close(s.done)
	seq := 0
	for b := range s.batches {
		for len(b) > 0 {
			if err := s.ctx.Err(); err != nil {
				s.errs = append(s.errs, fmt.Errorf("report stream: %w", err))
				return
			}
			var (
				outs []ReportOutcome
				err  error
			)
			if w := s.e.writer.Load(); w != nil {
				reqs := make([]ReportRequest, len(b))
				for i, j := range b {
					reqs[i] = j.req
				}
				outs, err = w.w.Report(s.ctx, reqs)
			} else {
				outs, err = s.e.apply(s.ctx, s.workers, b, s.e.local)
			}
			for _, o := range outs {
				s.onResult(StreamResult{Seq: seq, Outcome: o})
				seq++
			}
			if err == nil {
				break
			}
			if len(outs) >= len(b) {
				s.errs = append(s.errs, err)
				break
			}
			// The batch stopped at report len(outs): its result is the
			// error, and the rest is the next batch.
			s.onResult(StreamResult{Seq: seq, Err: fmt.Errorf("report: %w", errors.Unwrap(err))})
			seq++
			b = b[len(outs)+1:]
		}
	}
}

// dropQGramOnly leaves out of a spam report's matches the campaigns it
// matched through q-grams only, their q-gram keys marked unverified: a
// q-gram match is evidence for checking a message, not for what a report
// joins (a report so matched starts a campaign of its own, as it did
// before q-grams). The q-gram evidence of the other matches is kept; the
// merge rule does not count it.
func dropQGramOnly(matched []*candidate, unverified map[string]bool) []*candidate {
	out := matched[:0]
	for _, c := range matched {
		if slices.ContainsFunc(c.evidence, func(ev Evidence) bool { return ev.Family != FamilyQGram }) {
			out = append(out, c)
			continue
		}
		for _, k := range c.qKeys {
			unverified[string(k)] = true
		}
	}
	return out
}
