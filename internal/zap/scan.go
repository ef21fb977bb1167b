package zap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/store"
)

// hot reports whether a campaign's copies are purged: it is active and
// what the policy does with an exact copy reaches the trigger. Allowed
// and revoked campaigns never are.
func (p *Purger) hot(c *store.Campaign) (bool, action.Action) {
	a := p.c.ExactCopy(c).Action
	return c.State == store.StateActive && a >= p.o.Trigger, a
}

// Scan looks at the campaigns that changed since the last scan and at
// those triggered before: a campaign that reached the trigger makes the
// ledger be matched again (all of it), as does one triggered that grew
// (at most every RematchInterval), and the first scan after a start
// while one is triggered; one that left the trigger gets its moves
// undone. While some campaign is triggered, the entries recorded since
// the last scan are matched too (copies accepted while it escalated).
func (p *Purger) Scan(ctx context.Context) error {
	first := p.lastScan.IsZero()
	escalated, triggered, err := p.scanMarks(ctx)
	if err != nil {
		return err
	}
	now := p.o.Clock()
	gap := max(p.o.RematchInterval, 10*p.fullTook)
	switch {
	case escalated, triggered && first, triggered && p.grown && now.Sub(p.lastFull) >= gap:
		// A campaign reached the trigger; or, after a start, one was
		// there already; or one there grew: the whole ledger.
		p.grown, p.lastFull = false, now
		t0 := time.Now()
		err := p.rematch(ctx, ledger.Key{})
		p.fullTook = time.Since(t0)
		return err
	case triggered:
		cur, err := p.l.Cursor()
		if err != nil {
			return err
		}
		return p.rematch(ctx, cur)
	}
	return nil
}

// scanMarks updates the purge state of the campaigns that changed since
// the last scan and of those triggered or held before; it says whether
// one escalated and whether any is triggered.
func (p *Purger) scanMarks(ctx context.Context) (escalated, triggered bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.o.Clock()
	marks, err := p.l.Marks()
	if err != nil {
		return false, false, err
	}
	seen := map[store.CampaignID]bool{}
	var cs []store.Campaign
	since := p.lastScan.Add(-time.Minute)
	if p.lastScan.IsZero() {
		since = time.Time{}
	}
	for off := 0; ; off += store.MaxListLimit {
		page, err := p.c.List(ctx, store.Query{Since: since, Sort: store.SortRecent, Limit: store.MaxListLimit, Offset: off})
		if err != nil {
			return false, false, fmt.Errorf("zap: list campaigns: %w", err)
		}
		cs = append(cs, page...)
		if len(page) < store.MaxListLimit {
			break
		}
	}
	for id, m := range marks {
		if (m.Triggered.IsZero() && !m.Held()) || slices.ContainsFunc(cs, func(c store.Campaign) bool { return uint64(c.ID) == id }) {
			continue
		}
		c, err := p.c.Get(ctx, store.CampaignID(id))
		if errors.Is(err, store.ErrNotFound) {
			continue // expired or merged: what was moved stays
		}
		if err != nil {
			return false, false, err
		}
		cs = append(cs, *c)
	}
	for i := range cs {
		c := &cs[i]
		if seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		hot, a := p.hot(c)
		m := marks[uint64(c.ID)]
		switch {
		case hot && m.Held():
			// Undone by hand: not purged again until it leaves the
			// trigger and reaches it anew.
		case !hot && m.Held():
			m.HeldBy = ""
			if err := p.l.SetMark(uint64(c.ID), m); err != nil {
				return false, false, err
			}
			marks[uint64(c.ID)] = m
			p.log.Info("zap: campaign whose purge was undone left the trigger: purged again if it reaches it anew", "campaign", c.ID)
		case hot && !m.Triggered.IsZero():
			if g, ok := p.seen[c.ID]; ok && g != growthOf(c) {
				p.grown = true
			}
			p.seen[c.ID] = growthOf(c)
		case hot && m.Triggered.IsZero():
			escalated = true
			p.seen[c.ID] = growthOf(c)
			m.Triggered, m.Action = now, a.String()
			if err := p.l.SetMark(uint64(c.ID), m); err != nil {
				return false, false, err
			}
			marks[uint64(c.ID)] = m
			p.log.Info("zap: campaign reached the trigger", "campaign", c.ID, "action", a.String(), "trigger", p.o.Trigger.String())
		case !hot && !m.Triggered.IsZero():
			delete(p.seen, c.ID)
			if err := p.undoCampaign(ctx, c, a, m, now); err != nil {
				return false, false, err
			}
			delete(marks, uint64(c.ID))
		}
	}
	for _, m := range marks {
		triggered = triggered || !m.Triggered.IsZero()
	}
	p.lastScan = now
	return escalated, triggered, nil
}

// undoCampaign moves back what the campaign's jobs moved, and marks it
// no longer triggered.
func (p *Purger) undoCampaign(ctx context.Context, c *store.Campaign, a action.Action, m ledger.Mark, now time.Time) error {
	why := "state " + stateName(c.State)
	if c.State == store.StateActive {
		why = "verdict " + a.String() + " below the trigger"
	}
	p.log.Info("zap: campaign left the trigger: moving back", "campaign", c.ID, "why", why)
	m.Triggered, m.Undone, m.Action = time.Time{}, now, a.String()
	if err := p.l.SetMark(uint64(c.ID), m); err != nil {
		return err
	}
	_, err := p.Undo(ctx, uint64(c.ID))
	return err
}

func stateName(s store.State) string {
	switch s {
	case store.StateAllowed:
		return "allowed"
	case store.StateRevoked:
		return "revoked"
	}
	return "active"
}

// Undo queues the moving back of what campaign c's jobs moved (each once)
// and returns how many undo jobs it made.
func (p *Purger) Undo(ctx context.Context, c uint64) (int, error) {
	return undoJobs(p.l, c, p.o.Clock())
}

// undoJobs queues the moving back of what campaign c's move jobs moved
// (each once) and returns how many undo jobs it made.
func undoJobs(l *ledger.Ledger, c uint64, now time.Time) (int, error) {
	jobs, err := l.CampaignJobs(c)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, j := range jobs {
		if j.Kind != ledger.Move || j.Outcome != ledger.Moved {
			continue
		}
		switch err := l.AddJob(undoOf(j, now)); {
		case errors.Is(err, ledger.ErrJobExists):
		case err != nil:
			return n, err
		default:
			n++
		}
	}
	return n, nil
}

// undoOf is the undo job of a move job that moved.
func undoOf(j ledger.Job, now time.Time) ledger.Job {
	return ledger.Job{ID: ledger.MakeJobID(ledger.Undo, j.Entry, j.User), Kind: ledger.Undo, Entry: j.Entry, Campaign: j.Campaign,
		User: j.User, Rcpt: j.Rcpt, MessageID: j.MessageID, Delivered: j.Delivered, Created: now, Next: now,
		From: j.From, To: j.To, Of: j.ID}
}

// rematch matches the entries after from against the campaigns as they
// are now; each that a check would now act on at the trigger or above
// becomes a move job per recipient.
func (p *Purger) rematch(ctx context.Context, from ledger.Key) error {
	var last ledger.Key
	type hit struct {
		e ledger.Entry
		c store.CampaignID
	}
	var hits []hit
	err := p.l.Scan(ctx, from, func(e ledger.Entry) (bool, error) {
		last = e.Key
		v, err := p.c.MatchEvidence(ctx, e.Evidence, e.Signs)
		if err != nil {
			p.log.Warn("zap: entry not matched", "entry", e.Key.String(), "err", err)
			return true, nil
		}
		if v.Campaign != 0 && v.Action >= p.o.Trigger {
			e.Evidence = append([]byte(nil), e.Evidence...)
			e.Rcpts = slices.Clone(e.Rcpts)
			hits = append(hits, hit{e, v.Campaign})
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("zap: match the ledger: %w", err)
	}
	for _, h := range hits {
		if err := p.jobs(ctx, h.e, uint64(h.c)); err != nil {
			return err
		}
	}
	if last != (ledger.Key{}) {
		return p.l.SetCursor(last)
	}
	return nil
}

// jobs makes the move jobs of an entry that matched campaign c.
func (p *Purger) jobs(ctx context.Context, e ledger.Entry, c uint64) error {
	if ok, err := p.markTriggered(c); !ok || err != nil {
		return err // its purge was undone by hand
	}
	ambiguous, err := p.ambiguous(ctx, e)
	if err != nil {
		return err
	}
	now := p.o.Clock()
	for _, r := range e.Rcpts {
		user := p.o.UserMap(r)
		j := ledger.Job{Kind: ledger.Move, Entry: e.Key, Campaign: c, User: user, Rcpt: r, MessageID: e.MessageID,
			Delivered: e.Time, Created: now, Next: now}
		j.ID = ledger.MakeJobID(ledger.Move, e.Key, user)
		switch {
		case user == "":
			j.ID = ledger.MakeJobID(ledger.Move, e.Key, "rcpt:"+r)
			j.Status, j.Outcome, j.Reason = ledger.Done, ledger.Skipped, "no mailbox user for the recipient"
		case e.Unpurgeable != "":
			j.Status, j.Outcome, j.Reason = ledger.Done, ledger.Skipped, "unpurgeable: "+e.Unpurgeable
		case ambiguous[r]:
			j.Status, j.Outcome, j.Reason = ledger.Done, ledger.Skipped, "ambiguous: the Message-ID of another message to the recipient"
		}
		err := p.l.AddJob(j)
		if errors.Is(err, ledger.ErrJobExists) {
			continue // made before: never twice
		}
		if err != nil {
			return err
		}
		if j.Status == ledger.Done {
			// Stored pending by AddJob: finish it at once.
			j.Status, j.Finished = ledger.Done, now
			if err := p.finish(j); err != nil {
				return err
			}
		}
	}
	if n := e.RcptCount - len(e.Rcpts); n > 0 {
		p.log.Warn("zap: recipients beyond the ledger's bound are not purged", "entry", e.Key.String(), "campaign", c, "left", n)
	}
	return nil
}

// markTriggered marks campaign c triggered when it is not (a campaign
// below the trigger whose copy matches at it, or one the scan has not
// seen yet), and says whether its copies are purged: not when its purge
// was undone by hand.
func (p *Purger) markTriggered(c uint64) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, err := p.l.GetMark(c)
	switch {
	case err != nil:
		return false, err
	case m.Held():
		return false, nil
	case m.Triggered.IsZero():
		m.Triggered = p.o.Clock()
		if err := p.l.SetMark(c, m); err != nil {
			return false, err
		}
	}
	return true, nil
}

// ambiguous finds the recipients of e to whom another entry with the
// same Message-ID, which a check would not act on now, was delivered:
// their copy cannot be told from that message by its id.
func (p *Purger) ambiguous(ctx context.Context, e ledger.Entry) (map[string]bool, error) {
	if e.Unpurgeable != "" {
		return nil, nil
	}
	keys, err := p.l.SameMessageID(e.MessageID)
	if err != nil || len(keys) < 2 {
		return nil, err
	}
	out := map[string]bool{}
	for _, k := range keys {
		if k == e.Key {
			continue
		}
		o, err := p.l.Get(k)
		if err != nil || o.MessageID != e.MessageID {
			continue // evicted meanwhile, or another id with the same hash
		}
		v, err := p.c.MatchEvidence(ctx, o.Evidence, o.Signs)
		if err == nil && v.Action >= p.o.Trigger {
			continue // also taken back: no ambiguity
		}
		for _, r := range o.Rcpts {
			if slices.Contains(e.Rcpts, r) {
				out[r] = true
			}
		}
	}
	return out, nil
}
