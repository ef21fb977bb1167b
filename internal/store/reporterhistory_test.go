package store

import (
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// history renders reporter's campaigns as "id:kind:state:spam/ham".
func history(t *testing.T, s *Badger, reporter string) []ReporterCampaign {
	t.Helper()
	rc, err := s.ReporterCampaigns(ctx, ReporterHash(reporter), 0)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func historyIDs(rc []ReporterCampaign) []CampaignID {
	var ids []CampaignID
	for _, c := range rc {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestReporterCampaigns(t *testing.T) {
	s := openTest(t, "", Options{NoSyncWrites: true, Expiry: -1})
	a := mustReport(t, s, spam("alice", t0, "a1", "a2"))
	b := mustReport(t, s, spam("alice", t0, "b1", "b2"))
	mustReport(t, s, spam("bob", t0, "a1"))
	ham := spam("carol", t0, "b1")
	ham.Kind, ham.Create = KindHam, false
	mustReport(t, s, ham)
	if err := s.SetState(ctx, b.Campaign, StateAllowed); err != nil {
		t.Fatal(err)
	}

	got := history(t, s, "alice")
	want := []ReporterCampaign{
		{ID: b.Campaign, Kind: KindSpam, State: StateAllowed, SpamReporters: 1, HamReporters: 1},
		{ID: a.Campaign, Kind: KindSpam, State: StateActive, SpamReporters: 2},
	}
	if !slices.Equal(got, want) {
		t.Errorf("alice: %+v, want %+v", got, want)
	}
	if got := history(t, s, "carol"); len(got) != 1 || got[0].Kind != KindHam || got[0].ID != b.Campaign {
		t.Errorf("carol: %+v", got)
	}
	if got, err := s.ReporterCampaigns(ctx, ReporterHash("alice"), 1); err != nil || len(got) != 1 || got[0].ID != b.Campaign {
		t.Errorf("alice, limit 1: %+v, %v", got, err)
	}
	if got := history(t, s, "nobody"); len(got) != 0 {
		t.Errorf("nobody: %+v", got)
	}

	// A merge moves the entries to the campaign merged into.
	c := mustReport(t, s, spam("dave", t0, "c1", "c2"))
	if err := s.SetState(ctx, b.Campaign, StateActive); err != nil {
		t.Fatal(err)
	}
	m := mustReport(t, s, spam("erin", t0, "a2", "c2"))
	if len(m.Merged) == 0 {
		t.Fatalf("no merge: %+v", m)
	}
	for _, r := range []string{"alice", "bob", "dave", "erin"} {
		for _, rc := range history(t, s, r) {
			if rc.ID != m.Campaign && rc.ID != b.Campaign {
				t.Errorf("%s still lists campaign %d after the merge into %d", r, rc.ID, m.Campaign)
			}
		}
	}
	_ = c
	verifyClean(t, s)

	// Deleting a campaign deletes its entries.
	if err := s.Delete(ctx, b.Campaign); err != nil {
		t.Fatal(err)
	}
	if ids := historyIDs(history(t, s, "carol")); len(ids) != 0 {
		t.Errorf("carol after the delete: %v", ids)
	}
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		n, err = scanPrefix(txn, []byte{pfxReporterCamp}, false, 0, func(_, _ []byte) error { return nil })
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := int(verifyClean(t, s).Reporters); n != want {
		t.Errorf("%d entries by reporter, %d reporter records", n, want)
	}
}

// TestMigrateV5 opens a store as schema 4 kept it (no index by reporter)
// and finds the index built, and verify finds an entry missing or left.
func TestMigrateV5(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1})
	a := mustReport(t, s, spam("alice", t0, "a1"))
	mustReport(t, s, spam("bob", t0, "a1"))
	b := mustReport(t, s, spam("alice", t0, "b1"))
	s.Close()
	db, err := badger.Open(badgerOptions(dir, Options{Logger: testLogger(t)}))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.DropPrefix([]byte{pfxReporterCamp}); err != nil {
		t.Fatal(err)
	}
	if err := writeSchema(db, 4); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s = openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1})
	if ids := historyIDs(history(t, s, "alice")); !slices.Equal(ids, []CampaignID{b.Campaign, a.Campaign}) {
		t.Errorf("alice after the upgrade: %v", ids)
	}
	verifyClean(t, s)

	// Verify finds a missing entry and a stale one, and repairs both.
	err = s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Delete(reporterCampKey(ReporterHash("bob"), a.Campaign, KindSpam)); err != nil {
			return err
		}
		return txn.Set(reporterCampKey(ReporterHash("mallory"), a.Campaign, KindSpam), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Verify(ctx, false)
	if err != nil || res.ReporterIndex != 2 {
		t.Fatalf("verify: %+v, %v; want 2 index entries by reporter wrong", res, err)
	}
	if res, err = s.Verify(ctx, true); err != nil || res.Repaired < 2 {
		t.Fatalf("repair: %+v, %v", res, err)
	}
	verifyClean(t, s)
	if ids := historyIDs(history(t, s, "bob")); !slices.Equal(ids, []CampaignID{a.Campaign}) {
		t.Errorf("bob after the repair: %v", ids)
	}
}
