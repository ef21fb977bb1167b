package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
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
// campaigns its committed transactions created.
type appliedMark struct {
	seq    uint64
	newIDs int
}

// WithApplied returns a context whose store writes apply the stream event
// seq (> 0): each transaction they commit also records seq as the applied
// sequence (Applied), and the campaigns they create get ids derived from
// seq, so that every node applying the same events makes the same ids.
func WithApplied(ctx context.Context, seq uint64) context.Context {
	return context.WithValue(ctx, appliedCtxKey{}, &appliedMark{seq: seq})
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

func appliedValue(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

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

// Applied returns the last stream sequence applied to the store (0: none).
func (b *Badger) Applied(ctx context.Context) (uint64, error) {
	var seq uint64
	err := b.view(func(txn *badger.Txn) error {
		item, err := txn.Get(appliedKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("applied sequence: %d bytes", len(v))
			}
			seq = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("fleet applied sequence: %w", err)
	}
	return seq, nil
}

// MarkApplied records seq as applied, for an event that changes nothing.
func (b *Badger) MarkApplied(ctx context.Context, seq uint64) error {
	if err := b.writable(); err != nil {
		return err
	}
	return b.update(WithApplied(ctx, seq), func(*wtx) error { return nil })
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
// applied the same events have the same hash.
func (b *Badger) StateHash(ctx context.Context) (string, error) {
	if !b.opts.ReadOnly {
		if err := b.flushHits(); err != nil {
			return "", err
		}
	}
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	err := b.view(func(txn *badger.Txn) error {
		for _, p := range replicated {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{p}, PrefetchValues: false})
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
		return "", fmt.Errorf("state hash: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
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
