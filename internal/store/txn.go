package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	// ix is the key index's table when the transaction holds the key
	// index (updateIndex): it may read and change key lists.
	ix *keyTable
	// idx is this transaction's view of the keys it looked up or changed
	// (0: listed by no campaign); ixOps are its changes, for the table
	// once it commits; listed are the committed key lists of the
	// campaigns it asked about, read through ro (keyindex.go).
	idx    map[string]CampaignID
	ixOps  []ixOp
	listed map[CampaignID]map[string]struct{}
	db     *badger.DB
	ro     *badger.Txn
	// applied is the fleet stream event whose effect this transaction
	// writes (nil: none, see ForEvent); newIDs counts the campaign ids
	// made from it so far, in this and the event's earlier transactions.
	applied *appliedMark
	newIDs  int
	// delta is what the transaction changes in the store's counters
	// (counts.go), written as an entry of its own before the commit.
	delta *delta
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
	return b.runUpdate(ctx, maxEntries, maxBytes, nil, f)
}

// updateIndex is updateBudget for a transaction that reads or changes
// key lists: it holds the key index until the table has the
// transaction's changes (keyindex.go).
func (b *Badger) updateIndex(ctx context.Context, maxEntries, maxBytes int, f func(w *wtx) error) error {
	b.keys.mu.Lock()
	defer b.keys.mu.Unlock()
	return b.runUpdate(ctx, maxEntries, maxBytes, b.keys.table(), f)
}

// runUpdate runs f in read-write transactions until one commits or fails
// otherwise than by a conflict; ix is the key index's table when the
// caller holds it.
func (b *Badger) runUpdate(ctx context.Context, maxEntries, maxBytes int, ix *keyTable, f func(w *wtx) error) error {
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
		w := &wtx{txn: txn, maxEntries: maxEntries, maxBytes: maxBytes, ix: ix, db: b.db, applied: appliedOf(ctx)}
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
			switch {
			case err == nil:
				if len(w.ixOps) > 0 {
					ix.apply(w.ixOps)
				}
			case len(w.ixOps) > 0 && !errors.Is(err, badger.ErrConflict):
				b.keys.broken.Store(true)
				b.log.Error("store: a commit changing key lists failed; the key index is rebuilt at the next start", "err", err)
			}
		}
		if w.applied != nil {
			w.applied.committed(err == nil, w.newIDs)
		}
		txn.Discard()
		if w.ro != nil {
			w.ro.Discard()
		}
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

// scanPrefixReverse calls f with the key suffix (after prefix) of the
// entries under prefix, last key first, until f returns false or an
// error; the suffix is only valid during the call. Suffixes longer than
// 64 bytes that start with 64 bytes of 0xff are not seen (no key of the
// store is).
func scanPrefixReverse(txn *badger.Txn, prefix []byte, f func(suffix []byte) (bool, error)) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	last := append(bytes.Clone(prefix), bytes.Repeat([]byte{0xff}, 64)...)
	for it.Seek(last); it.ValidForPrefix(prefix); it.Next() {
		more, err := f(it.Item().Key()[len(prefix):])
		if err != nil || !more {
			return err
		}
	}
	return nil
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
