package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// maxConflictRetries is how often a transaction that lost a write conflict
// is retried.
const maxConflictRetries = 16

// wtx wraps a read-write transaction and counts what it writes, so that
// callers can keep transactions well below Badger's size limits.
type wtx struct {
	txn     *badger.Txn
	entries int
	bytes   int
	// maxEntries and maxBytes bound the whole transaction; zero selects
	// txnBudgetEntries and txnBudgetBytes. ReportBatch raises them so
	// that a batch of reports shares one commit.
	maxEntries, maxBytes int
	// idx, when not nil, is this transaction's view of the index entries
	// of the keys prefetched by prefetchIndex and of those written
	// through setIndex (0: no entry).
	idx map[string]CampaignID
	// fw adds index keys to the index filter before the commit.
	fw filterWriter
	// applied is the fleet stream event whose effect this transaction
	// writes (nil: none, see ForEvent); newIDs counts the campaign ids
	// made from it so far, in this and the event's earlier transactions.
	applied *appliedMark
	newIDs  int
	// delta is what the transaction changes in the store's counters
	// (counts.go), written as an entry of its own before the commit.
	delta *delta
}

// prefetchIndex reads the index entries of keys in sorted order into
// w.idx: consecutive sorted lookups share most of their path through the
// memtables' skiplists and the tables' indexes, which makes them much
// cheaper than the same lookups in report order.
func (w *wtx) prefetchIndex(keys [][]byte) error {
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	if w.idx == nil {
		w.idx = make(map[string]CampaignID, len(keys))
	}
	// Applying a fleet event, keys the index filter rules out are absent
	// (the filter has every key committed or being written, see
	// indexFilter) and are not read. Only there: a read is also what
	// makes Badger detect a conflict with a concurrent transaction that
	// adds the same key, and in a fleet node the applier is the only
	// writer of reports (the engine's own writes become events), while a
	// standalone store takes concurrent reports.
	var maybe []bool
	if w.applied != nil {
		maybe = w.fw.f.mayContain(keys)
	}
	buf := make([]byte, 0, 64)
	for i, k := range keys {
		if maybe != nil && !maybe[i] {
			w.idx[string(k)] = 0
			continue
		}
		buf = append(append(buf[:0], pfxIndex), k...)
		id, err := getIndex(w.txn, buf)
		if err != nil {
			return err
		}
		w.idx[string(k)] = id
	}
	return nil
}

// lookupIndex returns the campaign signature key k points at in this
// transaction (0: none).
func (w *wtx) lookupIndex(k []byte) (CampaignID, error) {
	if id, ok := w.idx[string(k)]; ok {
		return id, nil
	}
	return getIndex(w.txn, indexKey(k))
}

// setIndex points signature key k at campaign id.
func (w *wtx) setIndex(k []byte, id CampaignID) error {
	if w.idx != nil {
		w.idx[string(k)] = id
	}
	w.fw.add(k)
	return w.set(indexKey(k), idValue(id))
}

// getIndex reads one index entry (full key ik); 0 if there is none or
// its value is malformed.
func getIndex(txn *badger.Txn, ik []byte) (CampaignID, error) {
	item, err := txn.Get(ik)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("index lookup: %w", err)
	}
	var id CampaignID
	err = item.Value(func(v []byte) error {
		id, _ = idFromValue(v)
		return nil
	})
	return id, err
}

func (w *wtx) set(k, v []byte) error {
	w.entries++
	w.bytes += len(k) + len(v) + 12
	if err := w.txn.Set(k, v); err != nil {
		return fmt.Errorf("set %q: %w", k[:1], err)
	}
	return nil
}

func (w *wtx) del(k []byte) error {
	w.entries++
	w.bytes += len(k) + 12
	if err := w.txn.Delete(k); err != nil {
		return fmt.Errorf("delete %q: %w", k[:1], err)
	}
	return nil
}

// room is how many more entries the transaction may take within budget.
func (w *wtx) room() int {
	me, mb := w.maxEntries, w.maxBytes
	if me <= 0 {
		me = txnBudgetEntries
	}
	if mb <= 0 {
		mb = txnBudgetBytes
	}
	r := me - w.entries
	if br := (mb - w.bytes) / 48; br < r {
		r = br
	}
	return max(r, 0)
}

// update runs f in a read-write transaction and commits it, retrying on
// write conflicts with a short randomized back-off.
func (b *Badger) update(ctx context.Context, f func(w *wtx) error) error {
	return b.updateBudget(ctx, 0, 0, f)
}

// updateBudget is update with a transaction budget of maxEntries entries
// and maxBytes bytes (zero: the default budget).
func (b *Badger) updateBudget(ctx context.Context, maxEntries, maxBytes int, f func(w *wtx) error) error {
	if b.opts.ReadOnly {
		return b.readOnlyErr()
	}
	if err := b.disk.check(); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		txn := b.db.NewTransaction(true)
		w := &wtx{txn: txn, maxEntries: maxEntries, maxBytes: maxBytes, fw: filterWriter{f: b.filter}, applied: appliedOf(ctx)}
		if w.applied != nil {
			w.newIDs = w.applied.newIDs
		}
		err := f(w)
		if err == nil && w.applied != nil {
			err = w.set(appliedKey, w.applied.value(w.newIDs))
		}
		if err == nil {
			err = b.writeDelta(w)
		}
		if err == nil {
			err = txn.Commit()
		}
		if w.applied != nil {
			w.applied.committed(err == nil, w.newIDs)
		}
		txn.Discard()
		w.fw.done()
		if errors.Is(err, badger.ErrConflict) && attempt < maxConflictRetries {
			time.Sleep(time.Duration(rand.IntN(200*(attempt+1))) * time.Microsecond)
			continue
		}
		return err
	}
}

// updateEach writes n items in order, in as few transactions as the
// budget allows: a transaction takes items while it has room for need
// more entries, and at least one, so that each transaction progresses.
// It returns how many items were committed: all of them, unless err.
func (b *Badger) updateEach(ctx context.Context, n, need int, write func(w *wtx, i int) error) (int, error) {
	done := 0
	for done < n {
		k := 0
		err := b.update(ctx, func(w *wtx) error {
			k = 0
			for i := done; i < n; i++ {
				if k > 0 && w.room() < need {
					break
				}
				if err := write(w, i); err != nil {
					return err
				}
				k++
			}
			return nil
		})
		if err != nil {
			return done, err
		}
		done += k
	}
	return done, nil
}

// view runs f in a read-only transaction.
func (b *Badger) view(f func(txn *badger.Txn) error) error {
	if b.isClosed() {
		return ErrClosed
	}
	return b.db.View(f)
}

// getRecord reads a campaign record; ErrNotFound if there is none.
func getRecord(txn *badger.Txn, id CampaignID) (*record, error) {
	item, err := txn.Get(campaignKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("campaign %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read campaign %d: %w", id, err)
	}
	var r *record
	err = item.Value(func(v []byte) error {
		var derr error
		r, derr = decodeRecord(id, v)
		return derr
	})
	return r, err
}

// scanPrefix calls f with the key suffix (after prefix) and value of every
// entry under prefix, up to limit entries (0 for all). Key and value are
// only valid during the call. Only one iterator may be open in a read-write
// transaction, so f must not open another.
func scanPrefix(txn *badger.Txn, prefix []byte, values bool, limit int, f func(suffix, v []byte) error) (int, error) {
	opts := badger.IteratorOptions{Prefix: prefix, PrefetchValues: values, PrefetchSize: 64}
	it := txn.NewIterator(opts)
	defer it.Close()
	n := 0
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		if limit > 0 && n >= limit {
			break
		}
		item := it.Item()
		var v []byte
		if values {
			var err error
			if v, err = item.ValueCopy(nil); err != nil {
				return n, err
			}
		}
		if err := f(item.Key()[len(prefix):], v); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

type kv struct{ k, v []byte }

// collectPrefix copies up to limit entries under prefix (0 for all).
func collectPrefix(txn *badger.Txn, prefix []byte, values bool, limit int) ([]kv, error) {
	var out []kv
	_, err := scanPrefix(txn, prefix, values, limit, func(s, v []byte) error {
		out = append(out, kv{append([]byte(nil), s...), v})
		return nil
	})
	return out, err
}
