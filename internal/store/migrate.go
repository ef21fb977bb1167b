package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// metaMigrateKey holds the progress of the schema 1 → 2 upgrade: the last
// campaign id indexed and the counts so far, so that an interrupted
// upgrade resumes where it stopped.
var metaMigrateKey = []byte{pfxMeta, 'm', 'i', 'g', 'r', 'a', 't', 'e', '2'}

// migrateBatch is how many campaign records one upgrade transaction
// indexes.
const migrateBatch = 2000

// migrateV2 upgrades a schema 1 store: it writes the ranking indexes of
// every campaign record (index.go) and the store's counters (counts.go),
// migrateBatch records per transaction, each recording its progress. The
// hourly series and windowed rankings start empty (schema 1 kept days
// only).
func migrateV2(db *badger.DB, log *slog.Logger) error {
	_, err := indexCampaigns(db, log, migrateBatch, 0)
	return err
}

// indexCampaigns is migrateV2 with batch records per transaction, stopping
// (done false) after maxBatches transactions unless 0.
func indexCampaigns(db *badger.DB, log *slog.Logger, batch, maxBatches int) (done bool, err error) {
	var (
		after CampaignID
		sum   counters
	)
	err = db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(metaMigrateKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) < 8 {
				return nil // restart from the beginning
			}
			d := &decoder{b: v[8:]}
			c := decodeCounters(d)
			if d.err == nil {
				after, sum = CampaignID(binary.BigEndian.Uint64(v)), c
			}
			return nil
		})
	})
	if err != nil {
		return false, fmt.Errorf("read upgrade progress: %w", err)
	}
	if after == 0 {
		log.Info("store: upgrading to schema 2: indexing every campaign once (resumable)")
	} else {
		log.Info("store: resuming the upgrade to schema 2", "after campaign", after)
	}
	t0, indexed := time.Now(), 0
	for n := 0; ; n++ {
		if maxBatches > 0 && n == maxBatches {
			return false, nil
		}
		var recs []*record
		err := db.View(func(txn *badger.Txn) error {
			start := campaignKey(after + 1)
			if after == ^CampaignID(0) {
				return nil
			}
			pfx := []byte{pfxCampaign}
			it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx, PrefetchValues: true, PrefetchSize: 256})
			defer it.Close()
			for it.Seek(start); it.ValidForPrefix(pfx) && len(recs) < batch; it.Next() {
				k := it.Item().Key()
				if len(k) != 9 {
					continue
				}
				id := CampaignID(binary.BigEndian.Uint64(k[1:]))
				err := it.Item().Value(func(v []byte) error {
					r, err := decodeRecord(id, v)
					if err != nil {
						r = &record{Campaign: Campaign{ID: id}} // Verify reports it; skipped below
					}
					recs = append(recs, r)
					return nil
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("read campaigns after %d: %w", after, err)
		}
		if len(recs) == 0 {
			break
		}
		var next counters
		err = db.Update(func(txn *badger.Txn) error {
			w := &wtx{txn: txn, maxEntries: batchBudgetEntries, maxBytes: batchBudgetBytes}
			for _, r := range recs {
				if !r.ix.present {
					continue // unreadable record
				}
				if err := w.reindex(r.ID, ixState{}, r.ix); err != nil {
					return err
				}
			}
			next = sum
			next.add(*w.counts())
			v := binary.BigEndian.AppendUint64(nil, uint64(recs[len(recs)-1].ID))
			return txn.Set(metaMigrateKey, next.encode(v))
		})
		if err != nil {
			return false, fmt.Errorf("index campaigns after %d: %w", after, err)
		}
		sum = next
		after = recs[len(recs)-1].ID
		indexed += len(recs)
		if indexed%(50*migrateBatch) == 0 {
			log.Info("store: upgrading to schema 2", "campaigns indexed", indexed, "elapsed", time.Since(t0).Round(time.Second))
		}
	}
	err = db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(metaCountsKey, sum.encode(nil)); err != nil {
			return err
		}
		return txn.Delete(metaMigrateKey)
	})
	if err != nil {
		return false, fmt.Errorf("write counters: %w", err)
	}
	log.Info("store: upgraded to schema 2", "campaigns indexed", indexed, "elapsed", time.Since(t0).Round(time.Second))
	return true, nil
}

// RebuildIndexes drops the ranking indexes and the counters and writes
// them again from the campaign records, as the schema 2 upgrade does: for
// a store whose records were loaded by other means (a fleet node
// bootstrapped from a snapshot of the records) or whose indexes Verify
// found wrong. Nothing may write to the store meanwhile (hits and reports
// would be counted twice or not at all); the hourly series and windowed
// rankings are kept.
func (b *Badger) RebuildIndexes(ctx context.Context) error {
	if err := b.writable(); err != nil {
		return err
	}
	if err := b.flushHits(); err != nil {
		return err
	}
	b.foldMu.Lock()
	defer b.foldMu.Unlock()
	for _, p := range [][]byte{{pfxRecent}, {pfxVolume}, {pfxReports}, {pfxHam}, {pfxDelta}, metaCountsKey, metaMigrateKey} {
		if err := b.db.DropPrefix(p); err != nil {
			return fmt.Errorf("rebuild indexes: %w", err)
		}
	}
	if _, err := indexCampaigns(b.db, b.log, migrateBatch, 0); err != nil {
		return fmt.Errorf("rebuild indexes: %w", err)
	}
	return nil
}

// migrateKeyBatch is about how many listed keys one transaction of the
// schema 2 → 3 upgrade moves into chunks.
const migrateKeyBatch = 10000

// migrateV3 upgrades a schema 2 store: every campaign's key list, one
// 'x' entry per key, becomes chunks of maxChunkKeys keys in key order
// (keylist.go), numbered by the ordinal of their first key; then the 'x'
// entries are dropped at once (Badger's DropPrefix, which drops whole
// tables rather than writing a tombstone per entry). The chunks depend on
// the 'x' entries only, so an interrupted upgrade, which left them all,
// starts again and writes the same chunks.
func migrateV3(db *badger.DB, log *slog.Logger) error {
	_, err := chunkKeyLists(db, log, migrateKeyBatch, 0)
	return err
}

// chunkKeyLists is migrateV3 with about batch keys per transaction,
// stopping (done false, the 'x' entries left) after maxTxns transactions
// unless 0.
func chunkKeyLists(db *badger.DB, log *slog.Logger, batch, maxTxns int) (done bool, err error) {
	log.Info("store: upgrading to schema 3: campaign key lists in chunks")
	t0, total := time.Now(), 0
	var (
		from []byte     // where the next read starts
		cur  CampaignID // the campaign converted last, and its keys so far
		ord  int
	)
	type group struct {
		id   CampaignID
		keys [][]byte
	}
	for txns := 0; ; txns++ {
		if maxTxns > 0 && txns == maxTxns {
			return false, nil
		}
		var (
			groups []group
			n      int
		)
		err := db.View(func(txn *badger.Txn) error {
			pfx := []byte{pfxKeyList}
			it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx})
			defer it.Close()
			it.Seek(pfx)
			if from != nil {
				it.Seek(from)
			}
			for ; it.ValidForPrefix(pfx); it.Next() {
				k := it.Item().KeyCopy(nil)
				if len(k) <= 9 || len(k) > 9+MaxKeyLen {
					from = append(k[:len(k):len(k)], 0) // malformed: dropped with the rest
					continue
				}
				id := CampaignID(binary.BigEndian.Uint64(k[1:]))
				g := len(groups) - 1
				if g < 0 || groups[g].id != id {
					if n >= batch {
						return nil
					}
					groups = append(groups, group{id: id})
					g++
				} else if n >= batch && len(groups[g].keys)%maxChunkKeys == 0 {
					return nil // a whole number of chunks of this campaign
				}
				groups[g].keys = append(groups[g].keys, k[9:])
				from = append(k[:len(k):len(k)], 0) // the key after k
				n++
			}
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("read key lists: %w", err)
		}
		if n == 0 {
			break
		}
		err = db.Update(func(txn *badger.Txn) error {
			c, o := cur, ord
			for _, g := range groups {
				if g.id != c {
					c, o = g.id, 0
				}
				for j := 0; j < len(g.keys); j += maxChunkKeys {
					ks := g.keys[j:min(j+maxChunkKeys, len(g.keys))]
					if err := txn.Set(keyChunkKey(g.id, uint64(o+j)), encodeKeyChunk(ks)); err != nil {
						return err
					}
				}
				o += len(g.keys)
			}
			cur, ord = c, o
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("write key-list chunks: %w", err)
		}
		total += n
	}
	if err := db.DropPrefix([]byte{pfxKeyList}); err != nil {
		return false, fmt.Errorf("drop the schema 2 key lists: %w", err)
	}
	log.Info("store: upgraded to schema 3", "keys", total, "took", time.Since(t0).Round(time.Millisecond))
	return true, nil
}

// migrateV4 upgrades a schema 3 store: the key index moves into memory
// (keyindex.go), built from the key lists, so the index entries ('k' +
// key → campaign, one per key) go, dropped at once with Badger's
// DropPrefix. The key lists already list every indexed key (Verify
// checks it), so nothing else changes; an interrupted upgrade drops what
// is left.
func migrateV4(db *badger.DB, log *slog.Logger) error {
	t0 := time.Now()
	log.Info("store: upgrading to schema 4: the signature index in memory, built from the key lists")
	if err := db.DropPrefix([]byte{pfxIndex}); err != nil {
		return fmt.Errorf("drop the schema 3 index entries: %w", err)
	}
	log.Info("store: upgraded to schema 4", "took", time.Since(t0).Round(time.Millisecond))
	return nil
}
