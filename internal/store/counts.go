package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// The store's counters (schema 2): campaigns by state, index keys,
// reports and messages, and totals per hour (messages checked, matched,
// actions, reports). Every write transaction that changes them adds one
// delta entry under a key of its own ('z' nonce seq), so concurrent
// reports never conflict on a shared counter; the hit-flush loop folds the
// deltas into the base ('m' "counts") and the hourly totals ('t' hour).
// Stats and Totals read the base plus the deltas not folded yet: a few
// reads, whatever the size of the store.
const (
	pfxDelta  = 'z' // 'z' nonce(8) seq(8) → delta (encodeDelta)
	pfxTotals = 't' // 't' hour(4) → hourTotal
)

var metaCountsKey = []byte{pfxMeta, 'c', 'o', 'u', 'n', 't', 's'}

// counters are the store-wide counts.
type counters struct {
	byState                 [3]int64 // campaigns by State (unknown states count as revoked)
	keys                    int64
	spamReports, hamReports int64
	messages                int64
}

func stateSlot(s State) int { return min(int(s), 2) }

func (c *counters) addState(s ixState, sign int64) {
	if !s.present {
		return
	}
	c.byState[stateSlot(s.state)] += sign
	c.keys += sign * s.keys
	c.spamReports += sign * s.spamReports
	c.hamReports += sign * s.hamReports
	c.messages += sign * s.messages
}

func (c *counters) add(o counters) {
	for i := range c.byState {
		c.byState[i] += o.byState[i]
	}
	c.keys += o.keys
	c.spamReports += o.spamReports
	c.hamReports += o.hamReports
	c.messages += o.messages
}

func (c counters) fields() []int64 {
	return []int64{c.byState[0], c.byState[1], c.byState[2], c.keys, c.spamReports, c.hamReports, c.messages}
}

func (c counters) encode(b []byte) []byte {
	for _, v := range c.fields() {
		b = binary.AppendVarint(b, v)
	}
	return b
}

func decodeCounters(d *decoder) counters {
	var v [7]int64
	for i := range v {
		v[i] = d.varint()
	}
	return counters{byState: [3]int64{v[0], v[1], v[2]}, keys: v[3], spamReports: v[4], hamReports: v[5], messages: v[6]}
}

// HourTotal is one hour of the store-wide totals.
type HourTotal struct {
	Hour time.Time // start of the hour, UTC
	// Checked counts the messages checked (matched or not), Matched those
	// that matched a campaign; Actions counts the actions taken on checked
	// messages by action name.
	Checked, Matched        int64
	Actions                 map[string]int64
	SpamReports, HamReports int64
}

func (h *HourTotal) add(o *HourTotal) {
	h.Checked += o.Checked
	h.Matched += o.Matched
	h.SpamReports += o.SpamReports
	h.HamReports += o.HamReports
	for a, n := range o.Actions {
		if h.Actions == nil {
			h.Actions = make(map[string]int64, len(o.Actions))
		}
		h.Actions[a] += n
	}
}

func (h *HourTotal) encode(b []byte) []byte {
	for _, v := range []int64{h.Checked, h.Matched, h.SpamReports, h.HamReports} {
		b = binary.AppendVarint(b, v)
	}
	names := slices.Sorted(maps.Keys(h.Actions))
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, a := range names {
		b = putBytes(b, []byte(a))
		b = binary.AppendVarint(b, h.Actions[a])
	}
	return b
}

func decodeHourTotal(d *decoder, hour uint32) HourTotal {
	h := HourTotal{Hour: hourTime(hour)}
	h.Checked, h.Matched, h.SpamReports, h.HamReports = d.varint(), d.varint(), d.varint(), d.varint()
	if n := d.count(); n > 0 {
		h.Actions = make(map[string]int64, n)
		for i := 0; i < n && d.err == nil; i++ {
			a := string(d.bytes())
			h.Actions[a] += d.varint()
		}
	}
	return h
}

// delta is what one transaction changes in the counters.
type delta struct {
	c     counters
	hours map[uint32]*HourTotal
}

func (d *delta) hour(h uint32) *HourTotal {
	if d.hours == nil {
		d.hours = make(map[uint32]*HourTotal, 1)
	}
	t := d.hours[h]
	if t == nil {
		t = &HourTotal{Hour: hourTime(h)}
		d.hours[h] = t
	}
	return t
}

func (d *delta) empty() bool { return d.c == counters{} && len(d.hours) == 0 }

func (d *delta) encode() []byte {
	b := d.c.encode([]byte{1})
	hours := slices.Sorted(maps.Keys(d.hours))
	b = binary.AppendUvarint(b, uint64(len(hours)))
	for _, h := range hours {
		b = binary.AppendUvarint(b, uint64(h))
		b = d.hours[h].encode(b)
	}
	return b
}

func decodeDelta(v []byte) (delta, error) {
	if len(v) == 0 || v[0] != 1 {
		return delta{}, errBadRecord
	}
	d := &decoder{b: v[1:]}
	out := delta{c: decodeCounters(d)}
	if n := d.count(); n > 0 {
		out.hours = make(map[uint32]*HourTotal, n)
		for i := 0; i < n && d.err == nil; i++ {
			h := uint32(min(d.uvarint(), 1<<32-1))
			t := decodeHourTotal(d, h)
			out.hour(h).add(&t)
		}
	}
	return out, d.err
}

// counts returns the transaction's delta of the counters.
func (w *wtx) counts() *counters {
	if w.delta == nil {
		w.delta = &delta{}
	}
	return &w.delta.c
}

// hourTotal returns the transaction's delta of hour h's totals.
func (w *wtx) hourTotal(h uint32) *HourTotal {
	if w.delta == nil {
		w.delta = &delta{}
	}
	return w.delta.hour(h)
}

// deltaKeys makes the keys of delta entries: a nonce of this opening of
// the store and a sequence.
type deltaKeys struct {
	nonce uint64
	seq   atomic.Uint64
}

func (k *deltaKeys) next() []byte {
	b := binary.BigEndian.AppendUint64([]byte{pfxDelta}, k.nonce)
	return binary.BigEndian.AppendUint64(b, k.seq.Add(1))
}

// writeDelta adds the transaction's delta entry (before its commit).
func (b *Badger) writeDelta(w *wtx) error {
	if w.delta == nil || w.delta.empty() {
		return nil
	}
	return w.set(b.deltaKeys.next(), w.delta.encode())
}

// maxFoldEntries bounds the delta entries one fold transaction reads.
const maxFoldEntries = 20000

// foldCounters folds delta entries into the base counters and the hourly
// totals. It is serialized by foldMu (the only writer of the base and of
// the totals), so it never conflicts with itself, and concurrent writers
// only add delta entries of their own.
func (b *Badger) foldCounters(ctx context.Context) error {
	if _, full, _ := b.disk.state(); full {
		return nil // writes are refused, so no delta is added either
	}
	b.foldMu.Lock()
	defer b.foldMu.Unlock()
	for {
		n := 0
		err := b.update(ctx, func(w *wtx) error {
			n = 0
			base, err := readBase(w.txn)
			if err != nil {
				return err
			}
			var sum delta
			var done [][]byte
			pfx := []byte{pfxDelta}
			it := w.txn.NewIterator(badger.IteratorOptions{Prefix: pfx, PrefetchValues: true, PrefetchSize: 256})
			for it.Seek(pfx); it.ValidForPrefix(pfx) && n < maxFoldEntries; it.Next() {
				item := it.Item()
				v, err := item.ValueCopy(nil)
				if err != nil {
					it.Close()
					return err
				}
				done = append(done, item.KeyCopy(nil))
				n++
				d, err := decodeDelta(v)
				if err != nil {
					b.log.Warn("store: dropping an unreadable counter delta", "err", err)
					continue
				}
				sum.c.add(d.c)
				for h, t := range d.hours {
					sum.hour(h).add(t)
				}
			}
			it.Close()
			if n == 0 {
				return nil
			}
			base.add(sum.c)
			if err := w.set(metaCountsKey, base.encode(nil)); err != nil {
				return err
			}
			for h, t := range sum.hours {
				cur, err := readTotal(w.txn, h)
				if err != nil {
					return err
				}
				cur.add(t)
				if err := w.set(totalKey(h), cur.encode(nil)); err != nil {
					return err
				}
			}
			for _, k := range done {
				if err := w.del(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("fold counters: %w", err)
		}
		if n < maxFoldEntries {
			return nil
		}
	}
}

func totalKey(h uint32) []byte { return binary.BigEndian.AppendUint32([]byte{pfxTotals}, h) }

func readBase(txn *badger.Txn) (counters, error) {
	item, err := txn.Get(metaCountsKey)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return counters{}, nil
	}
	if err != nil {
		return counters{}, fmt.Errorf("read counters: %w", err)
	}
	var c counters
	err = item.Value(func(v []byte) error {
		d := &decoder{b: v}
		c = decodeCounters(d)
		return d.err
	})
	if err != nil {
		return counters{}, fmt.Errorf("read counters: %w", err)
	}
	return c, nil
}

func readTotal(txn *badger.Txn, h uint32) (HourTotal, error) {
	item, err := txn.Get(totalKey(h))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return HourTotal{Hour: hourTime(h)}, nil
	}
	if err != nil {
		return HourTotal{}, err
	}
	var t HourTotal
	err = item.Value(func(v []byte) error {
		d := &decoder{b: v}
		t = decodeHourTotal(d, h)
		if d.err != nil {
			t = HourTotal{Hour: hourTime(h)} // a malformed total restarts at zero
		}
		return nil
	})
	return t, err
}

// pendingDeltas sums the delta entries not folded yet (the fold loop
// keeps them to about a second's writes).
func pendingDeltas(txn *badger.Txn) (delta, error) {
	var sum delta
	pfx := []byte{pfxDelta}
	_, err := scanPrefix(txn, pfx, true, 0, func(_, v []byte) error {
		if d, err := decodeDelta(v); err == nil {
			sum.c.add(d.c)
			for h, t := range d.hours {
				sum.hour(h).add(t)
			}
		}
		return nil
	})
	return sum, err
}

// counters returns the store-wide counts: the base plus the deltas not
// folded yet.
func (b *Badger) counters() (counters, error) {
	var c counters
	err := b.view(func(txn *badger.Txn) error {
		var err error
		if c, err = readBase(txn); err != nil {
			return err
		}
		d, err := pendingDeltas(txn)
		c.add(d.c)
		return err
	})
	return c, err
}

// Totals returns the store-wide totals of every hour from since's hour
// to now, oldest first (hours without activity are left out). Hours are
// kept for Options.HourRetention.
func (b *Badger) Totals(ctx context.Context, since time.Time) ([]HourTotal, error) {
	from := hourNumber(since)
	byHour := make(map[uint32]*HourTotal)
	err := b.view(func(txn *badger.Txn) error {
		pfx := []byte{pfxTotals}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Seek(totalKey(from)); it.ValidForPrefix(pfx); it.Next() {
			k := it.Item().Key()
			if len(k) != 5 {
				continue
			}
			h := binary.BigEndian.Uint32(k[1:])
			err := it.Item().Value(func(v []byte) error {
				d := &decoder{b: v}
				t := decodeHourTotal(d, h)
				if d.err == nil {
					byHour[h] = &t
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		d, err := pendingDeltas(txn)
		for h, t := range d.hours {
			if h < from {
				continue
			}
			if byHour[h] == nil {
				byHour[h] = &HourTotal{Hour: hourTime(h)}
			}
			byHour[h].add(t)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("totals: %w", err)
	}
	b.addPendingTotals(byHour, from)
	out := make([]HourTotal, 0, len(byHour))
	for _, t := range byHour {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Hour.Before(out[j].Hour) })
	return out, nil
}
