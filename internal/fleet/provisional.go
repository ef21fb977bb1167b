package fleet

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Provisional reports: a report taken while the stream is unreachable
// waits in the outbox, and reaches the store only once the stream orders
// it. Meanwhile it protects the host that took it: its report events are
// also ingested into an in-memory store of their own, which the engine's
// checks consult for a message the store has no campaign of
// (campaign.Provisional). An event leaves it once this node applies the
// event from the stream (or skips it). The node's store, and so its state
// hash, never sees a provisional report.
type provisional struct {
	log *slog.Logger

	mu     sync.RWMutex
	order  []string                 // event ids, in the order they were queued
	events map[string][]eventReport // queued report events not applied here yet
	st     *store.Badger            // their reports; nil when none
	eng    *campaign.Engine
}

func newProvisional(log *slog.Logger) *provisional {
	return &provisional{log: log, events: make(map[string][]eventReport)}
}

// add holds a queued report event's reports; base is the node's engine
// (its signers and policy).
func (p *provisional) add(base *campaign.Engine, ev *event) {
	if p == nil || ev.Type != evReport || len(ev.Reports) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.events[ev.ID]; ok {
		return
	}
	p.events[ev.ID] = slices.Clone(ev.Reports)
	p.order = append(p.order, ev.ID)
	p.rebuild(base)
}

// applied drops the event of id, which the node applied from the stream
// (or skipped); true when it held it.
func (p *provisional) applied(base *campaign.Engine, id string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.events[id]; !ok {
		return false
	}
	delete(p.events, id)
	p.order = slices.DeleteFunc(p.order, func(s string) bool { return s == id })
	p.rebuild(base)
	return true
}

// len is the number of provisional events.
func (p *provisional) len() int {
	if p == nil {
		return 0
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.order)
}

// rebuild ingests the held events into a new in-memory store (few: only
// while the stream is unreachable). The caller holds p.mu.
func (p *provisional) rebuild(base *campaign.Engine) {
	if p.st != nil {
		p.st.Close()
		p.st, p.eng = nil, nil
	}
	if len(p.order) == 0 || base == nil {
		return
	}
	st, err := store.Open("", store.Options{InMemory: true, Expiry: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		p.log.Warn("fleet: provisional reports", "err", err)
		return
	}
	eng := campaign.Sibling(base, st)
	var reqs []campaign.ReportRequest
	for _, id := range p.order {
		for _, r := range p.events[id] {
			req := campaign.ReportRequest{Evidence: r.Evidence, Raw: r.Raw, Kind: r.Kind, Reporter: r.Reporter}
			if r.ReporterHash != "" {
				req.Reporter, req.ReporterHashed = r.ReporterHash, true
			}
			reqs = append(reqs, req)
		}
	}
	// One at a time: a report that fails leaves the others in.
	for _, r := range reqs {
		if _, err := eng.Ingester.ReportBatch(context.Background(), []campaign.ReportRequest{r}); err != nil {
			p.log.Debug("fleet: a provisional report not taken", "err", err)
		}
	}
	p.st, p.eng = st, eng
}

// Verdict implements campaign.Provisional.
func (p *provisional) Verdict(ctx context.Context, m *pipeline.Message, o campaign.CheckOptions) (campaign.Verdict, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.eng == nil {
		return campaign.Verdict{}, false
	}
	v, err := p.eng.Checker.DecideSigned(ctx, m, o)
	if err != nil || v.Campaign == 0 {
		return campaign.Verdict{}, false
	}
	return v, true
}

// close drops the provisional store.
func (p *provisional) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st != nil {
		p.st.Close()
		p.st, p.eng = nil, nil
	}
}
