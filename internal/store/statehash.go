package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// stateHashPart bounds the memory hashIndex takes: the keys of one part
// of the key order and their campaigns.
var stateHashPart int64 = 64 << 20

// hashIndex writes into h the index entries of schema 3, 'k' + key →
// campaign id (8 bytes BE), in key order, made from the key lists: the
// state hash (StateHash) of a node of this schema is then the hash of a
// node of schema 3 holding the same campaigns, so that a fleet upgrades
// one node at a time. The keys are sorted a part of the key order at a
// time, each part one scan of the key lists, so that the memory taken
// stays near stateHashPart whatever the store's size. A key listed twice
// (a damaged store) is hashed once, with the lower campaign id.
func hashIndex(ctx context.Context, txn *badger.Txn, h io.Writer) error {
	// A first scan sizes the parts and samples the keys for their bounds.
	var (
		total  int64
		seen   int
		sample [][]byte
		rng    = rand.New(rand.NewPCG(1, 2))
	)
	const sampleSize = 4096
	err := scanKeyLists(ctx, txn, func(_ CampaignID, k []byte) {
		total += int64(len(k)) + 24
		seen++
		switch {
		case len(sample) < sampleSize:
			sample = append(sample, bytes.Clone(k))
		default:
			if j := rng.IntN(seen); j < sampleSize {
				sample[j] = bytes.Clone(k)
			}
		}
	})
	if err != nil {
		return err
	}
	parts := int(total/stateHashPart) + 1
	slices.SortFunc(sample, bytes.Compare)
	bounds := make([][]byte, 0, parts+1)
	bounds = append(bounds, nil)
	for p := 1; p < parts && len(sample) > 0; p++ {
		bounds = append(bounds, sample[p*len(sample)/parts])
	}
	bounds = append(bounds, nil)
	type entry struct {
		off, n uint32
		id     CampaignID
	}
	var (
		arena   []byte
		entries []entry
		n       [binary.MaxVarintLen64]byte
		ek      []byte
	)
	for p := 0; p+1 < len(bounds); p++ {
		lo, hi := bounds[p], bounds[p+1]
		if p > 0 && bytes.Equal(lo, bounds[p-1]) {
			continue // an empty part (repeated bound)
		}
		arena, entries = arena[:0], entries[:0]
		err := scanKeyLists(ctx, txn, func(id CampaignID, k []byte) {
			if (lo != nil && bytes.Compare(k, lo) < 0) || (hi != nil && bytes.Compare(k, hi) >= 0) {
				return
			}
			entries = append(entries, entry{off: uint32(len(arena)), n: uint32(len(k)), id: id})
			arena = append(arena, k...)
		})
		if err != nil {
			return err
		}
		key := func(e entry) []byte { return arena[e.off : e.off+e.n] }
		slices.SortFunc(entries, func(a, b entry) int {
			return cmp.Or(bytes.Compare(key(a), key(b)), cmp.Compare(a.id, b.id))
		})
		for i, e := range entries {
			if i > 0 && bytes.Equal(key(e), key(entries[i-1])) {
				continue
			}
			ek = append(append(ek[:0], pfxIndex), key(e)...)
			h.Write(n[:binary.PutUvarint(n[:], uint64(len(ek)))])
			h.Write(ek)
			h.Write(n[:binary.PutUvarint(n[:], 8)])
			h.Write(idValue(e.id))
		}
	}
	return nil
}

// scanKeyLists calls f with every key of every well-formed chunk and its
// campaign (the key is valid during the call only).
func scanKeyLists(ctx context.Context, txn *badger.Txn, f func(id CampaignID, k []byte)) error {
	pfx := []byte{pfxKeyChunk}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx, PrefetchValues: true, PrefetchSize: 64})
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
		if len(k) != 17 {
			continue
		}
		id := CampaignID(binary.BigEndian.Uint64(k[1:]))
		err := item.Value(func(v []byte) error {
			keys, err := decodeKeyChunk(v)
			if err != nil {
				return nil // a malformed chunk lists nothing
			}
			for _, key := range keys {
				f(id, key)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
