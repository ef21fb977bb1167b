package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"
)

// pendingHit accumulates RecordHit calls for one campaign between flushes.
type pendingHit struct {
	messages int64
	actions  map[string]int64
	lastSeen time.Time
	days     map[uint32]int64
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
		at = time.Now()
	}
	b.hitMu.Lock()
	defer b.hitMu.Unlock()
	p := b.hits[id]
	if p == nil {
		p = &pendingHit{actions: make(map[string]int64, 1), days: make(map[uint32]int64, 1)}
		b.hits[id] = p
	}
	p.messages++
	if action != "" {
		p.actions[action]++
	}
	p.lastSeen = maxTime(p.lastSeen, at)
	p.days[dayNumber(at)]++
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
	b.hitMu.Lock()
	pending := b.hits
	if len(pending) == 0 {
		b.hitMu.Unlock()
		return nil
	}
	b.hits = make(map[CampaignID]*pendingHit, len(pending))
	b.hitMu.Unlock()

	ids := make([]CampaignID, 0, len(pending))
	for id := range pending {
		ids = append(ids, id)
	}
	ctx := context.Background()
	for len(ids) > 0 {
		n := 0
		err := b.update(ctx, func(w *wtx) error {
			n = 0
			for _, id := range ids {
				if w.room() < 64 {
					break
				}
				n++
				if _, err := b.applyHits(w, id, pending[id]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("flush hit counters of %d campaigns: %w", len(ids), err)
		}
		ids = ids[n:]
	}
	return nil
}

// applyHits adds the hits p to campaign id inside w: the record's
// messages, actions and last seen and its daily counters. It is the one
// function that accounts hits, whoever counted them (RecordHit's buffer,
// another node of a fleet); found is false (and nothing is written) when
// the campaign no longer exists.
func (b *Badger) applyHits(w *wtx, id CampaignID, p *pendingHit) (found bool, err error) {
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
	for day, c := range p.days {
		if err := addDay(w, id, day, dayCounts{messages: c}, false); err != nil {
			return false, err
		}
	}
	return true, putRecord(w, r)
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
