package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

func TestKeyChunkDecode(t *testing.T) {
	many := make([][]byte, maxChunkKeys+1)
	for i := range many {
		many[i] = []byte{byte(i), byte(i >> 8)}
	}
	tests := []struct {
		name string
		v    []byte
		want [][]byte // nil: malformed
	}{
		{"one key", encodeKeyChunk(keys("a")), keys("a")},
		{"keys", encodeKeyChunk(keys("a", "bc", "def")), keys("a", "bc", "def")},
		{"full", encodeKeyChunk(many[:maxChunkKeys]), many[:maxChunkKeys]},
		{"too many keys", encodeKeyChunk(many), nil},
		{"empty value", nil, nil},
		{"no keys", []byte{keyChunkV1}, nil},
		{"unknown version", []byte{2, 1, 'a'}, nil},
		{"truncated key", []byte{keyChunkV1, 3, 'a'}, nil},
		{"empty key", []byte{keyChunkV1, 0}, nil},
		{"bad varint", []byte{keyChunkV1, 0xff}, nil},
		{"key too long", append([]byte{keyChunkV1, 0x81, 0x08}, make([]byte, MaxKeyLen+1)...), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeKeyChunk(tc.v)
			if tc.want == nil {
				if !errors.Is(err, errBadKeyChunk) {
					t.Fatalf("decoded %q, err %v; want errBadKeyChunk", got, err)
				}
				return
			}
			if err != nil || !slices.EqualFunc(got, tc.want, bytes.Equal) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func FuzzDecodeKeyChunk(f *testing.F) {
	f.Add(encodeKeyChunk(keys("a", "bc")))
	f.Add([]byte{keyChunkV1, 0xff})
	f.Fuzz(func(t *testing.T, v []byte) {
		ks, err := decodeKeyChunk(v)
		if err == nil && !bytes.Equal(encodeKeyChunk(ks), v) {
			t.Fatalf("%x decodes to %q, which encodes differently", v, ks)
		}
	})
}

// chunkEntries returns the raw chunk entries of the store.
func chunkEntries(t *testing.T, s *Badger) []kv {
	t.Helper()
	var out []kv
	err := s.view(func(txn *badger.Txn) error {
		var err error
		out, err = collectPrefix(txn, []byte{pfxKeyChunk}, true, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A report that starts a campaign lists its keys in one chunk, numbered
// by the ordinal of its first key; one that joins adds a chunk after it.
func TestKeyChunksOfReports(t *testing.T) {
	s := openTest(t, "", Options{})
	id := mustReport(t, s, spam("a", t0, "k1", "k2", "k3")).Campaign
	mustReport(t, s, spam("b", t0, "k1", "k4"))
	got := chunkEntries(t, s)
	want := []kv{
		{k: keyChunkKey(id, 0)[1:], v: encodeKeyChunk(keys("k1", "k2", "k3"))},
		{k: keyChunkKey(id, 3)[1:], v: encodeKeyChunk(keys("k4"))},
	}
	if !slices.EqualFunc(got, want, func(a, b kv) bool { return bytes.Equal(a.k, b.k) && bytes.Equal(a.v, b.v) }) {
		t.Fatalf("chunks %q, want %q", got, want)
	}
	if c := mustGet(t, s, id); !slices.Equal(sortedKeys(c), []string{"k1", "k2", "k3", "k4"}) || c.Keys == nil {
		t.Errorf("keys %q", c.Keys)
	}
}

// A campaign whose key count fell below its chunk numbers (it lost keys)
// gets its next chunk after the last one instead of overwriting it.
func TestKeyChunkNumberTaken(t *testing.T) {
	s := openTest(t, "", Options{})
	id := mustReport(t, s, spam("a", t0, "k1", "k2")).Campaign
	err := s.update(ctx, func(w *wtx) error {
		if err := w.appendKeys(id, 0, keys("k3"), false); err != nil { // chunk 0 is taken
			return err
		}
		return w.appendKeys(id, 1, keys("k4"), false) // and now 1: after it, 2
	})
	if err != nil {
		t.Fatal(err)
	}
	var nums []string
	for _, e := range chunkEntries(t, s) {
		nums = append(nums, fmt.Sprint(e.k[8:]))
	}
	if want := []string{"[0 0 0 0 0 0 0 0]", "[0 0 0 0 0 0 0 1]", "[0 0 0 0 0 0 0 2]"}; !slices.Equal(nums, want) {
		t.Errorf("chunk numbers %v, want %v", nums, want)
	}
	if c := mustGet(t, s, id); !slices.Equal(sortedKeys(c), []string{"k1", "k2", "k3", "k4"}) {
		t.Errorf("keys %q", sortedKeys(c))
	}
}

// downgradeToV2 rewrites the store's key lists as schema 2 stored them
// (one 'x' entry per key) and sets its schema to 2.
func downgradeToV2(t *testing.T, dir string) {
	t.Helper()
	db, err := badger.Open(badgerOptions(dir, Options{Logger: testLogger(t)}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(txn *badger.Txn) error {
		chunks, err := collectPrefix(txn, []byte{pfxKeyChunk}, true, 0)
		if err != nil {
			return err
		}
		for _, c := range chunks {
			id := CampaignID(0)
			for _, b := range c.k[:8] {
				id = id<<8 | CampaignID(b)
			}
			ks, err := decodeKeyChunk(c.v)
			if err != nil {
				return err
			}
			for _, k := range ks {
				if err := txn.Set(keyListKey(id, k), nil); err != nil {
					return err
				}
			}
			if err := txn.Delete(append([]byte{pfxKeyChunk}, c.k...)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSchema(db, 2); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, filepath.Base(p)), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A schema 2 store opens as schema 3 with the same campaigns, keys and
// state hash; an upgrade interrupted between two of its transactions
// starts again and makes the chunks an uninterrupted one makes.
func TestMigrateV3(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1})
	var ids []CampaignID
	for i := range 5 {
		var ks []string
		for k := range 3 + i*170 { // up to 683 keys: several chunks
			ks = append(ks, fmt.Sprintf("c%d-%04d", i, k))
		}
		ids = append(ids, mustReport(t, s, spam("r", t0, ks...)).Campaign)
	}
	mustReport(t, s, spam("s", t0, "c0-0000", "late-key")) // a second chunk
	hash, err := s.StateHash(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var before [][]string
	for _, id := range ids {
		before = append(before, sortedKeys(mustGet(t, s, id)))
	}
	s.Close()
	downgradeToV2(t, dir)
	resumed := t.TempDir()
	copyDir(t, dir, resumed)

	s = openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1})
	if got, err := s.StateHash(ctx); err != nil || got != hash {
		t.Errorf("state hash after the upgrade %s, %v; want %s", got, err, hash)
	}
	for i, id := range ids {
		if got := sortedKeys(mustGet(t, s, id)); !slices.Equal(got, before[i]) {
			t.Errorf("campaign %d: %d keys after the upgrade, want %d", id, len(got), len(before[i]))
		}
	}
	verifyClean(t, s)
	want := chunkEntries(t, s)
	if len(want) < 7 {
		t.Errorf("%d chunks: want several per large campaign", len(want))
	}

	// Interrupted after its first transaction, three times, then run
	// whole.
	db, err := badger.Open(badgerOptions(resumed, Options{Logger: testLogger(t)}))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if done, err := chunkKeyLists(db, testLogger(t), 300, 1); err != nil || done {
			t.Fatalf("one transaction of the upgrade: done %v, %v", done, err)
		}
	}
	db.Close()
	r := openTest(t, resumed, Options{NoSyncWrites: true, Expiry: -1})
	got := chunkEntries(t, r)
	if !slices.EqualFunc(got, want, func(a, b kv) bool { return bytes.Equal(a.k, b.k) && bytes.Equal(a.v, b.v) }) {
		t.Errorf("resumed upgrade: %d chunks differ from the uninterrupted upgrade's %d", len(got), len(want))
	}
	if got, err := r.StateHash(ctx); err != nil || got != hash {
		t.Errorf("state hash after the resumed upgrade %s, %v; want %s", got, err, hash)
	}
}
