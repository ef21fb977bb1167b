package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Lookup returns the campaigns of the given index keys, one Hit per key
// found, in the order of keys. The key index (keyindex.go) gives each
// key's candidates from memory; a campaign that only one of the keys
// found is verified against its key list (one read of its chunks, in a
// single read transaction). Empty and over-long keys are ignored.
func (b *Badger) Lookup(ctx context.Context, keys [][]byte) ([]Hit, error) {
	return b.LookupSketched(ctx, keys, len(keys))
}

// LookupSketched is Lookup for keys whose keys[exact:] are band keys of
// sketches (SketchLookup): a campaign only they found is returned without
// reading its key list, and the caller checks it against its sketches. A
// false candidate is a collision of keyed fingerprints of about 60 bits,
// which nobody can make without the store's secret; reading the key list
// of every band key's campaign would cost a read per message for nothing.
func (b *Badger) LookupSketched(ctx context.Context, keys [][]byte, exact int) ([]Hit, error) {
	if b.isClosed() {
		return nil, fmt.Errorf("lookup: %w", ErrClosed)
	}
	t := b.keys.table()
	type cand struct {
		i  int
		id CampaignID
	}
	var (
		buf   [16]cand
		cands = buf[:0]
		hbuf  [64]uint64
		hs    = hbuf[:0]
		ibuf  [64]int32
		idx   = ibuf[:0] // the index in keys of each of hs
	)
	for i, k := range keys {
		if len(k) == 0 || len(k) > MaxKeyLen {
			continue
		}
		hs = append(hs, t.hash(k))
		idx = append(idx, int32(i))
	}
	t.findAll(hs, func(j int, id CampaignID) { cands = append(cands, cand{int(idx[j]), id}) })
	if len(cands) == 0 {
		return nil, nil
	}
	// Verify, campaign by campaign, the campaigns one exact key alone
	// found. A campaign that two or more of the keys found needs no read:
	// each false candidate is a collision of keyed fingerprints of about
	// 60 bits (the shard and the in-shard fingerprint), so two on one
	// campaign do not happen, and nobody can make them without the
	// store's secret. Nor does one that only sketch keys found.
	ok := make([]bool, len(cands))
	var check []int // the first candidate of each campaign to verify
	for j, c := range cands {
		if slices.ContainsFunc(cands[:j], func(d cand) bool { return d.id == c.id }) {
			continue // decided with the first
		}
		// A key listed twice for one campaign (a damaged store) finds it
		// twice: only distinct keys count.
		several := slices.ContainsFunc(cands[j:], func(d cand) bool { return d.id == c.id && d.i != c.i })
		if !several && c.i < exact {
			check = append(check, j)
			continue
		}
		for l := j; l < len(cands); l++ {
			if cands[l].id == c.id {
				ok[l] = true
			}
		}
	}
	if len(check) > 0 {
		var (
			want  [][]byte
			found []bool
			at    []int
		)
		err := b.view(func(txn *badger.Txn) error {
			for _, j := range check {
				want, at = want[:0], at[:0]
				for l := j; l < len(cands); l++ {
					if cands[l].id == cands[j].id {
						want = append(want, keys[cands[l].i])
						at = append(at, l)
					}
				}
				found = append(found[:0], make([]bool, len(want))...)
				if err := verifyListed(txn, cands[j].id, want, found); err != nil {
					return err
				}
				for x, l := range at {
					ok[l] = found[x]
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("lookup: %w", err)
		}
	}
	var hits []Hit
	last := -1
	for j, c := range cands {
		// One hit per key: a key listed by two campaigns (a damaged
		// store, see Verify) counts for the first.
		if ok[j] && c.i != last {
			hits = append(hits, Hit{Key: keys[c.i], Campaign: c.id})
			last = c.i
		}
	}
	return hits, nil
}

// Get returns a campaign with its keys and sketches; ErrNotFound if it
// does not exist. Hits still buffered by RecordHit are included.
func (b *Badger) Get(ctx context.Context, id CampaignID) (*Campaign, error) {
	return b.get(id, true)
}

// Record is Get without the campaign's Keys (nil): one read, however
// many keys the campaign has.
func (b *Badger) Record(ctx context.Context, id CampaignID) (*Campaign, error) {
	return b.get(id, false)
}

func (b *Badger) get(id CampaignID, withKeys bool) (*Campaign, error) {
	var c *Campaign
	err := b.view(func(txn *badger.Txn) error {
		r, err := getRecord(txn, id)
		if err != nil {
			return err
		}
		if err := setWindows(txn, &r.Campaign, hourNumber(b.now())); err != nil {
			return err
		}
		if !withKeys {
			c = &r.Campaign
			return nil
		}
		if r.Keys, err = campaignKeys(txn, id); err != nil {
			return err
		}
		c = &r.Campaign
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.addPending(c)
	return c, nil
}

// forEachRecord calls f for every campaign record, in id order. Malformed
// records are logged and skipped (Verify reports them).
func (b *Badger) forEachRecord(ctx context.Context, f func(r *record) error) error {
	return b.view(func(txn *badger.Txn) error {
		pfx := []byte{pfxCampaign}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx, PrefetchValues: true, PrefetchSize: 256})
		defer it.Close()
		n := 0
		for it.Seek(pfx); it.ValidForPrefix(pfx); it.Next() {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			item := it.Item()
			k := item.Key()
			if len(k) != 9 {
				continue
			}
			id := CampaignID(binary.BigEndian.Uint64(k[1:]))
			var r *record
			err := item.Value(func(v []byte) error {
				var derr error
				r, derr = decodeRecord(id, v)
				return derr
			})
			if err != nil {
				b.log.Warn("store: skipping unreadable campaign record", "campaign", id, "err", err)
				continue
			}
			if err := f(r); err != nil {
				return err
			}
		}
		return nil
	})
}

// Timeline returns the campaign's daily counters, oldest first.
func (b *Badger) Timeline(ctx context.Context, id CampaignID) ([]DayCount, error) {
	var out []DayCount
	err := b.view(func(txn *badger.Txn) error {
		if _, err := getRecord(txn, id); err != nil {
			return err
		}
		_, err := scanPrefix(txn, idKey(pfxDay, id), true, 0, func(s, v []byte) error {
			if len(s) != 4 {
				return nil
			}
			c, err := decodeDay(v)
			if err != nil {
				return nil
			}
			day := time.Unix(int64(binary.BigEndian.Uint32(s))*86400, 0).UTC()
			out = append(out, DayCount{Day: day, Messages: c.messages, SpamReports: c.spam, HamReports: c.ham})
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	return out, nil
}

// SetState changes the administrative state of a campaign.
func (b *Badger) SetState(ctx context.Context, id CampaignID, s State) error {
	if err := b.writable(); err != nil {
		return err
	}
	if s > StateRevoked {
		return fmt.Errorf("set state: unknown state %d", s)
	}
	err := b.update(ctx, func(w *wtx) error {
		r, err := getRecord(w.txn, id)
		if err != nil {
			return err
		}
		r.State = s
		return putRecord(w, r)
	})
	if err != nil {
		return fmt.Errorf("set state: %w", err)
	}
	return nil
}

// Delete removes a campaign and every key of it: record, index keys, key
// list, reporters and daily counters. A very large campaign is deleted in
// several transactions, each leaving the store consistent.
func (b *Badger) Delete(ctx context.Context, id CampaignID) error {
	if err := b.writable(); err != nil {
		return err
	}
	_, err := b.deleteCampaign(ctx, id, nil)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

// deleteCampaign deletes id if cond (nil: always) holds for its record.
// It reports whether the campaign was deleted.
func (b *Badger) deleteCampaign(ctx context.Context, id CampaignID, cond func(*record) bool) (bool, error) {
	for first := true; ; first = false {
		deleted, stop := false, false
		err := b.updateIndex(ctx, 0, 0, func(w *wtx) error {
			deleted, stop = false, false
			r, err := getRecord(w.txn, id)
			if errors.Is(err, ErrNotFound) && !first {
				stop = true // deleted concurrently
				return nil
			}
			if err != nil {
				return err
			}
			if cond != nil && !cond(r) {
				stop = true
				return nil
			}
			limit := txnBudgetEntries / 2
			n := 0
			chunks, more, err := listChunks(w.txn, id, limit)
			if err != nil {
				return err
			}
			for _, c := range chunks {
				if err := w.del(keyChunkKey(id, c.n)); err != nil {
					return err
				}
				n++
				for _, k := range c.keys {
					w.dropIndex(k, id)
					r.numKeys--
					n++
				}
			}
			if more {
				n = max(n, limit)
			}
			for _, p := range []byte{pfxReporter, pfxDay, pfxHour} {
				if n >= limit {
					break
				}
				es, err := collectPrefix(w.txn, idKey(p, id), false, limit-n)
				if err != nil {
					return err
				}
				for _, e := range es {
					if err := w.del(append(idKey(p, id), e.k...)); err != nil {
						return err
					}
					if p == pfxReporter && len(e.k) == 9 {
						if err := w.del(reporterCampKey(binary.BigEndian.Uint64(e.k[1:]), id, Kind(e.k[0]))); err != nil {
							return err
						}
					}
				}
				n += len(es)
			}
			if n >= limit {
				return putRecord(w, r) // more to do in the next transaction
			}
			deleted = true
			return delRecord(w, r)
		})
		if err != nil {
			return false, err
		}
		if deleted || stop {
			if deleted {
				b.dropPending(id)
			}
			return deleted, nil
		}
	}
}
