package campaign

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/shortsig"
	"github.com/nddmilter/nddmilter/internal/store"
)

// DefaultStreamBatch is the number of reports a ReportStream applies per
// store transaction by default.
const DefaultStreamBatch = 256

// StreamOptions configure a ReportStream. Zero values select the defaults.
type StreamOptions struct {
	// Batch is the number of reports applied together, as one ReportBatch
	// (one store transaction and fsync). Default DefaultStreamBatch (256).
	Batch int
	// Workers is the number of goroutines that parse and sign messages
	// ahead of the store. Default runtime.GOMAXPROCS(0).
	Workers int
	// Ahead is the number of reports Add accepts beyond the batch being
	// applied: at most Batch+Ahead messages (raw and signed) are held.
	// Default Batch.
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

// A ReportStream applies a stream of reports with the outcomes of
// ReportBatch called on consecutive batches of Batch reports, in the
// order they were added, while parsing and signing the messages of the
// next batches on other cores: signing (CPU only) runs ahead; matching
// against the store and applying stay in order, each batch being matched
// against the store as the previous batches left it.
//
// When a batch stops at a report that cannot be prepared or stored, that
// report's result carries the error and the rest of the batch is applied
// one report at a time (Engine.Report), as a caller of ReportBatch would.
//
// Add and Close must be called from one goroutine; the results are
// delivered in order, from another goroutine.
type ReportStream struct {
	e        *Engine
	ctx      context.Context
	opts     StreamOptions
	onResult func(StreamResult)

	order   chan *streamJob // all reports, in order, to the applier
	sign    chan *streamJob // to the signing workers
	workers sync.WaitGroup
	done    chan struct{} // closed when the applier returns
	seq     int
	closed  bool
	errs    []error // set by the applier before done is closed
}

// streamJob is one report on its way: signed by a worker, then applied.
type streamJob struct {
	req   ReportRequest
	seq   int
	ready chan struct{} // closed once signed (or failed)
	s     *signed
	arf   bool
	err   error
}

// NewReportStream starts a stream of reports applied through e. onResult
// receives every report's result in order, from the stream's applying
// goroutine; it must not call the stream. ctx bounds the whole stream.
func (e *Engine) NewReportStream(ctx context.Context, opts StreamOptions, onResult func(StreamResult)) *ReportStream {
	if opts.Batch <= 0 {
		opts.Batch = DefaultStreamBatch
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.Ahead <= 0 {
		opts.Ahead = opts.Batch
	}
	if onResult == nil {
		onResult = func(StreamResult) {}
	}
	s := &ReportStream{
		e:        e,
		ctx:      ctx,
		opts:     opts,
		onResult: onResult,
		order:    make(chan *streamJob, opts.Ahead),
		sign:     make(chan *streamJob, opts.Ahead),
		done:     make(chan struct{}),
	}
	for range opts.Workers {
		s.workers.Add(1)
		go s.signer()
	}
	go s.applier()
	return s
}

// Add queues a report. It blocks while Batch+Ahead reports are pending,
// and fails once the stream has stopped (its context was canceled).
// req.Raw must not be modified until the report's result is delivered.
func (s *ReportStream) Add(req ReportRequest) error {
	if s.closed {
		return errors.New("report stream: Add after Close")
	}
	select {
	case <-s.done: // stopped: checked first, since a select with both
		// ready would pick either
		return s.stopErr()
	default:
	}
	j := &streamJob{req: req, seq: s.seq, ready: make(chan struct{})}
	select {
	case s.order <- j:
	case <-s.done:
		return s.stopErr()
	}
	s.seq++
	s.sign <- j // the workers never wait for the applier
	return nil
}

// Close applies the reports still pending, waits for their results and
// stops the stream's goroutines. It returns the context's error when the
// stream was stopped by it (the reports not yet applied are then not
// applied and have no result), and errors that belong to no single
// report.
func (s *ReportStream) Close() error {
	if !s.closed {
		s.closed = true
		close(s.order)
		close(s.sign)
	}
	<-s.done
	s.workers.Wait()
	return errors.Join(s.errs...)
}

func (s *ReportStream) stopErr() error {
	if err := errors.Join(s.errs...); err != nil {
		return err
	}
	return errors.New("report stream stopped")
}

// signer parses and signs reports (CPU only, no store access).
func (s *ReportStream) signer() {
	defer s.workers.Done()
	for j := range s.sign {
		if err := s.ctx.Err(); err != nil {
			j.err = err
		} else {
			j.s, j.arf, j.err = s.e.signReport(j.req.Raw, j.req.Kind)
		}
		close(j.ready)
	}
}

// applier applies the reports in batches, in order.
func (s *ReportStream) applier() {
	defer close(s.done)
	batch := make([]*streamJob, 0, s.opts.Batch)
	for j := range s.order {
		batch = append(batch, j)
		if len(batch) < s.opts.Batch {
			continue
		}
		if !s.apply(batch) {
			return
		}
		batch = batch[:0]
	}
	if len(batch) > 0 {
		s.apply(batch)
	}
}

// apply matches a batch against the store (in parallel, reads only),
// applies it, and delivers its results. It returns false when the
// context stopped the stream.
func (s *ReportStream) apply(batch []*streamJob) bool {
	ctx := s.ctx
	for _, j := range batch {
		select {
		case <-j.ready:
		case <-ctx.Done():
			s.errs = append(s.errs, fmt.Errorf("report stream: %w", ctx.Err()))
			return false
		}
	}
	if err := ctx.Err(); err != nil {
		s.errs = append(s.errs, fmt.Errorf("report stream: %w", err))
		return false
	}
	preps := make([]*preparedReport, len(batch))
	errs := make([]error, len(batch))
	parallel(len(batch), func(i int) {
		j := batch[i]
		if j.err != nil {
			preps[i], errs[i] = &preparedReport{}, j.err
			return
		}
		preps[i], errs[i] = s.e.prepareSigned(ctx, j.s, j.arf, j.req.Kind, j.req.Reporter)
		j.s = nil // the signatures are in preps[i] now
	})
	outs, err := s.e.applyPrepared(ctx, preps, errs)
	for i, o := range outs {
		s.onResult(StreamResult{Seq: batch[i].seq, Outcome: o})
	}
	if err == nil {
		return true
	}
	if len(outs) >= len(batch) {
		s.errs = append(s.errs, err)
		return true
	}
	// The batch stopped at report len(outs): the rest one by one.
	s.onResult(StreamResult{Seq: batch[len(outs)].seq, Err: err})
	for _, j := range batch[len(outs)+1:] {
		if ctx.Err() != nil {
			s.errs = append(s.errs, fmt.Errorf("report stream: %w", ctx.Err()))
			return false
		}
		o, err := s.e.Report(ctx, j.req.Raw, j.req.Kind, j.req.Reporter)
		s.onResult(StreamResult{Seq: j.seq, Outcome: o, Err: err})
	}
	return true
}

// parallel calls f(0..n-1) on up to GOMAXPROCS goroutines.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// signReport is the first half of prepareReport (engine.go): it checks
// the kind, unwraps an ARF report and signs the message. It does not
// touch the store.
func (e *Engine) signReport(raw []byte, kind store.Kind) (s *signed, arf bool, err error) {
	if kind != store.KindSpam && kind != store.KindHam {
		return nil, false, fmt.Errorf("unknown kind %d", kind)
	}
	orig, arf := mime.UnwrapARF(raw)
	s, err = e.sign(orig)
	return s, arf, err
}

// prepareSigned is the second half of prepareReport (engine.go), after
// signReport: it matches a signed report against the store (reads only)
// and prepares its store input.
func (e *Engine) prepareSigned(ctx context.Context, s *signed, arf bool, kind store.Kind, reporter string) (*preparedReport, error) {
	p := &preparedReport{}
	p.out.ARF = arf
	if s.empty() {
		p.out.Skipped = s.skipReason()
		p.skip = true
		return p, nil
	}
	matched, unverified, err := e.match(ctx, s, true)
	if err != nil {
		return p, err
	}
	// Band keys that point at campaigns the sketch does not verify are
	// left out: the store joins every campaign sharing a key.
	keys := slices.Concat(s.imKeys, s.shortKeys)
	p.nIM = len(keys)
	for _, k := range s.bandKeys {
		if !unverified[string(k)] {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 && len(matched) == 0 {
		// Only band keys, all owned by dissimilar campaigns: a campaign
		// made of them could never be found again.
		p.out.Skipped = "no usable signature (no I-Match signature; its ANDD band keys belong to other, dissimilar campaigns)"
		p.skip = true
		return p, nil
	}
	p.in = store.ReportInput{
		Time:     e.now(),
		Kind:     kind,
		Reporter: reporter,
		Keys:     keys,
	}
	for _, c := range matched {
		p.matched = append(p.matched, c.rec.rec.ID)
		for _, ev := range c.evidence {
			// ANDD and lead matches may rest on keys the report is not
			// indexed under (unverified band keys, lead keys at a lower
			// level): the campaign is named.
			if ev.Family == FamilyANDD || ev.Family == FamilyShort && ev.Kind == shortsig.KindLead.String() {
				p.in.Join = append(p.in.Join, c.rec.rec.ID)
				break
			}
		}
	}
	p.out.Joined = p.matched
	if kind == store.KindSpam {
		p.in.Create, p.in.Index = true, true
		p.in.Sketch = s.sketchRaw
		p.in.Subject, p.in.From = s.doc.Subject, s.doc.From
	}
	p.sketch, p.hasSk = s.sketch, s.hasSketch
	if s.footerAt >= 0 {
		p.body = e.body(s)
	}
	return p, nil
}
