package campaign

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/store"
)

// ReportRequest is one report of a batch.
type ReportRequest struct {
	Raw      []byte
	Kind     store.Kind
	Reporter string
}

// batchStore is implemented by stores that apply many reports in one
// transaction (store.Badger).
type batchStore interface {
	ReportBatch(ctx context.Context, ins []store.ReportInput) ([]store.ReportResult, error)
}

// ReportBatch applies many reports, for bulk ingestion: messages are
// signed and matched in parallel, then applied in order in as few store
// transactions (and fsyncs) as possible. Each report is still atomic, and
// the outcomes are those Report would give one by one, except that a
// message near-duplicate of an earlier message of the same batch joins its
// campaign through shared signature keys only (its ANDD band keys are kept
// only when the earlier sketch verifies), and that not-spam reports are
// checked for revocation after the whole batch.
//
// On error, outs holds the outcomes of reqs[:len(outs)], which are
// applied; reqs[len(outs)] failed and the reports after it were not
// applied.
func (e *Engine) ReportBatch(ctx context.Context, reqs []ReportRequest) ([]ReportOutcome, error) {
	preps := make([]*preparedReport, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(runtime.GOMAXPROCS(0), len(reqs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				preps[i], errs[i] = e.prepareReport(ctx, reqs[i].Raw, reqs[i].Kind, reqs[i].Reporter)
			}
		}()
	}
	for i := range reqs {
		next <- i
	}
	close(next)
	wg.Wait()
	return e.applyPrepared(ctx, preps, errs)
}

// applyPrepared is ReportBatch after preparation: preps[i] (or errs[i])
// is the prepared report i of the batch, all matched against the same
// state of the store. It applies them in order, as ReportBatch documents.
func (e *Engine) applyPrepared(ctx context.Context, preps []*preparedReport, errs []error) ([]ReportOutcome, error) {
	outs := make([]ReportOutcome, 0, len(preps))
	// A report that cannot be prepared stops the batch there: the reports
	// before it are applied, it and the rest are not.
	var prepErr error
	for i, err := range errs {
		if err != nil {
			preps, prepErr = preps[:i], fmt.Errorf("report %d: %w", i, err)
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
	if bs, ok := e.st.(batchStore); ok && len(ins) > 1 {
		results, err = bs.ReportBatch(ctx, ins)
	} else {
		for _, in := range ins {
			var r store.ReportResult
			r, err = e.st.Report(ctx, in)
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
			e.log.Warn("report batch: after report", "campaign", o.Campaign, "err", ferr)
		}
		outs = append(outs, o)
	}
	if err != nil {
		if k < len(idx) {
			e.invalidateReport(preps[idx[k]], store.ReportResult{})
		}
		return outs, fmt.Errorf("report %d: %w", len(outs), err)
	}
	return outs, prepErr
}

// dropUnverifiedInBatch removes from each report the band keys it shares
// with an earlier report of the batch whose sketch it does not verify, so
// that the store does not join them through an unverified LSH collision.
// It also holds links within the batch to the merge rule (merge.go), as
// if the earlier reports' campaigns were already stored: a report that
// matched no stored campaign and is linked to earlier reports of the
// batch through band keys only (an ANDD-only match) starts a campaign of
// its own when it has I-Match signatures (those band keys are dropped)
// and otherwise only counts on the campaign of such a report; one linked
// through I-Match keys keeps only the band keys it shares with reports it
// shares I-Match keys with, so that the store joins one of those. Links
// within a batch never merge campaigns.
func (e *Engine) dropUnverifiedInBatch(preps []*preparedReport) {
	owners := map[string][]int{}   // band key → earlier reports with it
	imOwners := map[string][]int{} // I-Match key → earlier reports with it
	for i, p := range preps {
		if p.skip {
			continue
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
		for _, k := range p.in.Keys[p.nIM:] {
			ok := true
			for _, j := range owners[string(k)] {
				if e.andd == nil || !p.hasSk || !e.batchJoinOK(preps[j], p) ||
					(len(imLinked) > 0 && !slices.Contains(imLinked, j)) {
					ok = false
					break
				}
			}
			if ok {
				keep = append(keep, k)
				if len(owners[string(k)]) > 0 {
					linked = append(linked, k)
				}
			}
		}
		p.in.Keys = keep
		switch {
		case p.in.Target != 0 || len(imLinked) > 0 || len(linked) == 0:
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
			p.in.Keys, p.in.Sketch = linked, nil
			p.in.Create, p.in.Index = false, false
			p.nIM = 0
			p.plan = reportPlan{VoteOnly: true, Why: voteANDDOnly}
		}
		if len(p.in.Keys) == 0 && p.in.Target == 0 && len(p.matched) == 0 {
			p.out.Skipped = "no usable signature (no I-Match signature; its ANDD band keys belong to other, dissimilar reports of the batch)"
			p.skip = true
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

func cosineOK(a, b andd.Sketch, threshold float64) bool {
	return andd.Cosine(a, b) >= threshold
}

// batchJoinOK says whether report p may share a band key with the earlier
// report j of the same batch (the store then joins their campaigns): the
// rule Report applies when j is already in the store — the cosine must
// reach the threshold and, when p has a mailing-list footer, hold without
// it unless p is an exact copy (confirmANDD).
func (e *Engine) batchJoinOK(j, p *preparedReport) bool {
	cos := andd.Cosine(j.sketch, p.sketch)
	if cos < e.threshold {
		return false
	}
	if p.body == nil || !p.body.hasFooter || cos >= exactCosine(p.sketch) {
		return true
	}
	return p.body.hasSketch && cosineOK(j.sketch, p.body.sketch, e.threshold)
}
