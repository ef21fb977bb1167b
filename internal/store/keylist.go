package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// A campaign's key list (every signature key the index points at it) is
// kept in chunks, 'X' + id + chunk number (uint64 BE) → keyChunkV1, then
// each key as a uvarint length and its bytes. A report that brings new
// keys writes them as one new chunk after the campaign's last, so that a
// report starting a campaign writes one entry for its key list instead
// of one per key: every entry costs an insertion into Badger's memtable,
// the largest part of applying a report. Chunk numbers only say the
// order; they are not contiguous once chunks move (merges) or go
// (repair).
//
// Schema 2 listed every key as an entry of its own under 'x' (migrated
// by migrateV3); the state hash still hashes the list as those entries,
// so that it does not depend on how the keys are chunked.

const (
	keyChunkV1 = 1
	// maxChunkKeys bounds the keys of one chunk, and so what a chunk
	// costs to read and rewrite.
	maxChunkKeys = 256
)

func keyChunkKey(id CampaignID, n uint64) []byte {
	return binary.BigEndian.AppendUint64(idKey(pfxKeyChunk, id), n)
}

func encodeKeyChunk(keys [][]byte) []byte {
	size := 1
	for _, k := range keys {
		size += binary.MaxVarintLen16 + len(k)
	}
	b := make([]byte, 1, size)
	b[0] = keyChunkV1
	for _, k := range keys {
		b = putBytes(b, k)
	}
	return b
}

var errBadKeyChunk = errors.New("malformed key-list chunk")

// decodeKeyChunk returns the keys of a chunk (sharing v's memory).
func decodeKeyChunk(v []byte) ([][]byte, error) {
	if len(v) == 0 || v[0] != keyChunkV1 {
		return nil, errBadKeyChunk
	}
	v = v[1:]
	var keys [][]byte
	for len(v) > 0 {
		n, m := binary.Uvarint(v)
		if m <= 0 || n == 0 || n > MaxKeyLen || n > uint64(len(v)-m) || len(keys) == maxChunkKeys {
			return nil, errBadKeyChunk
		}
		keys = append(keys, v[m:m+int(n)])
		v = v[m+int(n):]
	}
	if len(keys) == 0 {
		return nil, errBadKeyChunk
	}
	return keys, nil
}

// keyChunk is one chunk of a campaign's key list.
type keyChunk struct {
	n    uint64
	keys [][]byte
}

// listChunks reads the chunks of campaign id in order, whole chunks up to
// limit keys in all (0: every chunk; at least one chunk is read). more
// reports whether chunks are left after those returned. A malformed
// chunk is returned without keys (its entry is still there to delete).
func listChunks(txn *badger.Txn, id CampaignID, limit int) (chunks []keyChunk, more bool, err error) {
	pfx := idKey(pfxKeyChunk, id)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx, PrefetchValues: true, PrefetchSize: 16})
	defer it.Close()
	total := 0
	for it.Seek(pfx); it.ValidForPrefix(pfx); it.Next() {
		item := it.Item()
		k := item.Key()
		if len(k) != len(pfx)+8 {
			continue // not a chunk key (Verify reports it)
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return nil, false, fmt.Errorf("key list of campaign %d: %w", id, err)
		}
		keys, _ := decodeKeyChunk(v)
		if limit > 0 && len(chunks) > 0 && total+len(keys) > limit {
			return chunks, true, nil
		}
		chunks = append(chunks, keyChunk{n: binary.BigEndian.Uint64(k[len(pfx):]), keys: keys})
		total += len(keys)
	}
	return chunks, false, nil
}

// campaignKeys returns every key listed for campaign id, sorted.
func campaignKeys(txn *badger.Txn, id CampaignID) ([][]byte, error) {
	chunks, _, err := listChunks(txn, id, 0)
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	for _, c := range chunks {
		keys = append(keys, c.keys...)
	}
	slices.SortFunc(keys, bytes.Compare)
	return slices.CompactFunc(keys, bytes.Equal), nil
}

// freeChunk returns a chunk number for campaign id that no chunk has:
// want, unless a chunk has it (fresh: the campaign was made in this
// transaction, nothing to read); then one after the last chunk.
//
// want is the campaign's key count before the chunk, the ordinal of the
// chunk's first key: a campaign that only gains keys numbers its chunks
// in increasing order without ever colliding, so the Get is a miss and
// the iterator (which would sort all of the transaction's pending
// writes) runs only after a campaign lost keys (a merge moving them away,
// a deletion in progress, a repair). The Get also makes Badger detect a
// concurrent transaction writing the same chunk.
func (w *wtx) freeChunk(id CampaignID, want uint64, fresh bool) (uint64, error) {
	if fresh {
		return want, nil
	}
	_, err := w.txn.Get(keyChunkKey(id, want))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return want, nil
	}
	if err != nil {
		return 0, fmt.Errorf("key list of campaign %d: %w", id, err)
	}
	pfx := idKey(pfxKeyChunk, id)
	it := w.txn.NewIterator(badger.IteratorOptions{Prefix: pfx, Reverse: true})
	defer it.Close()
	for it.Seek(binary.BigEndian.AppendUint64(bytes.Clone(pfx), math.MaxUint64)); it.ValidForPrefix(pfx); it.Next() {
		k := it.Item().Key()
		if len(k) != len(pfx)+8 {
			continue
		}
		last := binary.BigEndian.Uint64(k[len(pfx):])
		if last == math.MaxUint64 {
			return 0, fmt.Errorf("key list of campaign %d: %w: no chunk number left", id, errBadKeyChunk)
		}
		return last + 1, nil
	}
	return want, nil // deleted in this transaction
}

// appendKeys lists keys (not listed yet) for campaign id, which has
// count keys listed, in new chunks; fresh says the campaign was made in
// this transaction (see freeChunk).
func (w *wtx) appendKeys(id CampaignID, count int64, keys [][]byte, fresh bool) error {
	want := uint64(max(count, 0))
	for len(keys) > 0 {
		n := min(len(keys), maxChunkKeys)
		num, err := w.freeChunk(id, want, fresh)
		if err != nil {
			return err
		}
		if err := w.set(keyChunkKey(id, num), encodeKeyChunk(keys[:n])); err != nil {
			return err
		}
		keys = keys[n:]
		want = max(want, num) + uint64(n)
	}
	return nil
}

// keyChunksEntries is how many entries listing n new keys writes.
func keyChunksEntries(n int) int { return (n + maxChunkKeys - 1) / maxChunkKeys }
