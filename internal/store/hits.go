package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// pendingHit accumulates hits of one campaign: RecordHit's between
// flushes, or a batch of hits counted elsewhere (another node of a
// fleet), for applyHits.
type pendingHit struct {
	messages int64
	actions  map[string]int64
	lastSeen time.Time
	hours    map[uint32]*pendingHour
}

// pendingHour is one hour of a pendingHit.
type pendingHour struct {
	messages, acted int64
	actions         map[string]int64
}

// add counts n messages that matched in the hour of at (the last at last)
// and on which action was taken ("" when unknown). Whoever counts hits
// (RecordHit, a fleet's deltas) fills a pendingHit with add and hands it
// to applyHits.
func (p *pendingHit) add(action string, at, last time.Time, n int64) {
	if p.actions == nil {
		p.actions = make(map[string]int64, 1)
	}
	if p.hours == nil {
		p.hours = make(map[uint32]*pendingHour, 1)
	}
	p.messages += n
	p.lastSeen = maxTime(p.lastSeen, last)
	h := hourNumber(at)
	ph := p.hours[h]
	if ph == nil {
		ph = &pendingHour{actions: make(map[string]int64, 1)}
		p.hours[h] = ph
	}
	ph.messages += n
	if action != "" {
		p.actions[action] += n
		ph.actions[action] += n
		if action != "accept" {
			ph.acted += n
		}
	}
}

// RecordHit counts a matched message and the action taken and refreshes
// LastSeen. Counts are buffered in memory and written in one transaction
// every HitFlushInterval and at Close, so a crash loses at most that
// interval's counts (never a report).
func (b *Badger) RecordHit(ctx context.Context, id CampaignID, action string, at time.Time) error {
	if err := b.writable(); err != nil {
		return err
	}
	if at.IsZero() {
		at = b.now()
	}
	b.hitMu.Lock()
	defer b.hitMu.Unlock()
	p := b.hits[id]
	if p == nil {
		p = &pendingHit{}
		b.hits[id] = p
	}
	p.add(action, at, at, 1)
	return nil
}

// RecordCheck counts a checked message that matched no campaign, and the
// action taken on it, in the hourly totals (Totals). Matched messages are
// counted by RecordHit. It is buffered like RecordHit. On a store open
// read-only (a full disk at start) the count is dropped without an error:
// it is statistics, and every message would report it.
func (b *Badger) RecordCheck(ctx context.Context, action string, at time.Time) error {
	if b.opts.ReadOnly {
		return nil
	}
	if err := b.writable(); err != nil {
		return err
	}
	if at.IsZero() {
		at = b.now()
	}
	b.hitMu.Lock()
	defer b.hitMu.Unlock()
	h := hourNumber(at)
	t := b.checks[h]
	if t == nil {
		t = &HourTotal{Hour: hourTime(h)}
		b.checks[h] = t
	}
	t.Checked++
	if action != "" {
		if t.Actions == nil {
			t.Actions = make(map[string]int64, 1)
		}
		t.Actions[action]++
	}
	return nil
}

// FlushHits writes the buffered hit counts now.
func (b *Badger) FlushHits(ctx context.Context) error {
	if err := b.writable(); err != nil {
		return err
	}
	return b.flushHits()
}

func (b *Badger) flushHits() error {
	if _, full, _ := b.disk.state(); full {
		// Kept in memory (one entry per campaign hit) until space returns.
		return nil
	}
	if err := b.flushHamTable(context.Background()); err != nil {
		return err
	}
	if err := b.flushSenders(context.Background()); err != nil {
		return err
	}
	b.hitMu.Lock()
	pending, checks := b.hits, b.checks
	if len(pending) == 0 && len(checks) == 0 {
		b.hitMu.Unlock()
		return nil
	}
	b.hits = make(map[CampaignID]*pendingHit, len(pending))
	b.checks = make(map[uint32]*HourTotal, len(checks))
	b.hitMu.Unlock()

	ids := slices.Collect(maps.Keys(pending))
	// The first transaction also adds the check totals (one even with
	// no campaign hit).
	_, err := b.updateEach(context.Background(), max(len(ids), 1), 128, func(w *wtx, i int) error {
		if i == 0 {
			for h, t := range checks {
				w.hourTotal(h).add(t)
			}
		}
		if i >= len(ids) {
			return nil
		}
		_, err := b.applyHits(w, ids[i], pending[ids[i]])
		return err
	})
	if err != nil {
		return fmt.Errorf("flush hit counters of %d campaigns: %w", len(ids), err)
	}
	return nil
}

// applyHits adds the hits p to campaign id inside w: the record's
// messages, actions and last seen, its daily and hourly counters, its
// place in the windowed rankings (at the store's clock), and the hourly
// totals of matched messages and actions. It is the one function that
// accounts hits, whoever counted them; found is false (and nothing is
// written) when the campaign no longer exists.
func (b *Badger) applyHits(w *wtx, id CampaignID, p *pendingHit) (found bool, err error) {
	now := hourNumber(b.now())
	r, err := getRecord(w.txn, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil // deleted, expired or merged meanwhile
	}
	if err != nil {
		return false, err
	}
	r.Messages += p.messages
	if len(p.actions) > 0 && r.Actions == nil {
		r.Actions = make(map[string]int64, len(p.actions))
	}
	for a, c := range p.actions {
		r.Actions[a] += c
	}
	r.LastSeen = maxTime(r.LastSeen, p.lastSeen)
	days := make(map[uint32]int64, 1)
	adds := make(map[uint32]int64, len(p.hours))
	for h, ph := range p.hours {
		days[h/24] += ph.messages
		adds[h] = ph.messages
		if err := addHour(w, id, h, hourCounts{messages: ph.messages, acted: ph.acted}, false); err != nil {
			return false, err
		}
		w.hourTotal(h).addHits(ph)
	}
	for day, c := range days {
		if err := addDay(w, id, day, dayCounts{messages: c}, false); err != nil {
			return false, err
		}
	}
	if err := w.updateRanks(id, now, adds); err != nil {
		return false, err
	}
	return true, putRecord(w, r)
}

// addHits counts an hour of matched messages in the totals.
func (t *HourTotal) addHits(ph *pendingHour) {
	t.Checked += ph.messages
	t.Matched += ph.messages
	for a, c := range ph.actions {
		if t.Actions == nil {
			t.Actions = make(map[string]int64, len(ph.actions))
		}
		t.Actions[a] += c
	}
}

// addPending adds buffered hits to c (for Get).
func (b *Badger) addPending(c *Campaign) {
	b.hitMu.Lock()
	defer b.hitMu.Unlock()
	p := b.hits[c.ID]
	if p == nil {
		return
	}
	c.Messages += p.messages
	if len(p.actions) > 0 {
		a := make(map[string]int64, len(c.Actions)+len(p.actions))
		maps.Copy(a, c.Actions)
		for k, v := range p.actions {
			a[k] += v
		}
		c.Actions = a
	}
	c.LastSeen = maxTime(c.LastSeen, p.lastSeen)
}

// addPendingTotals adds buffered checks and hits of hours ≥ from to
// byHour (for Totals).
func (b *Badger) addPendingTotals(byHour map[uint32]*HourTotal, from uint32) {
	b.hitMu.Lock()
	defer b.hitMu.Unlock()
	get := func(h uint32) *HourTotal {
		if byHour[h] == nil {
			byHour[h] = &HourTotal{Hour: hourTime(h)}
		}
		return byHour[h]
	}
	for h, t := range b.checks {
		if h >= from {
			get(h).add(t)
		}
	}
	for _, p := range b.hits {
		for h, ph := range p.hours {
			if h < from {
				continue
			}
			get(h).addHits(ph)
		}
	}
}

func (b *Badger) hasPending(id CampaignID) bool {
	b.hitMu.Lock()
	defer b.hitMu.Unlock()
	return b.hits[id] != nil
}

func (b *Badger) dropPending(id CampaignID) {
	b.hitMu.Lock()
	defer b.hitMu.Unlock()
	delete(b.hits, id)
}
