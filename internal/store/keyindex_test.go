package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// The table against a plain multiset, through growth from the smallest
// size, Robin Hood displacement, removals with back-shifts and moves;
// entries sharing a fingerprint (collisions) are all found.
func TestKeyTable(t *testing.T) {
	type pair struct {
		h  uint64
		id CampaignID
	}
	rng := rand.New(rand.NewPCG(3, 4))
	tbl := newKeyTable(rng.Uint64(), rng.Uint64(), 0)
	ref := map[pair]int{}
	var live []pair
	check := func(p pair) {
		t.Helper()
		got := map[CampaignID]int{}
		tbl.find(p.h, func(id CampaignID) { got[id]++ })
		for _, q := range live {
			if q.h == p.h && got[q.id] != ref[q] {
				t.Fatalf("h %x: campaign %d found %d times, want %d", p.h, q.id, got[q.id], ref[q])
			}
		}
		for id, n := range got {
			if ref[pair{p.h, id}] != n {
				t.Fatalf("h %x: campaign %d found %d times, want %d", p.h, id, n, ref[pair{p.h, id}])
			}
		}
	}
	for i := range 200000 {
		switch r := rng.IntN(10); {
		case r < 6 || len(live) == 0:
			p := pair{rng.Uint64(), CampaignID(rng.Uint64N(maxSlotID) + 1)}
			if r == 0 && len(live) > 0 {
				p.h = live[rng.IntN(len(live))].h // the same fingerprint again
			}
			tbl.add(p.h, p.id)
			ref[p]++
			live = append(live, p)
		case r < 8:
			j := rng.IntN(len(live))
			p := live[j]
			tbl.remove(p.h, p.id)
			if ref[p]--; ref[p] == 0 {
				delete(ref, p)
			}
			live = slices.Delete(live, j, j+1)
		default:
			j := rng.IntN(len(live))
			p := live[j]
			to := CampaignID(rng.Uint64N(1000) + 1)
			tbl.move(p.h, p.id, to)
			if ref[p]--; ref[p] == 0 {
				delete(ref, p)
			}
			live[j].id = to
			ref[live[j]]++
		}
		if i%10000 == 0 {
			check(live[rng.IntN(len(live))])
			check(pair{h: rng.Uint64()})
		}
	}
	if tbl.len() != len(live) {
		t.Fatalf("%d entries, want %d", tbl.len(), len(live))
	}
	for _, p := range live[:200] {
		check(p)
	}
	// Every entry's fingerprint survives the growth: entryOf of its hash
	// is what the table lists.
	want := make([]indexEntry, 0, len(live))
	for _, p := range live {
		want = append(want, tbl.entryOf(p.h, p.id))
	}
	slices.SortFunc(want, indexEntry.compare)
	if got := tbl.snapshot(); !slices.Equal(got, want) {
		t.Fatalf("snapshot differs from the entries added")
	}
	if grown := tbl.shards[0].bits; grown <= minShardBits {
		t.Errorf("shard 0 has %d bits: the test did not grow the table", grown)
	}
	// findAll finds what find does, hash by hash, with hashes repeated,
	// absent, and several in one shard.
	var hs []uint64
	for j := range 300 {
		switch j % 3 {
		case 0:
			hs = append(hs, live[rng.IntN(len(live))].h)
		case 1:
			hs = append(hs, rng.Uint64())
		default:
			hs = append(hs, hs[rng.IntN(len(hs))])
		}
	}
	type found struct {
		i  int
		id CampaignID
	}
	var got, wantFound []found
	tbl.findAll(hs, func(i int, id CampaignID) { got = append(got, found{i, id}) })
	for i, h := range hs {
		tbl.find(h, func(id CampaignID) { wantFound = append(wantFound, found{i, id}) })
	}
	if !slices.Equal(got, wantFound) || len(got) < 100 {
		t.Errorf("findAll found %d pairs, find %d", len(got), len(wantFound))
	}
}

func TestKeyTableSizing(t *testing.T) {
	for _, n := range []int{0, 1000, 11_000_000, 110_000_000} {
		tbl := newKeyTable(1, 2, n)
		slots := float64(tbl.bytes() / 12)
		if load := float64(n) / slots; load > tableTargetLoad || (n > 1e6 && load < 0.7) {
			t.Errorf("%d keys: %d shards, load %.2f", n, len(tbl.shards), load)
		}
		if len(tbl.shards) > maxShards {
			t.Errorf("%d keys: %d shards", n, len(tbl.shards))
		}
	}
}

// A key whose fingerprint is some campaign's is no hit unless the
// campaign lists it: an index entry that lies is verified away.
func TestLookupVerifiesCandidates(t *testing.T) {
	s := openTest(t, "", Options{})
	a := mustReport(t, s, spam("r", t0, "a")).Campaign
	// The table claims "forged" for a; the key lists do not.
	tbl := s.keys.table()
	tbl.add(tbl.hash([]byte("forged")), a)
	if id := lookupOne(t, s, "forged"); id != 0 {
		t.Fatalf("forged entry hit campaign %d", id)
	}
	// A report of "forged" is not taken for a's either: it makes its own.
	r := mustReport(t, s, spam("q", t0, "forged"))
	if !r.Created || r.Campaign == a {
		t.Fatalf("report of a forged key: %+v", r)
	}
	if id := lookupOne(t, s, "forged"); id != r.Campaign {
		t.Fatalf("forged key now %d, want %d", id, r.Campaign)
	}
	tbl.remove(tbl.hash([]byte("forged")), a)
	verifyClean(t, s)
}

// LookupSketched verifies only the campaigns one exact key alone found:
// a campaign found through sketch keys is the caller's to check.
func TestLookupSketched(t *testing.T) {
	s := openTest(t, "", Options{})
	a := mustReport(t, s, spam("r", t0, "a", "b")).Campaign
	tbl := s.keys.table()
	tbl.add(tbl.hash([]byte("forged")), a)
	defer tbl.remove(tbl.hash([]byte("forged")), a)
	for _, tc := range []struct {
		name  string
		keys  []string
		exact int
		want  []string // the keys hit, all on a
	}{
		{"forged exact key", []string{"forged"}, 1, nil},
		{"forged sketch key", []string{"forged"}, 0, []string{"forged"}},
		{"listed exact key", []string{"a"}, 1, []string{"a"}},
		{"listed sketch key", []string{"x", "a"}, 1, []string{"a"}},
		{"exact and sketch keys", []string{"forged", "b"}, 1, []string{"forged", "b"}},
		{"unknown keys", []string{"x", "y"}, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits, err := s.LookupSketched(ctx, keys(tc.keys...), tc.exact)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hits {
				if h.Campaign != a {
					t.Errorf("key %q hit campaign %d, want %d", h.Key, h.Campaign, a)
				}
				got = append(got, string(h.Key))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("hits %q, want %q", got, tc.want)
			}
		})
	}
}

// A clean close leaves a checkpoint that the next open loads; a store
// changed since, a damaged file or another store's file is not used, and
// the index is rebuilt from the key lists.
func TestKeyIndexCheckpoint(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{Expiry: -1})
	var ids []CampaignID
	for i := range 300 {
		ids = append(ids, mustReport(t, s, spam("r", t0, fmt.Sprintf("k%d", i), fmt.Sprintf("k%d-b", i))).Campaign)
	}
	mustReport(t, s, spam("r", t0, "k1", "k2")) // a merge
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	lookups := func(s *Badger) {
		t.Helper()
		for i := range 300 {
			want := ids[i]
			if i == 2 {
				want = ids[1]
			}
			if got := lookupOne(t, s, fmt.Sprintf("k%d-b", i)); got != want {
				t.Fatalf("k%d-b: campaign %d, want %d", i, got, want)
			}
		}
		verifyClean(t, s)
	}
	open := func(want string) *Badger {
		t.Helper()
		s, err := Open(dir, Options{Logger: testLogger(t), Expiry: -1})
		if err != nil {
			t.Fatal(err)
		}
		if how, _, _, _ := s.keyIndexInfo(); how != want {
			t.Errorf("key index %s, want %s", how, want)
		}
		lookups(s)
		return s
	}
	s = open("checkpoint")
	// Changed and not closed: a copy of the directory is the store a
	// crash leaves.
	mustReport(t, s, spam("r", t0, "k3-b", "extra"))
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := Open(crashed, Options{Logger: testLogger(t), Expiry: -1})
	if err != nil {
		t.Fatal(err)
	}
	if how, _, _, _ := c.keyIndexInfo(); how != "rebuilt" {
		t.Errorf("crashed copy: key index %s, want rebuilt", how)
	}
	if id := lookupOne(t, c, "extra"); id != ids[3] {
		t.Errorf("crashed copy: extra in %d, want %d", id, ids[3])
	}
	verifyClean(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	s = open("checkpoint")
	s.Close()
	// Damaged: a flipped byte, a truncated file.
	path := filepath.Join(dir, checkpointFile)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{flip(good, len(good)/2), good[:len(good)-7], good[:30], append(slices.Clone(good), 0)} {
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		s = open("rebuilt")
		s.Close()
	}
	// Another store's checkpoint (its seed differs).
	other := openTest(t, crashed, Options{})
	other.Close()
	s = open("checkpoint")
	s.Close()
	cp, err := os.ReadFile(filepath.Join(crashed, checkpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, cp, 0o600); err != nil {
		t.Fatal(err)
	}
	s = open("rebuilt")
	s.Close()
}

func flip(b []byte, i int) []byte {
	b = slices.Clone(b)
	b[i] ^= 0x40
	return b
}

// rawStateHash is StateHash as schema 3 computed it: the 'k' entries as
// stored.
func rawStateHash(t *testing.T, s *Badger) string {
	t.Helper()
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	err := s.db.View(func(txn *badger.Txn) error {
		for _, pfx := range replicated {
			if pfx == pfxKeyList {
				if err := hashKeyLists(ctx, txn, h); err != nil {
					return err
				}
				continue
			}
			_, err := scanPrefix(txn, []byte{pfx}, true, 0, func(sfx, v []byte) error {
				k := append([]byte{pfx}, sfx...)
				h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
				h.Write(k)
				h.Write(n[:binary.PutUvarint(n[:], uint64(len(v)))])
				h.Write(v)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// The state hash of this schema is schema 3's for the same campaigns
// (its 'k' entries made from the key lists), in one part or in several,
// and stays so across the upgrade from schema 3: a fleet upgrades one
// node at a time.
func TestStateHashMatchesSchema3(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1})
	for i := range 400 {
		var ks []string
		for k := range 1 + i%23 {
			ks = append(ks, fmt.Sprintf("%c%d-%d", 'a'+i%5, i, k))
		}
		mustReport(t, s, spam(fmt.Sprintf("r%d", i%7), t0, ks...))
	}
	mustReport(t, s, spam("m", t0, "a0-0", "b1-0")) // a merge
	hash, err := s.StateHash(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func(p int64) { stateHashPart = p }(stateHashPart)
	stateHashPart = 4 << 10
	if h, err := s.StateHash(ctx); err != nil || h != hash {
		t.Errorf("state hash in parts %s, %v; in one %s", h, err, hash)
	}
	stateHashPart = 64 << 20
	s.Close()
	// The store as schema 3 kept it: the index entries as entries.
	db, err := badger.Open(badgerOptions(dir, Options{Logger: testLogger(t)}))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		return scanKeyLists(ctx, txn, func(id CampaignID, k []byte) {
			if err == nil {
				err = txn.Set(append([]byte{pfxIndex}, k...), idValue(id))
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSchema(db, 3); err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw := openRaw(t, dir)
	if h := rawStateHash(t, raw); h != hash {
		t.Errorf("schema 3's state hash %s, this schema's %s", h, hash)
	}
	raw.closeRaw()
	// The upgrade drops the entries and keeps the hash.
	s = openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1})
	if h, err := s.StateHash(ctx); err != nil || h != hash {
		t.Errorf("state hash after the upgrade %s, %v; want %s", h, err, hash)
	}
	err = s.db.View(func(txn *badger.Txn) error {
		n, err := scanPrefix(txn, []byte{pfxIndex}, false, 0, func(_, _ []byte) error { return nil })
		if n != 0 {
			return fmt.Errorf("%d index entries left after the upgrade", n)
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
	if id := lookupOne(t, s, "b1-0"); id == 0 || id != lookupOne(t, s, "a0-0") {
		t.Errorf("merged keys after the upgrade: %d, %d", id, lookupOne(t, s, "a0-0"))
	}
	verifyClean(t, s)
}

// openRaw opens dir's Badger database as a Badger store without checking
// its schema or building its key index (for rawStateHash).
func openRaw(t *testing.T, dir string) *Badger {
	t.Helper()
	db, err := badger.Open(badgerOptions(dir, Options{Logger: testLogger(t)}))
	if err != nil {
		t.Fatal(err)
	}
	return &Badger{db: db, closed: make(chan struct{})}
}

func (b *Badger) closeRaw() error { return b.db.Close() }
