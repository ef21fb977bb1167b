package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// What a fleet (internal/fleet) needs of the store: the applied stream
// sequence written in the same transaction as the change an event causes,
// campaign ids derived from that sequence, hit deltas counted by other
// nodes, a hash of the replicated state, and a durable outbox of events
// not yet published.

const (
	pfxFleet  = 'f' // 'f' + name → fleet value ("applied" → uint64 BE)
	pfxOutbox = 'o' // 'o' + uint64 BE → an event not yet published
)

var appliedKey = []byte{pfxFleet, 'a', 'p', 'p', 'l', 'i', 'e', 'd'}

// fleetIDBase is the first campaign id made from a stream sequence: ids
// are fleetIDBase + seq<<fleetIDBits + n (the n-th campaign an event
// creates), above any id a standalone store hands out and below 2^53, so
// that they stay exact in JSON numbers.
const (
	fleetIDBase = 1 << 52
	fleetIDBits = 12
	// MaxEventCampaigns is the most campaigns one stream event may create.
	MaxEventCampaigns = 1 << fleetIDBits
)

type appliedCtxKey struct{}

// appliedMark is the stream event a context applies, and how many
// campaigns its committed transactions created; round is set for a round
// of a report event (ForRound).
type appliedMark struct {
	seq    uint64
	newIDs int
	round  *Round
	// pending is the round's progress once the transaction being
	// written commits (nil: unchanged).
	pending *Progress
}

// withApplied returns a context whose store writes apply the stream event
// seq (> 0): each transaction they commit also records seq as the applied
// sequence (Applied), and the campaigns they create get ids derived from
// seq, so that every node applying the same events makes the same ids.
// Callers outside the store say so with ForEvent.
func withApplied(ctx context.Context, seq uint64) context.Context {
	return context.WithValue(ctx, appliedCtxKey{}, &appliedMark{seq: seq})
}

// Progress is how far the last stream event applied to the store got.
type Progress struct {
	// Seq is the event's stream sequence (0: none applied).
	Seq uint64
	// Partial is set when only the event's reports before Step are
	// applied, which created NewIDs campaigns; Drain, when set, is a
	// merge of a large campaign (Drain[0] into Drain[1]) begun after them
	// and not finished.
	Partial bool
	Step    int
	NewIDs  int
	Drain   [2]CampaignID
}

// Round is one round of applying a report event of a fleet's stream
// whose reports may take several transactions (internal/fleet): under a
// store made by ForRound, ReportBatch commits at most one transaction
// of reports, or finishes a merge of a large campaign, and records in it
// how far the event got (Progress). So a node killed between two
// transactions of an event resumes it where it stopped, and because each
// round's reports are matched against the store as the previous round
// left it, resuming gives the state an uninterrupted run gives.
type Round struct {
	// Progress is where the event stands; a round updates it as it
	// commits.
	Progress
	// Total is the number of reports of the event.
	Total int
	// Next is set by the caller of ReportBatch: Next[i] is the event's
	// Step once ins[i] is applied (the event's reports that the caller
	// skipped, storing nothing, count as applied along with the report
	// after them).
	Next []int
}

// ErrRoundAgain is returned by ReportBatch in a round when the round
// merged a large campaign and applied no report: the caller matches the
// reports again, against the merged campaign, in the next round.
var ErrRoundAgain = errors.New("store: a large merge done, no report applied: match the reports again")

// EventWriter is the store as one event of a fleet's stream writes it
// (ForEvent, ForRound): it reads as the store, and each transaction its
// writes commit also records the event as applied, in the same
// transaction, with campaign ids derived from the event's sequence.
type EventWriter struct {
	*Badger
	mark *appliedMark // shared by the event's transactions
}

// with is ctx carrying the event's mark to the store's transactions.
func (w *EventWriter) with(ctx context.Context) context.Context {
	return context.WithValue(ctx, appliedCtxKey{}, w.mark)
}

// ForEvent returns the store as stream event seq (> 0) writes it: each
// transaction also records seq as the applied sequence (Applied), and
// the campaigns created get ids derived from seq, so that every node
// applying the same events makes the same ids.
func (b *Badger) ForEvent(seq uint64) *EventWriter {
	return &EventWriter{Badger: b, mark: &appliedMark{seq: seq}}
}

// ForRound returns the store as a round of the report event r.Seq writes
// it: its ReportBatch is the round (see Round).
func (b *Badger) ForRound(r *Round) *EventWriter {
	return &EventWriter{Badger: b, mark: &appliedMark{seq: r.Seq, newIDs: r.NewIDs, round: r}}
}

// Report is Badger.Report as the event's.
func (w *EventWriter) Report(ctx context.Context, in ReportInput) (ReportResult, error) {
	return w.Badger.Report(w.with(ctx), in)
}

// ReportBatch is Badger.ReportBatch as the event's (in a round: Round).
func (w *EventWriter) ReportBatch(ctx context.Context, ins []ReportInput) ([]ReportResult, error) {
	return w.Badger.ReportBatch(w.with(ctx), ins)
}

// SetState is Badger.SetState as the event's.
func (w *EventWriter) SetState(ctx context.Context, id CampaignID, s State) error {
	return w.Badger.SetState(w.with(ctx), id, s)
}

// Delete is Badger.Delete as the event's.
func (w *EventWriter) Delete(ctx context.Context, id CampaignID) error {
	return w.Badger.Delete(w.with(ctx), id)
}

// Expire is Badger.Expire as the event's.
func (w *EventWriter) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	return w.Badger.Expire(w.with(ctx), cutoff)
}

// ApplyHits is Badger.ApplyHits as the event's.
func (w *EventWriter) ApplyHits(ctx context.Context, hits []HitDelta) error {
	return w.Badger.ApplyHits(w.with(ctx), hits)
}

// withoutApplied drops the applied sequence of ctx: for the transactions
// of a merge drain, which precede the report's own, atomic one.
func withoutApplied(ctx context.Context) context.Context {
	if appliedOf(ctx) == nil {
		return ctx
	}
	return context.WithValue(ctx, appliedCtxKey{}, (*appliedMark)(nil))
}

func appliedOf(ctx context.Context) *appliedMark {
	m, _ := ctx.Value(appliedCtxKey{}).(*appliedMark)
	return m
}

// appliedLen and partialLen are the lengths of the applied value: the
// sequence of an event applied whole, or with its progress.
const (
	appliedLen = 8
	partialLen = 8 + 4 + 4 + 8 + 8
)

func appliedValue(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// value is the applied value a transaction of w writes: the event's
// sequence, with its progress while a round leaves it partial.
func (m *appliedMark) value(newIDs int) []byte {
	if m.round == nil {
		return appliedValue(m.seq)
	}
	p := m.round.Progress
	if m.pending != nil {
		p = *m.pending
	}
	if !p.Partial {
		return appliedValue(m.seq)
	}
	b := make([]byte, 0, partialLen)
	b = binary.BigEndian.AppendUint64(b, m.seq)
	b = binary.BigEndian.AppendUint32(b, uint32(p.Step))
	b = binary.BigEndian.AppendUint32(b, uint32(newIDs))
	b = binary.BigEndian.AppendUint64(b, uint64(p.Drain[0]))
	return binary.BigEndian.AppendUint64(b, uint64(p.Drain[1]))
}

// committed updates the round's progress after a transaction of m
// committed (ok) or not.
func (m *appliedMark) committed(ok bool, newIDs int) {
	if ok {
		m.newIDs = newIDs
	}
	r := m.round
	if r == nil {
		m.pending = nil
		return
	}
	if ok {
		if m.pending != nil {
			r.Progress = *m.pending
		}
		r.NewIDs = newIDs
	}
	m.pending = nil
}

func decodeProgress(v []byte) (Progress, error) {
	switch len(v) {
	case appliedLen:
		return Progress{Seq: binary.BigEndian.Uint64(v)}, nil
	case partialLen:
		p := Progress{
			Seq: binary.BigEndian.Uint64(v), Partial: true,
			Step: int(binary.BigEndian.Uint32(v[8:])), NewIDs: int(binary.BigEndian.Uint32(v[12:])),
			Drain: [2]CampaignID{CampaignID(binary.BigEndian.Uint64(v[16:])), CampaignID(binary.BigEndian.Uint64(v[24:]))},
		}
		if p.Step > MaxEventCampaigns*16 || p.NewIDs > MaxEventCampaigns {
			return Progress{}, fmt.Errorf("applied progress out of range: step %d, %d ids", p.Step, p.NewIDs)
		}
		return p, nil
	}
	return Progress{}, fmt.Errorf("applied sequence: %d bytes", len(v))
}

// newID returns the id of a campaign created in w: derived from the
// applied sequence when w applies a stream event, else from the store's
// own sequence.
func (b *Badger) newID(w *wtx) (CampaignID, error) {
	m := w.applied
	if m == nil {
		return b.nextID()
	}
	if m.seq >= 1<<(52-fleetIDBits) || w.newIDs >= MaxEventCampaigns {
		return 0, fmt.Errorf("campaign id of stream event %d: out of range", m.seq)
	}
	id := CampaignID(fleetIDBase + m.seq<<fleetIDBits + uint64(w.newIDs))
	w.newIDs++
	return id, nil
}

// EventOf returns the stream sequence of the event that created campaign
// id in a fleet (ok false for an id of a standalone store).
func EventOf(id CampaignID) (seq uint64, ok bool) {
	if id < fleetIDBase {
		return 0, false
	}
	return uint64(id-fleetIDBase) >> fleetIDBits, true
}

// Applied returns the last stream sequence applied to the store, wholly
// or partly (0: none; see AppliedProgress).
func (b *Badger) Applied(ctx context.Context) (uint64, error) {
	p, err := b.AppliedProgress(ctx)
	return p.Seq, err
}

// AppliedProgress returns the last stream event applied to the store and
// how far it got.
func (b *Badger) AppliedProgress(ctx context.Context) (Progress, error) {
	var p Progress
	err := b.view(func(txn *badger.Txn) error {
		item, err := txn.Get(appliedKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			p, err = decodeProgress(v)
			return err
		})
	})
	if err != nil {
		return Progress{}, fmt.Errorf("fleet applied sequence: %w", err)
	}
	return p, nil
}

// MarkApplied records seq as applied, for an event that changes nothing.
func (b *Badger) MarkApplied(ctx context.Context, seq uint64) error {
	if err := b.writable(); err != nil {
		return err
	}
	return b.update(withApplied(ctx, seq), func(*wtx) error { return nil })
}

// HitDelta is a count of matched messages another node (or this one)
// recorded for a campaign: N messages in the hour starting at Hour, with
// action Action ("" unknown), the last at Last.
type HitDelta struct {
	Campaign CampaignID `json:"c"`
	Action   string     `json:"a,omitempty"`
	Hour     time.Time  `json:"h"`
	Last     time.Time  `json:"l"`
	N        int64      `json:"n"`
}

// ApplyHits adds hit deltas to their campaigns in one transaction,
// through the same accounting as RecordHit; deltas of campaigns that no
// longer exist are dropped. Nothing depends on the local clock.
func (b *Badger) ApplyHits(ctx context.Context, hits []HitDelta) error {
	if err := b.writable(); err != nil {
		return err
	}
	byID := make(map[CampaignID]*pendingHit, len(hits))
	var ids []CampaignID
	for _, h := range hits {
		if h.N <= 0 {
			continue
		}
		p := byID[h.Campaign]
		if p == nil {
			p = &pendingHit{}
			byID[h.Campaign] = p
			ids = append(ids, h.Campaign)
		}
		p.add(h.Action, h.Hour, h.Last, h.N)
	}
	err := b.update(ctx, func(w *wtx) error {
		for _, id := range ids {
			if _, err := b.applyHits(w, id, byID[id]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("apply hits of %d campaigns: %w", len(ids), err)
	}
	return nil
}

// replicated are the prefixes of the state every node of a fleet derives
// from the stream alone (node-local keys — ids sequence, fleet progress,
// outbox, local counters — are left out).
var replicated = []byte{pfxCampaign, pfxIndex, pfxKeyList, pfxReporter, pfxDay}

// StateHash returns a SHA-256 (hex) of the replicated campaign state:
// records, index, key lists, reporters and daily counters. Nodes that
// applied the same events have the same hash. Key lists are hashed as
// schema 2 stored them (one 'x' entry per key, in key order), whatever
// their chunks, and the index as schema 3 stored it (one 'k' entry per
// key, hashIndex): nodes of every schema have the same hash when they
// hold the same keys.
func (b *Badger) StateHash(ctx context.Context) (string, error) {
	h, _, err := b.StateHashAt(ctx)
	return h, err
}

// StateHashAt returns StateHash and the fleet progress it is the hash
// after, read in one transaction: two nodes whose hashes of the same
// whole event (Progress.Seq equal, neither Partial) differ hold
// different states from the same events.
func (b *Badger) StateHashAt(ctx context.Context) (string, Progress, error) {
	if !b.opts.ReadOnly {
		if err := b.flushHits(); err != nil {
			return "", Progress{}, err
		}
	}
	h := sha256.New()
	var (
		n [binary.MaxVarintLen64]byte
		p Progress
	)
	err := b.view(func(txn *badger.Txn) error {
		item, err := txn.Get(appliedKey)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			if err := item.Value(func(v []byte) error {
				p, err = decodeProgress(v)
				return err
			}); err != nil {
				return err
			}
		}
		for _, pfx := range replicated {
			if pfx == pfxKeyList {
				if err := hashKeyLists(ctx, txn, h); err != nil {
					return err
				}
				continue
			}
			if pfx == pfxIndex {
				if err := hashIndex(ctx, txn, h); err != nil {
					return err
				}
				continue
			}
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pfx}, PrefetchValues: false})
			for it.Rewind(); it.Valid(); it.Next() {
				if err := ctx.Err(); err != nil {
					it.Close()
					return err
				}
				item := it.Item()
				k := item.Key()
				h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
				h.Write(k)
				err := item.Value(func(v []byte) error {
					h.Write(n[:binary.PutUvarint(n[:], uint64(len(v)))])
					h.Write(v)
					return nil
				})
				if err != nil {
					it.Close()
					return err
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return "", Progress{}, fmt.Errorf("state hash: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), p, nil
}

// hashKeyLists writes into h every campaign's listed keys as the schema 2
// entries 'x' + id + key (empty value), in key order.
func hashKeyLists(ctx context.Context, txn *badger.Txn, h io.Writer) error {
	var n [binary.MaxVarintLen64]byte
	pfx := []byte{pfxKeyChunk}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx, PrefetchValues: true, PrefetchSize: 64})
	defer it.Close()
	var (
		cur  CampaignID
		keys [][]byte
	)
	flush := func() {
		slices.SortFunc(keys, bytes.Compare)
		keys = slices.CompactFunc(keys, bytes.Equal)
		for _, k := range keys {
			e := append(idKey(pfxKeyList, cur), k...)
			h.Write(n[:binary.PutUvarint(n[:], uint64(len(e)))])
			h.Write(e)
			h.Write(n[:binary.PutUvarint(n[:], 0)])
		}
		keys = keys[:0]
	}
	for it.Rewind(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		item := it.Item()
		k := item.Key()
		if len(k) != 17 {
			continue
		}
		id := CampaignID(binary.BigEndian.Uint64(k[1:]))
		if id != cur {
			flush()
			cur = id
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		ks, _ := decodeKeyChunk(v) // a malformed chunk lists nothing
		keys = append(keys, ks...)
	}
	flush()
	return nil
}

// OutboxItem is an event waiting in the outbox.
type OutboxItem struct {
	ID   uint64
	Data []byte
}

func outboxKey(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{pfxOutbox}, id) }

// OutboxPut stores an event durably until OutboxDelete, and returns its
// outbox id (increasing).
func (b *Badger) OutboxPut(ctx context.Context, data []byte) (uint64, error) {
	if err := b.writable(); err != nil {
		return 0, err
	}
	id, err := b.nextID() // unique and increasing; its gaps do not matter
	if err != nil {
		return 0, err
	}
	err = b.update(withoutApplied(ctx), func(w *wtx) error { return w.set(outboxKey(uint64(id)), data) })
	if err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	return uint64(id), nil
}

// OutboxList returns up to max queued events, oldest first, and how many
// are queued in all.
func (b *Badger) OutboxList(ctx context.Context, max int) ([]OutboxItem, int, error) {
	var out []OutboxItem
	total := 0
	err := b.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pfxOutbox}, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			total++
			if len(out) >= max {
				continue
			}
			item := it.Item()
			k := item.Key()
			if len(k) != 9 {
				continue
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			out = append(out, OutboxItem{ID: binary.BigEndian.Uint64(k[1:]), Data: v})
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("outbox: %w", err)
	}
	return out, total, nil
}

// OutboxDelete removes published events from the outbox.
func (b *Badger) OutboxDelete(ctx context.Context, ids ...uint64) error {
	if err := b.writable(); err != nil {
		return err
	}
	err := b.update(withoutApplied(ctx), func(w *wtx) error {
		for _, id := range ids {
			if err := w.del(outboxKey(id)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// DropOutbox empties the outbox: after restoring another node's snapshot,
// whose outbox is not this node's.
func (b *Badger) DropOutbox() error {
	if err := b.writable(); err != nil {
		return err
	}
	if err := b.db.DropPrefix([]byte{pfxOutbox}); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}
