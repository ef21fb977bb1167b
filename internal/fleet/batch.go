package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Reports arriving one by one (the API, the report socket, the Dovecot
// pipe) would each be an event of their own: a store write and a stream
// publish on this node, and a transaction on every node, for one report.
// The batcher coalesces the reports of concurrent Report calls into shared
// events, as a group commit does: it publishes one event at a time, in the
// order the calls arrived, with at most maxInFlight published events not
// yet applied here; the reports that arrive meanwhile form the next event.
// A report alone is published at once, so an idle node adds no delay.

// maxInFlight bounds the report events published by the batcher and not
// yet applied by this node: while they are applied, the next reports
// gather into one event. A few, so that the nodes' appliers have the
// next event while this node's batcher gathers the one after.
const maxInFlight = 4

// reportJob is the reports of one Report call, signed, on their way
// through the batcher; they may span several events.
type reportJob struct {
	reports []eventReport
	sizes   []int64

	mu      sync.Mutex
	outs    []campaign.ReportOutcome
	errs    []error
	pending int
	done    chan struct{} // closed once every report is resolved
}

func newReportJob(reports []eventReport, sizes []int64) *reportJob {
	return &reportJob{reports: reports, sizes: sizes, outs: make([]campaign.ReportOutcome, len(reports)),
		errs: make([]error, len(reports)), pending: len(reports), done: make(chan struct{})}
}

// resolve sets the outcome (or error) of the job's report i.
func (j *reportJob) resolve(i int, o campaign.ReportOutcome, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.outs[i], j.errs[i] = o, err
	if j.pending--; j.pending == 0 {
		close(j.done)
	}
}

// result is what Report answers for the job: the outcomes up to the first
// report that failed, and that failure.
func (j *reportJob) result() ([]campaign.ReportOutcome, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i, err := range j.errs {
		if err != nil {
			return j.outs[:i], &campaign.BatchError{Index: i, Err: err}
		}
	}
	return j.outs, nil
}

// piece is the reports [from, to) of a job carried by one event.
type piece struct {
	job      *reportJob
	from, to int
}

// batchLoop runs the batcher until the node stops.
func (n *Node) batchLoop() {
	defer n.wg.Done()
	defer close(n.batcherDone)
	slots := make(chan struct{}, maxInFlight)
	var carry *piece // the rest of a job that did not fit in the last event
	for {
		if carry == nil {
			select {
			case <-n.ctx.Done():
				return
			case j := <-n.reportJobs:
				carry = &piece{job: j, to: len(j.reports)}
			}
		}
		select { // a free slot, or the node stops
		case slots <- struct{}{}:
		case <-n.ctx.Done():
			n.publishReports(n.gather(&carry), nil)
			for carry != nil { // what the last event left out
				n.publishReports(n.gather(&carry), nil)
			}
			return
		}
		n.publishReports(n.gather(&carry), slots)
	}
}

// gather takes *carry and the jobs waiting now into one event's pieces,
// within the event's size and campaign bounds; what does not fit is left
// in *carry.
func (n *Node) gather(carry **piece) []piece {
	limit := n.eventLimit()
	var (
		pieces []piece
		size   int64
		count  int
	)
	take := func(p *piece) (rest *piece) {
		k := p.from
		for ; k < p.to && count < store.MaxEventCampaigns; k++ {
			if count > 0 && size+p.job.sizes[k] > limit {
				break
			}
			size += p.job.sizes[k]
			count++
		}
		if k > p.from {
			pieces = append(pieces, piece{job: p.job, from: p.from, to: k})
		}
		if k < p.to {
			return &piece{job: p.job, from: k, to: p.to}
		}
		return nil
	}
	if *carry != nil {
		if *carry = take(*carry); *carry != nil {
			return pieces
		}
	}
	for {
		select {
		case j := <-n.reportJobs:
			if *carry = take(&piece{job: j, to: len(j.reports)}); *carry != nil {
				return pieces
			}
		default:
			return pieces
		}
	}
}

// publishReports stores, publishes and (in the background, holding a
// slot until it is applied here) resolves one event of pieces. slots nil:
// the node stops, and the event is queued in the outbox.
func (n *Node) publishReports(pieces []piece, slots chan struct{}) {
	release := func() {
		if slots != nil {
			<-slots
		}
	}
	if len(pieces) == 0 {
		release()
		return
	}
	ev := n.newEvent(evReport)
	ev.V = int(n.reportV.Load())
	for _, p := range pieces {
		ev.Reports = append(ev.Reports, p.job.reports[p.from:p.to]...)
	}
	if ev.V >= hashedVersion {
		ev.Reports = slices.Clone(ev.Reports) // the jobs keep theirs
		ev.hashReporters()
	}
	resolveAll := func(o campaign.ReportOutcome, err error) {
		for _, p := range pieces {
			for k := p.from; k < p.to; k++ {
				p.job.resolve(k, o, err)
			}
		}
	}
	// Not a caller's context: the event carries several callers' reports.
	ch, seq, queued, err := n.publishEvent(context.Background(), ev, true)
	switch {
	case err != nil:
		resolveAll(campaign.ReportOutcome{}, err)
		release()
		return
	case queued:
		resolveAll(campaign.ReportOutcome{Replication: campaign.Queued}, nil)
		release()
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer release()
		res := n.awaitApply(n.ctx, ev, ch, seq)
		i := 0
		for _, p := range pieces {
			for k := p.from; k < p.to; k, i = k+1, i+1 {
				o := campaign.ReportOutcome{Replication: campaign.Replicated}
				if i < len(res.outs) {
					o = res.outs[i]
				}
				var err error
				if i < len(res.errs) {
					err = res.errs[i]
				}
				p.job.resolve(k, o, err)
			}
		}
	}()
}

// eventLimit is the bytes of reports one event carries.
func (n *Node) eventLimit() int64 {
	limit := int64(float64(n.nc.MaxPayload()) * eventBudget)
	if limit <= 0 {
		limit = 768 << 10
	}
	return limit
}

// errStopped answers the reports of a Report call that the node stopped
// before taking.
var errStopped = errors.New("fleet: the node stopped")

// batch hands a job to the batcher and waits for it. false: the batcher
// is not running (the node stopped), the job was not taken.
func (n *Node) batch(ctx context.Context, j *reportJob) (taken bool, err error) {
	select {
	case n.reportJobs <- j:
	case <-n.batcherDone:
		return false, nil
	case <-ctx.Done():
		return false, fmt.Errorf("fleet: report: %w", ctx.Err())
	}
	select {
	case <-j.done:
		return true, nil
	case <-ctx.Done():
		// Taken: its reports may still be published and applied.
		return true, fmt.Errorf("fleet: report: %w", ctx.Err())
	case <-time.After(n.opts.PublishTimeout + n.opts.ApplyTimeout + time.Minute):
		// Not expected: publishReports resolves every report it takes.
		return true, fmt.Errorf("fleet: report: %w: no outcome", errStopped)
	}
}
