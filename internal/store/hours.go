package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Hourly series and windowed rankings (schema 2).
//
//	'h' id hour(4)   → uvarints messages, spam, ham, acted: a campaign's hours
//	'g' hour(4) id   → empty: the campaign was hit in that hour
//	'e' hour(4) id   → empty: the campaign was reported in that hour
//	'w' id           → ring: the campaign's matched messages of the last
//	                   RankDayHours hours, and the sums its rank entries hold
//	'H' ^sum id      → empty: messages in the last-hour window (sum > 0)
//	'D' ^sum id      → empty: messages in the last-day window (sum > 0)
//
// Hours are whole UTC hours (hours since 1970). The hour window is the
// current and the previous hour (so it always spans at least 60 minutes),
// the day window the current hour and the 24 before it. A rank entry is
// written when hits change a campaign's ring; as time passes the true
// sums only shrink, so an entry is an upper bound: listings check each
// candidate against its ring (exact), and once an hour the campaigns
// whose hits left a window (found through 'g') are re-ranked, so that
// entries are seldom stale. 'h', 'g' and 'e' entries older than
// Options.HourRetention are pruned once an hour.
const (
	pfxHour        = 'h'
	pfxHourHits    = 'g'
	pfxHourReports = 'e'
	pfxRing        = 'w'
	pfxRankHour    = 'H'
	pfxRankDay     = 'D'
)

// Window lengths, in hours, of the rankings.
const (
	RankHourHours = 2  // the current and the previous hour
	RankDayHours  = 25 // the current hour and the 24 before it
)

// DefaultHourRetention is how long hourly series are kept by default.
const DefaultHourRetention = 7 * 24 * time.Hour

var metaRankedKey = []byte{pfxMeta, 'r', 'a', 'n', 'k', 'e', 'd'}

// HourCount is one hour of a campaign's hourly series.
type HourCount struct {
	Hour        time.Time // start of the hour, UTC
	Messages    int64     // checked messages that matched
	SpamReports int64
	HamReports  int64
	Acted       int64 // matched messages acted on (any action but accept)
}

func hourNumber(t time.Time) uint32 {
	s := t.Unix()
	if s < 0 {
		return 0
	}
	return uint32(min(s/3600, math.MaxUint32))
}

func hourTime(h uint32) time.Time { return time.Unix(int64(h)*3600, 0).UTC() }

func hourKey(id CampaignID, h uint32) []byte {
	return binary.BigEndian.AppendUint32(idKey(pfxHour, id), h)
}

func markerKey(pfx byte, h uint32, id CampaignID) []byte {
	return appendID(binary.BigEndian.AppendUint32([]byte{pfx}, h), id)
}

type hourCounts struct{ messages, spam, ham, acted int64 }

func (c hourCounts) encode() []byte {
	b := binary.AppendUvarint(nil, uint64(max(c.messages, 0)))
	b = binary.AppendUvarint(b, uint64(max(c.spam, 0)))
	b = binary.AppendUvarint(b, uint64(max(c.ham, 0)))
	return binary.AppendUvarint(b, uint64(max(c.acted, 0)))
}

func decodeHour(v []byte) (hourCounts, error) {
	d := &decoder{b: v}
	c := hourCounts{d.int64(), d.int64(), d.int64(), d.int64()}
	return c, d.err
}

// addHour adds to a campaign's hour counter and marks the hour for
// pruning (and, with messages, for re-ranking); fresh says the campaign
// was just created (no counter to read).
func addHour(w *wtx, id CampaignID, h uint32, add hourCounts, fresh bool) error {
	k := hourKey(id, h)
	var cur hourCounts
	if !fresh {
		item, err := w.txn.Get(k)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("read hour counter: %w", err)
		default:
			err = item.Value(func(v []byte) error {
				cur, _ = decodeHour(v) // a malformed counter restarts at zero
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	cur.messages += add.messages
	cur.spam += add.spam
	cur.ham += add.ham
	cur.acted += add.acted
	if err := w.set(k, cur.encode()); err != nil {
		return err
	}
	if add.messages != 0 {
		if err := w.set(markerKey(pfxHourHits, h, id), nil); err != nil {
			return err
		}
	}
	if add.spam != 0 || add.ham != 0 {
		if err := w.set(markerKey(pfxHourReports, h, id), nil); err != nil {
			return err
		}
	}
	return nil
}

// ring holds a campaign's matched messages of the last RankDayHours
// hours: c[i] is hour anchor-i.
type ring struct {
	anchor uint32
	c      [RankDayHours]int64
	// hourIx and dayIx are the sums the rank entries hold (0: none).
	hourIx, dayIx int64
}

// shift moves the ring's anchor forward to hour now.
func (r *ring) shift(now uint32) {
	if now <= r.anchor {
		return
	}
	d := now - r.anchor
	if d >= RankDayHours {
		r.c = [RankDayHours]int64{}
	} else {
		for i := RankDayHours - 1; i >= 0; i-- {
			if i >= int(d) {
				r.c[i] = r.c[i-int(d)]
			} else {
				r.c[i] = 0
			}
		}
	}
	r.anchor = now
}

func (r *ring) add(h uint32, n int64) {
	r.shift(h)
	if d := r.anchor - h; d < RankDayHours {
		r.c[d] += n
	}
}

// sums returns the messages of the hour and day windows ending at the
// anchor.
func (r *ring) sums() (hour, day int64) {
	for i, n := range r.c {
		if i < RankHourHours {
			hour += n
		}
		day += n
	}
	return hour, day
}

// at returns the window sums at hour now.
func (r ring) at(now uint32) (hour, day int64) {
	r.shift(now)
	return r.sums()
}

func (r *ring) encode() []byte {
	b := binary.BigEndian.AppendUint32(nil, r.anchor)
	for _, n := range r.c {
		b = binary.AppendUvarint(b, uint64(max(n, 0)))
	}
	b = binary.AppendUvarint(b, uint64(max(r.hourIx, 0)))
	return binary.AppendUvarint(b, uint64(max(r.dayIx, 0)))
}

func decodeRing(v []byte) (ring, error) {
	if len(v) < 4 {
		return ring{}, errBadRecord
	}
	r := ring{anchor: binary.BigEndian.Uint32(v)}
	d := &decoder{b: v[4:]}
	for i := range r.c {
		r.c[i] = d.int64()
	}
	r.hourIx, r.dayIx = d.int64(), d.int64()
	return r, d.err
}

func ringKey(id CampaignID) []byte { return idKey(pfxRing, id) }

func rankKey(pfx byte, sum int64, id CampaignID) []byte {
	return appendID(inv([]byte{pfx}, sum), id)
}

// readRing reads a campaign's ring (found false: none).
func readRing(txn *badger.Txn, id CampaignID) (r ring, found bool, err error) {
	item, err := txn.Get(ringKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return ring{}, false, nil
	}
	if err != nil {
		return ring{}, false, fmt.Errorf("read ranking ring: %w", err)
	}
	var derr error
	err = item.Value(func(v []byte) error {
		r, derr = decodeRing(v)
		return nil
	})
	if err != nil {
		return ring{}, false, fmt.Errorf("read ranking ring: %w", err)
	}
	if derr != nil {
		// A malformed ring restarts empty; its rank entries, if any,
		// are dropped by the listing that finds them wrong.
		return ring{}, false, nil
	}
	return r, true, nil
}

// updateRanks adds hits (hour → messages) to a campaign's ring at hour
// now and brings its rank entries up to date.
func (w *wtx) updateRanks(id CampaignID, now uint32, adds map[uint32]int64) error {
	r, found, err := readRing(w.txn, id)
	if err != nil {
		return err
	}
	if !found && len(adds) == 0 {
		return nil
	}
	r.shift(now)
	for h, n := range adds {
		r.add(h, n)
	}
	hs, ds := r.at(now)
	for _, e := range []struct {
		pfx      byte
		old, cur int64
	}{{pfxRankHour, r.hourIx, hs}, {pfxRankDay, r.dayIx, ds}} {
		if e.old == e.cur {
			continue
		}
		if e.old > 0 {
			if err := w.del(rankKey(e.pfx, e.old, id)); err != nil {
				return err
			}
		}
		if e.cur > 0 {
			if err := w.set(rankKey(e.pfx, e.cur, id), nil); err != nil {
				return err
			}
		}
	}
	r.hourIx, r.dayIx = hs, ds
	if r.c == ([RankDayHours]int64{}) {
		if !found {
			return nil
		}
		return w.del(ringKey(id))
	}
	return w.set(ringKey(id), r.encode())
}

// dropRing deletes a campaign's ring and rank entries.
func (w *wtx) dropRing(id CampaignID) error {
	r, found, err := readRing(w.txn, id)
	if err != nil || !found {
		return err
	}
	if r.hourIx > 0 {
		if err := w.del(rankKey(pfxRankHour, r.hourIx, id)); err != nil {
			return err
		}
	}
	if r.dayIx > 0 {
		if err := w.del(rankKey(pfxRankDay, r.dayIx, id)); err != nil {
			return err
		}
	}
	return w.del(ringKey(id))
}

// mergeRing adds src's ring into dst's and drops src's.
func (w *wtx) mergeRing(dst, src CampaignID, now uint32) error {
	r, found, err := readRing(w.txn, src)
	if err != nil || !found {
		return err
	}
	adds := make(map[uint32]int64, RankDayHours)
	for i, n := range r.c {
		if n > 0 && uint32(i) <= r.anchor {
			adds[r.anchor-uint32(i)] = n
		}
	}
	if err := w.updateRanks(dst, now, adds); err != nil {
		return err
	}
	return w.dropRing(src)
}

// Hours returns campaign id's hourly series from since's hour on, oldest
// first (hours without activity are left out), including hits not
// flushed yet. Hours are kept for Options.HourRetention.
func (b *Badger) Hours(ctx context.Context, id CampaignID, since time.Time) ([]HourCount, error) {
	from := hourNumber(since)
	var out []HourCount
	err := b.view(func(txn *badger.Txn) error {
		if _, err := getRecord(txn, id); err != nil {
			return err
		}
		pfx := idKey(pfxHour, id)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Seek(hourKey(id, from)); it.ValidForPrefix(pfx); it.Next() {
			k := it.Item().Key()
			if len(k) != 13 {
				continue
			}
			h := binary.BigEndian.Uint32(k[9:])
			err := it.Item().Value(func(v []byte) error {
				if c, err := decodeHour(v); err == nil {
					out = append(out, HourCount{Hour: hourTime(h), Messages: c.messages, SpamReports: c.spam, HamReports: c.ham, Acted: c.acted})
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hours: %w", err)
	}
	// Hits still buffered.
	b.hitMu.Lock()
	if p := b.hits[id]; p != nil {
		for h, ph := range p.hours {
			if h < from {
				continue
			}
			i, ok := slices.BinarySearchFunc(out, hourTime(h), func(c HourCount, t time.Time) int { return c.Hour.Compare(t) })
			if !ok {
				out = slices.Insert(out, i, HourCount{Hour: hourTime(h)})
			}
			out[i].Messages += ph.messages
			out[i].Acted += ph.acted
		}
	}
	b.hitMu.Unlock()
	return out, nil
}

// hourly runs the work of a new hour: re-ranking the campaigns whose hits
// left a window, and pruning hours older than the retention.
func (b *Badger) hourly(ctx context.Context) error {
	if _, full, _ := b.disk.state(); full {
		return nil // done once writes are accepted again
	}
	now := hourNumber(b.now())
	b.hourlyMu.Lock()
	defer b.hourlyMu.Unlock()
	if now == b.lastHourly {
		return nil
	}
	if err := b.rerank(ctx, now); err != nil {
		return err
	}
	if err := b.pruneHours(ctx, now); err != nil {
		return err
	}
	b.lastHourly = now
	return nil
}

// rerank re-ranks the campaigns whose hits left the hour or the day
// window since the last re-ranking (recorded in the store), found through
// the 'g' markers.
func (b *Badger) rerank(ctx context.Context, now uint32) error {
	var last uint32
	found := false
	err := b.view(func(txn *badger.Txn) error {
		item, err := txn.Get(metaRankedKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) == 4 {
				last, found = binary.BigEndian.Uint32(v), true
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("rerank: %w", err)
	}
	if found && last >= now {
		return nil
	}
	if !found {
		last = now - min(now, RankDayHours+1)
	}
	// Hours leaving the hour window: (last-2, now-2]; the day window:
	// (last-25, now-25]. Markers older than the retention are gone.
	oldest := now - min(now, uint32(b.opts.HourRetention/time.Hour))
	seen := make(map[CampaignID]struct{})
	var ids []CampaignID
	for _, wlen := range []uint32{RankHourHours, RankDayHours} {
		lo, hi := int64(last)-int64(wlen)+1, int64(now)-int64(wlen)
		lo = max(lo, int64(oldest))
		if hi < lo {
			continue
		}
		err := b.view(func(txn *badger.Txn) error {
			pfx := []byte{pfxHourHits}
			it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx})
			defer it.Close()
			for it.Seek(binary.BigEndian.AppendUint32([]byte{pfxHourHits}, uint32(lo))); it.ValidForPrefix(pfx); it.Next() {
				k := it.Item().Key()
				if len(k) != 13 {
					continue
				}
				if int64(binary.BigEndian.Uint32(k[1:5])) > hi {
					break
				}
				id := idOfEntry(k)
				if _, dup := seen[id]; !dup {
					seen[id] = struct{}{}
					ids = append(ids, id)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("rerank: %w", err)
		}
	}
	const batch = 500
	for len(ids) > 0 {
		n := min(batch, len(ids))
		err := b.update(ctx, func(w *wtx) error {
			for _, id := range ids[:n] {
				if err := w.updateRanks(id, now, nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("rerank: %w", err)
		}
		ids = ids[n:]
	}
	err = b.update(ctx, func(w *wtx) error {
		return w.set(metaRankedKey, binary.BigEndian.AppendUint32(nil, now))
	})
	if err != nil {
		return fmt.Errorf("rerank: %w", err)
	}
	return nil
}

// pruneHours deletes hourly series, markers and totals older than the
// retention, a bounded transaction at a time.
func (b *Badger) pruneHours(ctx context.Context, now uint32) error {
	cutoff := now - min(now, uint32(b.opts.HourRetention/time.Hour))
	for _, pfx := range []byte{pfxHourHits, pfxHourReports, pfxTotals} {
		for {
			var keys [][]byte
			err := b.view(func(txn *badger.Txn) error {
				p := []byte{pfx}
				it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
				defer it.Close()
				for it.Seek(p); it.ValidForPrefix(p) && len(keys) < txnBudgetEntries/3; it.Next() {
					k := it.Item().Key()
					if len(k) < 5 || binary.BigEndian.Uint32(k[1:5]) >= cutoff {
						break
					}
					keys = append(keys, it.Item().KeyCopy(nil))
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("prune hours: %w", err)
			}
			if len(keys) == 0 {
				break
			}
			err = b.update(ctx, func(w *wtx) error {
				for _, k := range keys {
					if err := w.del(k); err != nil {
						return err
					}
					if len(k) == 13 && pfx != pfxTotals {
						if err := w.del(hourKey(idOfEntry(k), binary.BigEndian.Uint32(k[1:5]))); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("prune hours: %w", err)
			}
		}
	}
	return nil
}

// rankWalkMax bounds the rank entries one windowed listing reads.
const rankWalkMax = 100000

// ranked is a campaign in a windowed ranking.
type ranked struct {
	id  CampaignID
	sum int64
}

// listWindow returns the campaigns ranked offset to offset+limit by
// messages in the window of pfx (pfxRankHour or pfxRankDay) at hour now,
// exactly: rank entries are upper bounds, each checked against its ring,
// and the walk stops once no further entry can enter the page.
func listWindow(txn *badger.Txn, pfx byte, offset, limit int, now uint32) ([]ranked, error) {
	k := offset + limit
	var top []ranked
	p := []byte{pfx}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
	defer it.Close()
	n := 0
	for it.Seek(p); it.ValidForPrefix(p) && n < rankWalkMax; it.Next() {
		n++
		key := it.Item().Key()
		if len(key) != 17 {
			continue
		}
		ub := int64(^binary.BigEndian.Uint64(key[1:9]))
		if len(top) == k && ub < top[k-1].sum {
			break
		}
		id := idOfEntry(key)
		r, found, err := readRing(txn, id)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		hs, ds := r.at(now)
		sum := hs
		if pfx == pfxRankDay {
			sum = ds
		}
		if sum <= 0 {
			continue
		}
		c := ranked{id, sum}
		i, _ := slices.BinarySearchFunc(top, c, func(a, b ranked) int {
			if a.sum != b.sum {
				if a.sum > b.sum {
					return -1
				}
				return 1
			}
			return cmpID(a.id, b.id)
		})
		if i < k {
			top = slices.Insert(top, i, c)
			if len(top) > k {
				top = top[:k]
			}
		}
	}
	if offset >= len(top) {
		return nil, nil
	}
	return top[offset:], nil
}

func cmpID(a, b CampaignID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
