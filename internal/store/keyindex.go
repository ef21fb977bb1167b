package store

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// The key index answers "which campaign has this signature key?". Its
// durable truth is each campaign's key list in chunks ('X', keylist.go):
// a report that starts a campaign writes one chunk, not one entry per
// key. In memory, a keyTable maps each listed key's keyed fingerprint to
// its campaign; a candidate it gives is verified against the campaign's
// key list before it counts (Lookup, wtx.lookupIndex), so that a
// fingerprint collision never makes a false hit.
//
// The table is built when the store opens: loaded from the checkpoint
// written beside the store by the last clean Close when the store has not
// changed since (checkpoint.go), else rebuilt by one scan of the chunks.
//
// Write transactions that change key lists hold keyIndex.mu from their
// first read until the table has their changes (updateIndex): the table
// is then exactly the committed lists whenever a writer starts, and two
// writers never both take a key that neither saw. They record their
// changes (wtx.ixOps) and the table takes them once the commit succeeded.

// metaKeySeedKey holds the secret of the keyed fingerprints (16 bytes).
var metaKeySeedKey = []byte{pfxMeta, 'k', 'e', 'y', 's', 'e', 'e', 'd'}

// keyIndex is the store's index of signature keys.
type keyIndex struct {
	// mu serializes the write transactions that change key lists.
	mu  sync.Mutex
	tbl atomic.Pointer[keyTable]
	// broken is set when a commit with key changes failed with its
	// outcome unknown: the table may differ from the lists until the next
	// start, which rebuilds it (no checkpoint is written).
	broken atomic.Bool
	// loaded says how the table was made at Open ("checkpoint" or
	// "rebuilt"), and took how long.
	loaded string
	took   time.Duration
}

func (x *keyIndex) table() *keyTable { return x.tbl.Load() }

// ixOp is one change of the table: (h, from) becomes (h, to); from 0
// adds, to 0 removes.
type ixOp struct {
	h        uint64
	from, to CampaignID
}

func (t *keyTable) apply(ops []ixOp) {
	for _, op := range ops {
		switch {
		case op.from == 0:
			t.add(op.h, op.to)
		case op.to == 0:
			t.remove(op.h, op.from)
		default:
			t.move(op.h, op.from, op.to)
		}
	}
}

// keySeed reads the store's fingerprint secret; it makes one (and writes
// it unless readOnly) when the store has none.
func keySeed(db *badger.DB, readOnly bool) (k0, k1 uint64, err error) {
	var seed []byte
	err = db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(metaKeySeedKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		seed, err = item.ValueCopy(nil)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("read the key index seed: %w", err)
	}
	if len(seed) != 16 {
		seed = make([]byte, 16)
		if _, err := rand.Read(seed); err != nil {
			return 0, 0, fmt.Errorf("key index seed: %w", err)
		}
		if !readOnly {
			err := db.Update(func(txn *badger.Txn) error { return txn.Set(metaKeySeedKey, seed) })
			if err != nil {
				return 0, 0, fmt.Errorf("write the key index seed: %w", err)
			}
		}
	}
	return binary.LittleEndian.Uint64(seed), binary.LittleEndian.Uint64(seed[8:]), nil
}

// openKeyIndex makes the key index of a store being opened.
func (b *Badger) openKeyIndex() error {
	t0 := time.Now()
	k0, k1, err := keySeed(b.db, b.opts.ReadOnly)
	if err != nil {
		return err
	}
	if !b.opts.InMemory {
		t, err := b.loadCheckpoint(k0, k1)
		if err == nil {
			b.keys.tbl.Store(t)
			b.keys.loaded, b.keys.took = "checkpoint", time.Since(t0)
			b.logKeyIndex()
			return nil
		}
		if !errors.Is(err, errNoCheckpoint) {
			b.log.Warn("store: key index checkpoint not used; rebuilding the index from the key lists", "err", err)
		}
	}
	t, err := b.buildKeyTable(k0, k1)
	if err != nil {
		return err
	}
	b.keys.tbl.Store(t)
	b.keys.loaded, b.keys.took = "rebuilt", time.Since(t0)
	b.logKeyIndex()
	return nil
}

// logKeyIndex says how the key index was made, for a store of some size.
func (b *Badger) logKeyIndex() {
	how, took, keys, size := b.keyIndexInfo()
	if keys < 100000 {
		return
	}
	msg := "store: key index loaded from the checkpoint"
	if how == "rebuilt" {
		msg = "store: key index rebuilt from the key lists"
	}
	b.log.Info(msg, "keys", keys, "MiB", size>>20, "took", took.Round(time.Millisecond))
}

// keyIndexInfo tells how the key index was made when the store opened
// ("checkpoint": loaded from the checkpoint of the last clean close;
// "rebuilt": from the key lists), how long that took, its entries and
// the bytes its slots take.
func (b *Badger) keyIndexInfo() (how string, took time.Duration, keys int, bytes int64) {
	t := b.keys.table()
	return b.keys.loaded, b.keys.took, t.len(), t.bytes()
}

// buildKeyTable makes a table of every listed key by one scan of the
// key lists: the iteration copies each chunk's keys into batches that a
// second goroutine hashes into the table.
func (b *Badger) buildKeyTable(k0, k1 uint64) (*keyTable, error) {
	n := 0
	if c, err := b.counters(); err == nil {
		n = int(max(c.keys, 0))
	}
	t := newKeyTable(k0, k1, n)
	type batch struct {
		ids  []CampaignID
		ends []int // end of each id's keys in buf
		buf  []byte
		lens []uint16
	}
	const batchBytes = 1 << 20
	work := make(chan *batch, 4)
	free := make(chan *batch, 6)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for bt := range work {
			off, ki := 0, 0
			for j, id := range bt.ids {
				for ; ki < bt.ends[j]; ki++ {
					l := int(bt.lens[ki])
					h := t.hash(bt.buf[off : off+l])
					s, q := t.locate(h)
					s.insert(q, id) // only this goroutine writes the table while it is built
					off += l
				}
			}
			select {
			case free <- bt:
			default:
			}
		}
	}()
	next := func() *batch {
		select {
		case bt := <-free:
			bt.ids, bt.ends, bt.buf, bt.lens = bt.ids[:0], bt.ends[:0], bt.buf[:0], bt.lens[:0]
			return bt
		default:
			return &batch{buf: make([]byte, 0, batchBytes+64<<10)}
		}
	}
	cur := next()
	err := b.db.View(func(txn *badger.Txn) error {
		pfx := []byte{pfxKeyChunk}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx, PrefetchValues: true, PrefetchSize: 256})
		defer it.Close()
		seen := 0
		for it.Seek(pfx); it.ValidForPrefix(pfx); it.Next() {
			item := it.Item()
			k := item.Key()
			if len(k) != 17 {
				continue
			}
			id := CampaignID(binary.BigEndian.Uint64(k[1:]))
			if id == 0 || id > maxSlotID {
				continue // not a campaign's (Verify reports it)
			}
			err := item.Value(func(v []byte) error {
				keys, err := decodeKeyChunk(v)
				if err != nil {
					return nil // listed nothing (Verify reports it)
				}
				for _, key := range keys {
					cur.buf = append(cur.buf, key...)
					cur.lens = append(cur.lens, uint16(len(key)))
				}
				cur.ids = append(cur.ids, id)
				cur.ends = append(cur.ends, len(cur.lens))
				return nil
			})
			if err != nil {
				return err
			}
			if len(cur.buf) >= batchBytes {
				work <- cur
				cur = next()
			}
			if seen++; seen%4096 == 0 && b.isClosed() {
				return ErrClosed
			}
		}
		return nil
	})
	work <- cur
	close(work)
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("build the key index: %w", err)
	}
	return t, nil
}

// lookupIndex returns the campaign that lists signature key k in this
// transaction (0: none). The transaction must hold the key index
// (updateIndex).
func (w *wtx) lookupIndex(k []byte) (CampaignID, error) {
	if id, ok := w.idx[string(k)]; ok {
		return id, nil
	}
	if w.ix == nil {
		return 0, errors.New("store: key index read outside an index transaction")
	}
	var (
		buf   [4]CampaignID
		cands = buf[:0]
	)
	w.ix.find(w.ix.hash(k), func(id CampaignID) { cands = append(cands, id) })
	var owner CampaignID
	for _, id := range cands {
		ok, err := w.isListed(id, k)
		if err != nil {
			return 0, err
		}
		if ok {
			owner = id
			break
		}
	}
	if w.idx == nil {
		w.idx = make(map[string]CampaignID)
	}
	w.idx[string(k)] = owner
	return owner, nil
}

// reserveIndex sizes the transaction's view of the key index for the
// keys of ins, at most a transaction's worth: a batch looks up thousands
// of keys, and a map grown from empty rehashes them at every doubling.
func (w *wtx) reserveIndex(ins []ReportInput) {
	if w.idx != nil {
		return
	}
	n := 0
	for i := range ins {
		if n += len(ins[i].Keys); n >= batchBudgetEntries {
			n = batchBudgetEntries
			break
		}
	}
	w.idx = make(map[string]CampaignID, n)
}

// isListed tells whether campaign id lists k in the committed key lists:
// the lists of the campaigns a transaction asks about are read once, in
// a read transaction of their own (an iterator of the write transaction
// would sort all its pending writes each time). Keys this transaction
// changed never get here (w.idx has them), and no other transaction
// changes key lists meanwhile (updateIndex), so the committed lists are
// what counts.
func (w *wtx) isListed(id CampaignID, k []byte) (bool, error) {
	set, ok := w.listed[id]
	if !ok {
		if w.ro == nil {
			w.ro = w.db.NewTransaction(false)
		}
		chunks, _, err := listChunks(w.ro, id, 0)
		if err != nil {
			return false, err
		}
		set = make(map[string]struct{})
		for _, c := range chunks {
			for _, key := range c.keys {
				set[string(key)] = struct{}{}
			}
		}
		if w.listed == nil {
			w.listed = make(map[CampaignID]map[string]struct{})
		}
		w.listed[id] = set
	}
	_, ok = set[string(k)]
	return ok, nil
}

// addIndex records that campaign id now lists k (not listed before).
func (w *wtx) addIndex(k []byte, id CampaignID) { w.changeIndex(k, 0, id) }

// moveIndex records that k moved from campaign from to campaign to.
func (w *wtx) moveIndex(k []byte, from, to CampaignID) { w.changeIndex(k, from, to) }

// dropIndex records that campaign id no longer lists k.
func (w *wtx) dropIndex(k []byte, id CampaignID) { w.changeIndex(k, id, 0) }

func (w *wtx) changeIndex(k []byte, from, to CampaignID) {
	if w.idx == nil {
		w.idx = make(map[string]CampaignID)
	}
	w.idx[string(k)] = to
	if w.ix != nil {
		w.ixOps = append(w.ixOps, ixOp{h: w.ix.hash(k), from: from, to: to})
	}
}

// verifyListed marks found[i] for each keys[i] that campaign id lists,
// reading its chunks in txn until every key is found. The first chunk
// (number 0: the keys of the report that made the campaign, most of a
// campaign's keys and all those of one made by one report) is read with
// a Get, cheaper than an iterator; the others, when keys are left, by
// iterating over the campaign's chunks.
func verifyListed(txn *badger.Txn, id CampaignID, keys [][]byte, found []bool) error {
	left := len(keys)
	match := func(v []byte) error {
		if len(v) == 0 || v[0] != keyChunkV1 {
			return nil
		}
		v = v[1:]
		for len(v) > 0 && left > 0 {
			n, m := binary.Uvarint(v)
			if m <= 0 || n > uint64(len(v)-m) {
				return nil
			}
			key := v[m : m+int(n)]
			for i, want := range keys {
				if !found[i] && bytes.Equal(want, key) {
					found[i] = true
					left--
				}
			}
			v = v[m+int(n):]
		}
		return nil
	}
	item, err := txn.Get(keyChunkKey(id, 0))
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
	case err != nil:
		return fmt.Errorf("key list of campaign %d: %w", id, err)
	default:
		if err := item.Value(match); err != nil {
			return fmt.Errorf("key list of campaign %d: %w", id, err)
		}
	}
	if left == 0 {
		return nil
	}
	pfx := idKey(pfxKeyChunk, id)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx, PrefetchValues: false})
	defer it.Close()
	for it.Seek(append(pfx, 0, 0, 0, 0, 0, 0, 0, 1)); left > 0 && it.ValidForPrefix(pfx); it.Next() {
		if len(it.Item().Key()) != len(pfx)+8 {
			continue
		}
		if err := it.Item().Value(match); err != nil {
			return fmt.Errorf("key list of campaign %d: %w", id, err)
		}
	}
	return nil
}
