package store

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// List returns the page of campaigns q selects, read from the ranking
// indexes (index.go, hours.go): Offset+Limit index entries and Limit
// records at most (a Since filter on an order other than recency walks
// the recency index beside it and stops with whichever walk finishes
// first). Keys are left nil (Get fills them).
func (b *Badger) List(ctx context.Context, q Query) ([]Campaign, error) {
	limit, offset := q.Page()
	since := unixNano(q.Since)
	now := hourNumber(b.now())
	var out []Campaign
	err := b.view(func(txn *badger.Txn) error {
		var ids []CampaignID
		var err error
		switch q.Sort {
		case "", SortRecent:
			ids, err = walkRecent(txn, since, offset, limit)
		case SortVolume, SortReports, SortHam:
			ids, err = walkRanked(ctx, txn, q.Sort, since, offset, limit)
		case SortHour, SortDay:
			pfx := byte(pfxRankHour)
			if q.Sort == SortDay {
				pfx = pfxRankDay
			}
			var rs []ranked
			rs, err = listWindow(txn, pfx, offset, limit, now)
			for _, r := range rs {
				ids = append(ids, r.id)
			}
		default:
			return fmt.Errorf("unknown sort %q (want recent, volume, reports, hour, day or ham)", q.Sort)
		}
		if err != nil {
			return err
		}
		out = make([]Campaign, 0, len(ids))
		for _, id := range ids {
			r, err := getRecord(txn, id)
			if errors.Is(err, ErrNotFound) {
				continue // an entry without its record: Verify reports it
			}
			if err != nil {
				return err
			}
			if err := setWindows(txn, &r.Campaign, now); err != nil {
				return err
			}
			out = append(out, r.Campaign)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list campaigns: %w", err)
	}
	for i := range out {
		b.addPending(&out[i])
	}
	return out, nil
}

// setWindows sets c's window counts from its ring at hour now.
func setWindows(txn *badger.Txn, c *Campaign, now uint32) error {
	r, found, err := readRing(txn, c.ID)
	if err != nil || !found {
		return err
	}
	c.HourMessages, c.DayMessages = r.at(now)
	return nil
}

// walkRecent returns the ids of page (offset, limit) of the recency index,
// down to last seen since (unix ns).
func walkRecent(txn *badger.Txn, since int64, offset, limit int) ([]CampaignID, error) {
	var ids []CampaignID
	pfx := []byte{pfxRecent}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx})
	defer it.Close()
	n := 0
	for it.Seek(pfx); it.ValidForPrefix(pfx) && len(ids) < limit; it.Next() {
		k := it.Item().Key()
		if len(k) != 17 {
			continue
		}
		if int64(^binary.BigEndian.Uint64(k[1:9])) < since {
			break
		}
		if n++; n > offset {
			ids = append(ids, idOfEntry(k))
		}
	}
	return ids, nil
}

// rankedOf is the order of sort among ranked candidates read from the
// recency index: the larger first, ties by ascending id.
type cand struct {
	id   CampaignID
	a, b int64
}

func cmpCand(x, y cand) int {
	return cmp.Or(cmp.Compare(y.a, x.a), cmp.Compare(y.b, x.b), cmp.Compare(x.id, y.id))
}

// walkRanked returns page (offset, limit) of the volume, reports or ham
// index among campaigns last seen at or after since. Without since it
// reads the index alone. With since it walks two ways in lockstep and
// answers with the first to finish, both exact: the ranked index,
// skipping campaigns seen before since (fast when most are recent), and
// the recency index down to since, keeping the best offset+limit (fast
// when few are).
func walkRanked(ctx context.Context, txn *badger.Txn, sort string, since int64, offset, limit int) ([]CampaignID, error) {
	pfx := map[string]byte{SortVolume: pfxVolume, SortReports: pfxReports, SortHam: pfxHam}[sort]
	k := offset + limit
	var fromIndex []CampaignID
	p := []byte{pfx}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: since > 0})
	defer it.Close()
	it.Seek(p)
	indexDone := func() bool { return len(fromIndex) >= k || !it.ValidForPrefix(p) }
	stepIndex := func() error {
		item := it.Item()
		if since > 0 {
			var seen int64
			if err := item.Value(func(v []byte) error { seen = decodeSeen(v); return nil }); err != nil {
				return err
			}
			if seen < since {
				it.Next()
				return nil
			}
		}
		fromIndex = append(fromIndex, idOfEntry(item.Key()))
		it.Next()
		return nil
	}
	if since <= 0 {
		for !indexDone() {
			if err := stepIndex(); err != nil {
				return nil, err
			}
		}
		return page(fromIndex, offset), nil
	}
	// The recency walk (ham needs the record: its counts are not in the
	// recency index).
	rp := []byte{pfxRecent}
	rit := txn.NewIterator(badger.IteratorOptions{Prefix: rp, PrefetchValues: true})
	defer rit.Close()
	rit.Seek(rp)
	var best []cand
	recentDone := false
	stepRecent := func() error {
		if !rit.ValidForPrefix(rp) {
			recentDone = true
			return nil
		}
		item := rit.Item()
		var (
			seen, msgs, sr, srs int64
			ok                  bool
		)
		err := item.Value(func(v []byte) error {
			seen, msgs, sr, srs, ok = recentEntry(item.Key(), v)
			return nil
		})
		if err != nil {
			return err
		}
		if ok && seen < since {
			recentDone = true
			return nil
		}
		id := idOfEntry(item.Key())
		rit.Next() // item is invalid from here on
		if !ok {
			return nil
		}
		var c cand
		switch sort {
		case SortVolume:
			c = cand{id, msgs, 0}
		case SortReports:
			c = cand{id, sr, srs}
		case SortHam:
			r, err := getRecord(txn, id)
			if err != nil || r.HamReports == 0 {
				return nil
			}
			c = cand{id, r.HamReporters, r.HamReports}
		}
		i, _ := slices.BinarySearchFunc(best, c, cmpCand)
		if i < k {
			best = slices.Insert(best, i, c)
			if len(best) > k {
				best = best[:k]
			}
		}
		return nil
	}
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if indexDone() {
			return page(fromIndex, offset), nil
		}
		if err := stepIndex(); err != nil {
			return nil, err
		}
		if err := stepRecent(); err != nil {
			return nil, err
		}
		if recentDone {
			ids := make([]CampaignID, len(best))
			for i, c := range best {
				ids[i] = c.id
			}
			return page(ids, offset), nil
		}
	}
}

func page(ids []CampaignID, offset int) []CampaignID {
	if offset >= len(ids) {
		return nil
	}
	return ids[offset:]
}

// Expire deletes campaigns whose LastSeen is before cutoff and returns how
// many it deleted, oldest first, read from the recency index (it reads
// only the campaigns it deletes). A campaign refreshed while Expire runs
// is kept.
func (b *Badger) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	if err := b.writable(); err != nil {
		return 0, err
	}
	limit := unixNano(cutoff)
	n := 0
	var after []byte // resume key: entries kept (hit meanwhile) are skipped
	for {
		var ids []CampaignID
		err := b.view(func(txn *badger.Txn) error {
			pfx := []byte{pfxRecent}
			it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx, Reverse: true})
			defer it.Close()
			start := append([]byte{pfxRecent}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
			if after != nil {
				start = after
			}
			for it.Seek(start); it.ValidForPrefix(pfx) && len(ids) < 1000; it.Next() {
				k := it.Item().Key()
				if after != nil && string(k) == string(after) {
					continue
				}
				if len(k) != 17 {
					continue
				}
				if int64(^binary.BigEndian.Uint64(k[1:9])) >= limit {
					break
				}
				ids = append(ids, idOfEntry(k))
				after = it.Item().KeyCopy(nil)
			}
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("expire: %w", err)
		}
		if len(ids) == 0 {
			return n, nil
		}
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				return n, fmt.Errorf("expire: %w", err)
			}
			if b.hasPending(id) {
				continue // hit in the last second: it is alive
			}
			ok, err := b.deleteCampaign(ctx, id, func(r *record) bool { return r.LastSeen.Before(cutoff) })
			if err != nil {
				return n, fmt.Errorf("expire: %w", err)
			}
			if ok {
				n++
			}
		}
	}
}

// Stats returns the store's counts (kept up to date by every write: a few
// reads) and the bytes allocated by its files.
func (b *Badger) Stats(ctx context.Context) (Stats, error) {
	c, err := b.counters()
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	s := Stats{
		Active: c.byState[StateActive], Allowed: c.byState[StateAllowed], Revoked: c.byState[StateRevoked],
		Keys: c.keys, SpamReports: c.spamReports, HamReports: c.hamReports, Messages: c.messages,
	}
	s.Campaigns = s.Active + s.Allowed + s.Revoked
	s.DiskBytes = b.diskUsage()
	s.DiskFree, s.DiskFull, s.WritesRefused = b.DiskState()
	return s, nil
}
