package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

var ctx = context.Background()

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func openTest(t testing.TB, dir string, opts Options) *Badger {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func keys(names ...string) [][]byte {
	out := make([][]byte, len(names))
	for i, n := range names {
		out[i] = []byte(n)
	}
	return out
}

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func spam(reporter string, at time.Time, ks ...string) ReportInput {
	return ReportInput{Time: at, Kind: KindSpam, Reporter: reporter, Keys: keys(ks...), Create: true, Index: true,
		Subject: "subject " + strings.Join(ks, ","), From: "from@example.com"}
}

func mustReport(t testing.TB, s *Badger, in ReportInput) ReportResult {
	t.Helper()
	r, err := s.Report(ctx, in)
	if err != nil {
		t.Fatalf("Report: %v", err)
	}
	return r
}

func mustGet(t testing.TB, s *Badger, id CampaignID) *Campaign {
	t.Helper()
	c, err := s.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return c
}

func sortedKeys(c *Campaign) []string {
	var out []string
	for _, k := range c.Keys {
		out = append(out, string(k))
	}
	slices.Sort(out)
	return out
}

func verifyClean(t testing.TB, s *Badger) VerifyResult {
	t.Helper()
	v, err := s.Verify(ctx, false)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if v.Problems() != 0 {
		t.Fatalf("Verify found problems: %+v", v)
	}
	return v
}

func lookupOne(t testing.TB, s *Badger, k string) CampaignID {
	t.Helper()
	hits, err := s.Lookup(ctx, keys(k))
	if err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	if len(hits) == 0 {
		return 0
	}
	return hits[0].Campaign
}

func TestCreateJoinMerge(t *testing.T) {
	s := openTest(t, "", Options{})
	r1 := mustReport(t, s, spam("alice", t0, "a1", "a2"))
	if !r1.Created || r1.Campaign == 0 {
		t.Fatalf("first report: %+v, want created", r1)
	}
	r2 := mustReport(t, s, spam("bob", t0.Add(time.Minute), "a2", "a3"))
	if r2.Created || r2.Campaign != r1.Campaign || len(r2.Merged) != 0 {
		t.Fatalf("join: %+v, want campaign %d", r2, r1.Campaign)
	}
	r3 := mustReport(t, s, spam("carol", t0.Add(2*time.Minute), "b1"))
	if !r3.Created || r3.Campaign == r1.Campaign {
		t.Fatalf("second campaign: %+v", r3)
	}
	// A report sharing keys with both merges them into the oldest.
	r4 := mustReport(t, s, spam("dave", t0.Add(time.Hour), "a1", "b1", "c1"))
	if r4.Campaign != r1.Campaign || !slices.Equal(r4.Merged, []CampaignID{r3.Campaign}) {
		t.Fatalf("merge: %+v, want %d with merged [%d]", r4, r1.Campaign, r3.Campaign)
	}
	c := mustGet(t, s, r1.Campaign)
	if got, want := sortedKeys(c), []string{"a1", "a2", "a3", "b1", "c1"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	if c.SpamReports != 4 || c.SpamReporters != 4 || c.HamReports != 0 {
		t.Errorf("counts %+v", c)
	}
	if !c.FirstSeen.Equal(t0) || !c.LastSeen.Equal(t0.Add(time.Hour)) {
		t.Errorf("first/last seen %v %v", c.FirstSeen, c.LastSeen)
	}
	if !slices.Equal(c.MergedFrom, []CampaignID{r3.Campaign}) {
		t.Errorf("MergedFrom %v", c.MergedFrom)
	}
	if c.SampleSubject != "subject a1,a2" {
		t.Errorf("sample subject %q", c.SampleSubject)
	}
	if _, err := s.Get(ctx, r3.Campaign); !errors.Is(err, ErrNotFound) {
		t.Errorf("merged campaign still there: %v", err)
	}
	for _, k := range []string{"a1", "a2", "a3", "b1", "c1"} {
		if id := lookupOne(t, s, k); id != r1.Campaign {
			t.Errorf("Lookup(%s) = %d, want %d", k, id, r1.Campaign)
		}
	}
	tl, err := s.Timeline(ctx, r1.Campaign)
	if err != nil || len(tl) != 1 || tl[0].SpamReports != 4 {
		t.Errorf("timeline %+v, %v", tl, err)
	}
	verifyClean(t, s)
}

func TestJoinAndMergeByID(t *testing.T) {
	s := openTest(t, "", Options{})
	a := mustReport(t, s, spam("r1", t0, "a"))
	b := mustReport(t, s, spam("r2", t0, "b"))
	// Similarity match: no shared key, the caller names the campaign.
	in := spam("r3", t0, "a-variant")
	in.Join = []CampaignID{b.Campaign}
	r := mustReport(t, s, in)
	if r.Campaign != b.Campaign || r.Created {
		t.Fatalf("join by id: %+v", r)
	}
	if lookupOne(t, s, "a-variant") != b.Campaign {
		t.Errorf("joined key not indexed")
	}
	// Join of two campaigns merges them; an unknown id is ignored.
	in = spam("r4", t0, "z")
	in.Join = []CampaignID{b.Campaign, a.Campaign, 999}
	r = mustReport(t, s, in)
	if r.Campaign != a.Campaign || !slices.Equal(r.Merged, []CampaignID{b.Campaign}) {
		t.Fatalf("merge by id: %+v", r)
	}
	c := mustGet(t, s, a.Campaign)
	if got, want := sortedKeys(c), []string{"a", "a-variant", "b", "z"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	if c.SpamReports != 4 || c.SpamReporters != 4 {
		t.Errorf("counts %d/%d", c.SpamReports, c.SpamReporters)
	}
	verifyClean(t, s)
}

func TestReporterFlooding(t *testing.T) {
	s := openTest(t, "", Options{NoSyncWrites: true})
	var id CampaignID
	for i := 0; i < 1000; i++ {
		// The same account floods variants of the campaign.
		r := mustReport(t, s, spam("spammer@example.com", t0.Add(time.Duration(i)*time.Second), "k", fmt.Sprintf("v%d", i)))
		if i == 0 {
			id = r.Campaign
		} else if r.Campaign != id || !r.Repeated {
			t.Fatalf("report %d: %+v", i, r)
		}
	}
	mustReport(t, s, spam("honest@example.com", t0, "k"))
	c := mustGet(t, s, id)
	if c.SpamReports != 1001 || c.SpamReporters != 2 {
		t.Errorf("reports %d reporters %d, want 1001 and 2", c.SpamReports, c.SpamReporters)
	}
	verifyClean(t, s)
}

func TestHamReports(t *testing.T) {
	s := openTest(t, "", Options{})
	a := mustReport(t, s, spam("r1", t0, "a", "b"))
	ham := func(rep string, ks ...string) ReportResult {
		return mustReport(t, s, ReportInput{Time: t0.Add(time.Hour), Kind: KindHam, Reporter: rep, Keys: keys(ks...)})
	}
	if r := ham("u1", "a", "new"); r.Campaign != a.Campaign || r.Created || r.Repeated {
		t.Fatalf("ham: %+v", r)
	}
	if r := ham("u1", "b"); !r.Repeated {
		t.Errorf("second ham by u1 not Repeated: %+v", r)
	}
	ham("u2", "a")
	if r := ham("u3", "unknown"); r.Campaign != 0 || r.Created {
		t.Errorf("ham on unknown keys: %+v", r)
	}
	c := mustGet(t, s, a.Campaign)
	if c.HamReports != 3 || c.HamReporters != 2 || c.SpamReports != 1 || c.SpamReporters != 1 {
		t.Errorf("counts %+v", c)
	}
	if got := sortedKeys(c); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("ham report indexed keys: %v", got)
	}
	// Anonymous reporters count as one.
	mustReport(t, s, ReportInput{Time: t0, Kind: KindSpam, Keys: keys("a")})
	if r := mustReport(t, s, ReportInput{Time: t0, Kind: KindSpam, Keys: keys("a")}); !r.Repeated {
		t.Errorf("anonymous reporter counted twice")
	}
	if _, err := s.Report(ctx, ReportInput{Kind: 7}); err == nil {
		t.Errorf("unknown kind accepted")
	}
	verifyClean(t, s)
}

func TestRecordHit(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{HitFlushInterval: time.Hour})
	a := mustReport(t, s, spam("r", t0, "a"))
	for i := 0; i < 10; i++ {
		act := "reject"
		if i%2 == 0 {
			act = "tag"
		}
		if err := s.RecordHit(ctx, a.Campaign, act, t0.Add(48*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordHit(ctx, 12345, "tag", t0); err != nil { // unknown: dropped at flush
		t.Fatal(err)
	}
	// Buffered hits are visible through Get before the flush.
	if c := mustGet(t, s, a.Campaign); c.Messages != 10 || c.Actions["tag"] != 5 {
		t.Errorf("before flush: %+v", c)
	}
	if err := s.Close(); err != nil { // Close flushes
		t.Fatal(err)
	}
	s = openTest(t, dir, Options{})
	c := mustGet(t, s, a.Campaign)
	if c.Messages != 10 || c.Actions["tag"] != 5 || c.Actions["reject"] != 5 || !c.LastSeen.Equal(t0.Add(48*time.Hour)) {
		t.Errorf("after flush: %+v", c)
	}
	tl, err := s.Timeline(ctx, a.Campaign)
	if err != nil || len(tl) != 2 || tl[0].SpamReports != 1 || tl[1].Messages != 10 ||
		!tl[1].Day.Equal(time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("timeline %+v %v", tl, err)
	}
	verifyClean(t, s)
}

func TestExpire(t *testing.T) {
	s := openTest(t, "", Options{Expiry: -1})
	old := mustReport(t, s, spam("r", t0, "old1", "old2"))
	hit := mustReport(t, s, spam("r", t0, "hit1"))
	fresh := mustReport(t, s, spam("r", t0.Add(20*24*time.Hour), "fresh"))
	if err := s.RecordHit(ctx, hit.Campaign, "tag", t0.Add(25*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushHits(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := s.Expire(ctx, t0.Add(10*24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("Expire = %d, %v; want 1", n, err)
	}
	if _, err := s.Get(ctx, old.Campaign); !errors.Is(err, ErrNotFound) {
		t.Errorf("old campaign survived: %v", err)
	}
	for _, id := range []CampaignID{hit.Campaign, fresh.Campaign} {
		mustGet(t, s, id)
	}
	if lookupOne(t, s, "old1") != 0 {
		t.Errorf("expired key still indexed")
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Campaigns != 2 || st.Keys != 2 {
		t.Errorf("stats %+v %v", st, err)
	}
	verifyClean(t, s)
}

// rawCount counts entries of the raw database that mention id.
func rawCount(t *testing.T, s *Badger, id CampaignID, sigs ...string) int {
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		idb := idKey(0, id)[1:]
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) >= 9 && bytes.Equal(k[1:9], idb) {
				n++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDelete(t *testing.T) {
	s := openTest(t, "", Options{})
	a := mustReport(t, s, spam("r1", t0, "a", "b"))
	mustReport(t, s, spam("r2", t0.Add(30*time.Hour), "b", "c"))
	mustReport(t, s, ReportInput{Time: t0, Kind: KindHam, Reporter: "h", Keys: keys("a")})
	other := mustReport(t, s, spam("r1", t0, "z"))
	if err := s.RecordHit(ctx, a.Campaign, "reject", t0); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, s, a.Campaign, "a", "b", "c"); n == 0 {
		t.Fatal("nothing stored")
	}
	if err := s.Delete(ctx, a.Campaign); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushHits(ctx); err != nil { // a pending hit must not resurrect it
		t.Fatal(err)
	}
	if n := rawCount(t, s, a.Campaign, "a", "b", "c"); n != 0 {
		t.Errorf("%d entries of the deleted campaign left", n)
	}
	for _, k := range []string{"a", "b", "c"} {
		if id := lookupOne(t, s, k); id != 0 {
			t.Errorf("key %q of the deleted campaign still found (campaign %d)", k, id)
		}
	}
	if err := s.Delete(ctx, a.Campaign); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if _, err := s.Timeline(ctx, a.Campaign); !errors.Is(err, ErrNotFound) {
		t.Errorf("timeline of deleted: %v", err)
	}
	mustGet(t, s, other.Campaign)
	verifyClean(t, s)
}

func TestSchemaVersion(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	mustReport(t, s, spam("r", t0, "a"))
	s.Close()
	setSchema := func(v uint32) {
		db, err := badger.Open(badgerOptions(dir, Options{Logger: testLogger(t)}))
		if err != nil {
			t.Fatal(err)
		}
		if err := writeSchema(db, v); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	tests := []struct {
		version uint32
		want    string
	}{
		{99, "store schema v99 is newer than this nddmilter (v5); upgrade nddmilter"},
		{0, "store schema v0 is older than this nddmilter (v5) and cannot be migrated"},
		{SchemaVersion, ""},
	}
	for _, tc := range tests {
		setSchema(tc.version)
		s, err := Open(dir, Options{Logger: testLogger(t)})
		if tc.want == "" {
			if err != nil {
				t.Errorf("v%d: %v", tc.version, err)
			} else {
				s.Close()
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("v%d: error %v, want %q", tc.version, err, tc.want)
		}
		if err == nil {
			s.Close()
		}
	}
	// A Badger database that is not an nddmilter store.
	other := t.TempDir()
	db, err := badger.Open(badgerOptions(other, Options{Logger: testLogger(t)}))
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("foo"), []byte("bar")) })
	db.Close()
	if _, err := Open(other, Options{Logger: testLogger(t)}); err == nil || !strings.Contains(err.Error(), "not an nddmilter store") {
		t.Errorf("foreign database: %v", err)
	}
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	a := mustReport(t, s, spam("r", t0, "a"))
	s.Close()
	ro := openTest(t, dir, Options{ReadOnly: true})
	if lookupOne(t, ro, "a") != a.Campaign {
		t.Errorf("read-only lookup failed")
	}
	if _, err := ro.Report(ctx, spam("r", t0, "b")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only report: %v", err)
	}
	if err := ro.RecordHit(ctx, a.Campaign, "tag", t0); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only hit: %v", err)
	}
	verifyClean(t, ro)
	if _, err := Open(t.TempDir()+"/missing", Options{ReadOnly: true, Logger: testLogger(t)}); err == nil {
		t.Errorf("read-only open of a missing store succeeded")
	}
}

func TestList(t *testing.T) {
	s := openTest(t, "", Options{})
	a := mustReport(t, s, spam("r", t0, "a"))
	b := mustReport(t, s, spam("r", t0.Add(time.Hour), "b"))
	mustReport(t, s, spam("r2", t0, "b"))
	c := mustReport(t, s, spam("r", t0.Add(2*time.Hour), "c"))
	for i := 0; i < 3; i++ {
		s.RecordHit(ctx, a.Campaign, "tag", t0)
	}
	tests := []struct {
		q    Query
		want []CampaignID
	}{
		{Query{}, []CampaignID{c.Campaign, b.Campaign, a.Campaign}},
		{Query{Sort: "volume"}, []CampaignID{a.Campaign, b.Campaign, c.Campaign}},
		{Query{Sort: "reports"}, []CampaignID{b.Campaign, a.Campaign, c.Campaign}},
		{Query{Since: t0.Add(time.Hour)}, []CampaignID{c.Campaign, b.Campaign}},
		{Query{Sort: "recent", Limit: 1}, []CampaignID{c.Campaign}},
	}
	if err := s.FlushHits(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		got, err := s.List(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var ids []CampaignID
		for _, c := range got {
			ids = append(ids, c.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("List(%+v) = %v, want %v", tc.q, ids, tc.want)
		}
	}
	if _, err := s.List(ctx, Query{Sort: "size"}); err == nil {
		t.Error("unknown sort accepted")
	}
}

// A campaign an administrator allowed, or a revoked one, is never merged
// nor merged into, whatever the report asks (issue 11): a report sharing
// keys with an active and a non-active campaign joins the active one, and
// the keys of the other stay with it.
func TestSetStateAndNoMergeAcrossStates(t *testing.T) {
	for _, st := range []State{StateAllowed, StateRevoked} {
		t.Run(fmt.Sprint(st), func(t *testing.T) {
			s := openTest(t, "", Options{})
			a := mustReport(t, s, spam("r", t0, "a"))
			b := mustReport(t, s, spam("r", t0, "b"))
			if err := s.SetState(ctx, a.Campaign, st); err != nil {
				t.Fatal(err)
			}
			if err := s.SetState(ctx, 4242, st); !errors.Is(err, ErrNotFound) {
				t.Errorf("SetState unknown: %v", err)
			}
			c := mustReport(t, s, spam("r", t0, "c"))
			// Legacy (not vetted): the active campaigns b and c merge, a
			// (older, not active) is left alone.
			r := mustReport(t, s, spam("x", t0, "a", "b", "c", "d"))
			if r.Campaign != b.Campaign || !slices.Equal(r.Merged, []CampaignID{c.Campaign}) {
				t.Fatalf("report: %+v, want joined %d merged [%d]", r, b.Campaign, c.Campaign)
			}
			if got := mustGet(t, s, a.Campaign); got.State != st || got.SpamReporters != 1 {
				t.Errorf("campaign a after the report: %+v", got)
			}
			if got := mustGet(t, s, b.Campaign); got.State != StateActive || got.SpamReporters != 2 {
				t.Errorf("campaign b after the report: %+v", got)
			}
			for k, want := range map[string]CampaignID{"a": a.Campaign, "b": b.Campaign, "c": b.Campaign, "d": b.Campaign} {
				if id := lookupOne(t, s, k); id != want {
					t.Errorf("Lookup(%s) = %d, want %d", k, id, want)
				}
			}
			// A report found only through the non-active campaign joins it
			// (its reporter counts) without changing its state.
			r = mustReport(t, s, spam("y", t0, "a", "e"))
			if r.Campaign != a.Campaign || len(r.Merged) != 0 {
				t.Fatalf("report on a: %+v", r)
			}
			if got := mustGet(t, s, a.Campaign); got.State != st || got.SpamReporters != 2 {
				t.Errorf("campaign a: %+v", got)
			}
			// Vetted: asking to merge a non-active campaign does nothing.
			in := spam("z", t0, "f")
			in.Vetted, in.Target, in.MayMerge = true, b.Campaign, []CampaignID{a.Campaign}
			if r = mustReport(t, s, in); r.Campaign != b.Campaign || len(r.Merged) != 0 {
				t.Errorf("vetted merge of a non-active campaign: %+v", r)
			}
			in = spam("z", t0, "g")
			in.Vetted, in.Target, in.MayMerge = true, a.Campaign, []CampaignID{b.Campaign}
			if r = mustReport(t, s, in); r.Campaign != a.Campaign || len(r.Merged) != 0 {
				t.Errorf("vetted merge into a non-active campaign: %+v", r)
			}
			if got := mustGet(t, s, a.Campaign); got.State != st {
				t.Errorf("campaign a state %d, want %d", got.State, st)
			}
			verifyClean(t, s)
		})
	}
}

// A vetted report joins its target and merges only what MayMerge names:
// keys owned by other campaigns stay with them.
func TestVettedReport(t *testing.T) {
	s := openTest(t, "", Options{})
	a := mustReport(t, s, spam("r", t0, "a")).Campaign
	b := mustReport(t, s, spam("r", t0, "b")).Campaign
	c := mustReport(t, s, spam("r", t0, "c")).Campaign
	vetted := func(who string, target CampaignID, may []CampaignID, keys ...string) ReportResult {
		in := spam(who, t0, keys...)
		in.Vetted, in.Target, in.MayMerge = true, target, may
		return mustReport(t, s, in)
	}
	// Target c, sharing keys with a and b: only c is joined.
	r := vetted("x", c, nil, "a", "b", "c", "n1")
	if r.Campaign != c || r.Created || len(r.Merged) != 0 {
		t.Fatalf("vetted join: %+v", r)
	}
	for k, want := range map[string]CampaignID{"a": a, "b": b, "c": c, "n1": c} {
		if id := lookupOne(t, s, k); id != want {
			t.Errorf("Lookup(%s) = %d, want %d", k, id, want)
		}
	}
	// Target c, may merge b: merged into the oldest (b); a left alone.
	r = vetted("y", c, []CampaignID{b, 999}, "a", "n2")
	if r.Campaign != b || !slices.Equal(r.Merged, []CampaignID{c}) {
		t.Fatalf("vetted merge: %+v", r)
	}
	if id := lookupOne(t, s, "a"); id != a {
		t.Errorf("Lookup(a) = %d, want %d", id, a)
	}
	if got := mustGet(t, s, b); got.SpamReporters != 3 {
		t.Errorf("merged campaign: %+v", got)
	}
	// No target: the oldest campaign owning a key (one created earlier in
	// a batch) is joined, nothing merged; else a campaign is created.
	r = vetted("z", 0, []CampaignID{b}, "n2", "a", "n3")
	if r.Campaign != a || len(r.Merged) != 0 || r.Created {
		t.Fatalf("vetted without target: %+v", r)
	}
	if id := lookupOne(t, s, "n3"); id != a {
		t.Errorf("Lookup(n3) = %d, want %d", id, a)
	}
	r = vetted("z", 0, nil, "n4")
	if !r.Created {
		t.Fatalf("vetted create: %+v", r)
	}
	verifyClean(t, s)
}

func TestSketches(t *testing.T) {
	s := openTest(t, "", Options{MaxSketches: 3})
	var id CampaignID
	for i := 0; i < 6; i++ {
		in := spam(fmt.Sprint(i), t0, "k")
		in.Sketch = []byte{1, byte(i % 4)}
		// Another family's sketches (first byte 'Q') have their own quota.
		in.MoreSketches = [][]byte{{'Q', byte(i)}}
		id = mustReport(t, s, in).Campaign
	}
	c := mustGet(t, s, id)
	want := [][]byte{{1, 0}, {'Q', 0}, {1, 1}, {'Q', 1}, {1, 2}, {'Q', 2}}
	if !slices.EqualFunc(c.Sketches, want, bytes.Equal) {
		t.Errorf("sketches %v, want %v", c.Sketches, want)
	}
}

// bigCampaign reports n keys prefixed by name in reports of 2,000 keys.
func bigCampaign(t testing.TB, s *Badger, name string, n int) CampaignID {
	var id CampaignID
	for start := 0; start < n; start += 2000 {
		var ks []string
		for i := start; i < min(n, start+2000); i++ {
			ks = append(ks, fmt.Sprintf("%s-%06d", name, i))
		}
		in := spam(name, t0, ks...)
		if id != 0 {
			in.Join = []CampaignID{id}
		}
		id = mustReport(t, s, in).Campaign
	}
	return id
}

func TestLargeMergeAndDelete(t *testing.T) {
	s := openTest(t, "", Options{NoSyncWrites: true})
	small := mustReport(t, s, spam("r", t0, "small")).Campaign
	big := bigCampaign(t, s, "big", 24000) // more keys than one transaction moves: several
	for i := 0; i < 50; i++ {
		mustReport(t, s, spam(fmt.Sprintf("rep%d", i), t0, "big-000000"))
	}
	r := mustReport(t, s, spam("joiner", t0, "small", "big-000001"))
	if r.Campaign != small || !slices.Equal(r.Merged, []CampaignID{big}) {
		t.Fatalf("merge: %+v", r)
	}
	c := mustGet(t, s, small)
	if len(c.Keys) != 24001 || c.SpamReports != 64 || c.SpamReporters != 53 {
		t.Errorf("merged: %d keys, %d reports, %d reporters", len(c.Keys), c.SpamReports, c.SpamReporters)
	}
	if lookupOne(t, s, "big-008999") != small {
		t.Errorf("moved key not re-pointed")
	}
	verifyClean(t, s)
	if err := s.Delete(ctx, small); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(ctx); st.Campaigns != 0 || st.Keys != 0 {
		t.Errorf("after delete: %+v", st)
	}
	v := verifyClean(t, s)
	if v.IndexKeys != 0 || v.KeyListEntries != 0 || v.Reporters != 0 || v.DayCounters != 0 {
		t.Errorf("entries left: %+v", v)
	}
}

func TestReportBatch(t *testing.T) {
	s := openTest(t, "", Options{})
	var ins []ReportInput
	for i := 0; i < 3000; i++ {
		// 1,000 campaigns of 3 reports each; every 100th report bridges
		// two campaigns and merges them.
		c := i % 1000
		ks := []string{fmt.Sprintf("c%d-a", c), fmt.Sprintf("c%d-%d", c, i)}
		if i >= 1000 && i%100 == 0 {
			ks = append(ks, fmt.Sprintf("c%d-a", (c+1)%1000))
		}
		ins = append(ins, spam(fmt.Sprintf("rep%d", i), t0, ks...))
	}
	res, err := s.ReportBatch(ctx, ins)
	if err != nil || len(res) != len(ins) {
		t.Fatalf("ReportBatch: %d results, %v", len(res), err)
	}
	created, merged := 0, 0
	for _, r := range res {
		if r.Created {
			created++
		}
		merged += len(r.Merged)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if created != 1000 || int(st.Campaigns) != 1000-merged || st.Keys != 4000 {
		t.Errorf("created %d merged %d, stats %+v", created, merged, st)
	}
	var total int64
	cs, _ := s.List(ctx, Query{Limit: MaxListLimit})
	for _, c := range cs {
		total += c.SpamReports
	}
	if total != 3000 || st.SpamReports != 3000 {
		t.Errorf("total reports %d (stats %d), want 3000", total, st.SpamReports)
	}
	verifyClean(t, s)
}

func TestConcurrentReadersAndWriters(t *testing.T) {
	s := openTest(t, "", Options{HitFlushInterval: 20 * time.Millisecond})
	const writers, perWriter = 4, 60
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errc := make(chan error, 16)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				// Shared keys across writers force joins, merges and conflicts.
				in := spam(fmt.Sprintf("w%d", w), t0, fmt.Sprintf("shared-%d", i%7), fmt.Sprintf("w%d-%d", w, i))
				r, err := s.Report(ctx, in)
				if err != nil {
					errc <- err
					return
				}
				if err := s.RecordHit(ctx, r.Campaign, "tag", t0); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	var rg sync.WaitGroup
	for r := 0; r < 2; r++ {
		rg.Add(1)
		go func() {
			defer rg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				hits, err := s.Lookup(ctx, keys("shared-1", "shared-2", "w0-1"))
				if err != nil {
					errc <- err
					return
				}
				for _, h := range hits {
					if _, err := s.Get(ctx, h.Campaign); err != nil && !errors.Is(err, ErrNotFound) {
						errc <- err
						return
					}
				}
				if _, err := s.List(ctx, Query{Limit: 3}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if err := s.FlushHits(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := s.List(ctx, Query{})
	if err != nil {
		t.Fatal(err)
	}
	var reports int64
	for _, c := range cs {
		reports += c.SpamReports
	}
	if reports != writers*perWriter {
		t.Errorf("reports %d, want %d (campaigns %d)", reports, writers*perWriter, len(cs))
	}
	verifyClean(t, s)
}

// TestRestoreBadFile restores garbage, compressed, truncated and
// oversized-frame files: each is an error wrapping ErrBadBackup (never a
// panic), leaves neither the target nor a temporary directory behind, and
// a retry with the good backup then works.
func TestRestoreBadFile(t *testing.T) {
	s := openTest(t, "", Options{})
	for i := 0; i < 20; i++ {
		mustReport(t, s, spam(fmt.Sprint(i%3), t0.Add(time.Duration(i)*time.Hour), fmt.Sprintf("k%d", i), fmt.Sprintf("u%d", i)))
	}
	var good bytes.Buffer
	if _, err := s.Backup(ctx, &good); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(good.Bytes())
	zw.Close()
	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(i*7919 + i>>3)
	}
	huge := binary.LittleEndian.AppendUint64(nil, 1<<62)
	huge = append(huge, garbage[:100]...)
	badProto := binary.LittleEndian.AppendUint64(nil, 16)
	badProto = append(badProto, bytes.Repeat([]byte{0xff}, 16)...)
	g := good.Bytes()
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"garbage", garbage},
		{"text", []byte("this is not a backup at all, just some text\n")},
		{"gzip", gz.Bytes()},
		{"huge frame", huge},
		{"bad protobuf", badProto},
		{"short", g[:5]},
		{"truncated header", g[:len(g)/2]},
		{"truncated", g[:len(g)-3]},
		{"good then garbage", append(slices.Clone(g), garbage[:64]...)},
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "restored")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Restore(ctx, dir, bytes.NewReader(c.data), Options{Logger: testLogger(t)})
			if !errors.Is(err, ErrBadBackup) {
				t.Errorf("err %v, want ErrBadBackup", err)
			}
			if ents, _ := os.ReadDir(parent); len(ents) != 0 {
				t.Errorf("left behind: %v", ents)
			}
		})
	}
	if v, err := Restore(ctx, dir, bytes.NewReader(g), Options{Logger: testLogger(t)}); err != nil || v.Problems() != 0 || v.Campaigns == 0 {
		t.Fatalf("retry with the good backup: %+v %v", v, err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("after the good restore: %v", ents)
	}
	// An existing empty directory (made by the service manager) is fine.
	empty := filepath.Join(parent, "empty")
	os.Mkdir(empty, 0o700)
	if _, err := Restore(ctx, empty, bytes.NewReader(g), Options{Logger: testLogger(t)}); err != nil {
		t.Fatal(err)
	}
}

func TestBackupRestore(t *testing.T) {
	s := openTest(t, "", Options{})
	for i := 0; i < 50; i++ {
		mustReport(t, s, spam(fmt.Sprint(i%5), t0.Add(time.Duration(i)*time.Hour), fmt.Sprintf("k%d", i%20), fmt.Sprintf("u%d", i)))
	}
	s.RecordHit(ctx, 1, "reject", t0)
	var buf bytes.Buffer
	if _, err := s.Backup(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	before, _ := s.List(ctx, Query{Sort: "volume"})
	dir := t.TempDir() + "/restored"
	if v, err := Restore(ctx, dir, bytes.NewReader(buf.Bytes()), Options{Logger: testLogger(t)}); err != nil || v.Problems() != 0 {
		t.Fatal(v, err)
	}
	if _, err := Restore(ctx, dir, bytes.NewReader(buf.Bytes()), Options{Logger: testLogger(t)}); err == nil {
		t.Error("restore into a non-empty directory succeeded")
	}
	r := openTest(t, dir, Options{})
	after, _ := r.List(ctx, Query{Sort: "volume"})
	if len(before) == 0 || len(before) != len(after) {
		t.Fatalf("campaigns before %d after %d", len(before), len(after))
	}
	for i := range before {
		b, a := mustGet(t, s, before[i].ID), mustGet(t, r, after[i].ID)
		if b.ID != a.ID || b.SpamReports != a.SpamReports || b.SpamReporters != a.SpamReporters ||
			b.Messages != a.Messages || !slices.Equal(sortedKeys(b), sortedKeys(a)) || !b.LastSeen.Equal(a.LastSeen) {
			t.Errorf("campaign differs:\n%+v\n%+v", b, a)
		}
	}
	// New ids continue after the restored ones.
	n := mustReport(t, r, spam("x", t0, "brand-new"))
	for _, c := range after {
		if n.Campaign <= c.ID {
			t.Errorf("new campaign id %d reuses restored id range (%d)", n.Campaign, c.ID)
		}
	}
	verifyClean(t, r)
}

func TestVerifyRepair(t *testing.T) {
	s := openTest(t, "", Options{})
	a := mustReport(t, s, spam("r", t0, "a", "b")).Campaign
	// Corrupt behind the key index's back: an orphan key list, a
	// campaign's list that lost "b" (the index still has it), lists "a"
	// again and gains "new" and "new2" (the index lacks them), a
	// malformed chunk, an orphan reporter and day counter; the key count
	// is then wrong.
	err := s.db.Update(func(txn *badger.Txn) error {
		for _, e := range []struct{ k, v []byte }{
			{keyChunkKey(778, 0), encodeKeyChunk([][]byte{[]byte("orphan")})},
			{keyChunkKey(a, 0), encodeKeyChunk([][]byte{[]byte("a")})},                   // "b" dangling in the index
			{keyChunkKey(a, 5), encodeKeyChunk([][]byte{[]byte("a")})},                   // listed twice
			{keyChunkKey(a, 6), []byte{keyChunkV1, 0xff}},                                // malformed
			{keyChunkKey(a, 7), encodeKeyChunk([][]byte{[]byte("new"), []byte("new2")})}, // unlisted in the index
			{reporterKey(779, KindSpam, 1), encodeReporter(t0, t0)},
			{dayKey(779, 5), dayCounts{1, 1, 1}.encode()},
		} {
			if err := txn.Set(e.k, e.v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Verify(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	want := VerifyResult{DanglingIndex: 1, OrphanKeyList: 3, OrphanReporters: 1, OrphanDays: 1, UnlistedIndex: 2, CountMismatch: 1}
	got := VerifyResult{DanglingIndex: v.DanglingIndex, OrphanKeyList: v.OrphanKeyList, OrphanReporters: v.OrphanReporters,
		OrphanDays: v.OrphanDays, UnlistedIndex: v.UnlistedIndex, CountMismatch: v.CountMismatch}
	if got != want {
		t.Errorf("verify %+v, want %+v", got, want)
	}
	if _, err := s.Verify(ctx, true); err != nil {
		t.Fatal(err)
	}
	verifyClean(t, s)
	c := mustGet(t, s, a)
	if got := sortedKeys(c); !slices.Equal(got, []string{"a", "new", "new2"}) {
		t.Errorf("keys after repair %v", got)
	}
	for k, want := range map[string]CampaignID{"a": a, "b": 0, "new2": a, "orphan": 0} {
		if got := lookupOne(t, s, k); got != want {
			t.Errorf("lookup %q after repair: %d, want %d", k, got, want)
		}
	}
}

func TestDecodeRecordMalformed(t *testing.T) {
	full := (&record{Campaign: Campaign{ID: 1, FirstSeen: t0, LastSeen: t0, SpamReports: 3,
		Actions: map[string]int64{"tag": 2}, SampleSubject: "s", Sketches: [][]byte{{1, 2}}, MergedFrom: []CampaignID{4}}, numKeys: 2}).encode()
	r, err := decodeRecord(1, full)
	if err != nil || r.SpamReports != 3 || r.Actions["tag"] != 2 || r.numKeys != 2 || r.MergedFrom[0] != 4 || !r.FirstSeen.Equal(t0) {
		t.Fatalf("round trip: %+v %v", r, err)
	}
	for i := 0; i < len(full); i++ {
		if _, err := decodeRecord(1, full[:i]); err == nil {
			t.Errorf("truncated record (%d bytes) decoded", i)
		}
	}
	for _, b := range [][]byte{nil, {9, 0}, {1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		if _, err := decodeRecord(1, b); err == nil {
			t.Errorf("decoded %x", b)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add((&record{Campaign: Campaign{ID: 1, Actions: map[string]int64{"x": 1}, Sketches: [][]byte{{1}}}}).encode())
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(1, b)
		if err == nil {
			if _, err := decodeRecord(1, r.encode()); err != nil {
				t.Fatalf("re-encoded record does not decode: %v", err)
			}
		}
	})
}

func TestExpiryLoop(t *testing.T) {
	s := openTest(t, "", Options{Expiry: 24 * time.Hour, ExpiryInterval: 20 * time.Millisecond})
	old := mustReport(t, s, spam("r", time.Now().Add(-48*time.Hour), "old")).Campaign
	live := mustReport(t, s, spam("r", time.Now(), "live")).Campaign
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := s.Get(ctx, old); errors.Is(err, ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expiry loop did not delete the old campaign")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mustGet(t, s, live)
}

func TestEdgeCases(t *testing.T) {
	s := openTest(t, "", Options{})
	if _, err := s.Get(ctx, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(0): %v", err)
	}
	// Empty, nil and over-long keys are ignored by Lookup, refused by Report.
	if hits, err := s.Lookup(ctx, [][]byte{nil, {}, make([]byte, MaxKeyLen+1)}); err != nil || len(hits) != 0 {
		t.Errorf("Lookup of odd keys: %v %v", hits, err)
	}
	if _, err := s.Report(ctx, spam("r", t0, strings.Repeat("x", MaxKeyLen+1))); err == nil {
		t.Error("over-long key accepted")
	}
	// A report without keys can still create a campaign (e.g. a sketch only).
	r := mustReport(t, s, ReportInput{Kind: KindSpam, Create: true, Sketch: []byte{1}})
	if c := mustGet(t, s, r.Campaign); len(c.Keys) != 0 || len(c.Sketches) != 1 || c.FirstSeen.IsZero() {
		t.Errorf("keyless campaign %+v", c)
	}
	dup := mustReport(t, s, spam("r", t0, "d", "d", "e", "d"))
	if c := mustGet(t, s, dup.Campaign); len(c.Keys) != 2 {
		t.Errorf("duplicate keys indexed twice: %q", c.Keys)
	}
	verifyClean(t, s)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Report(cctx, spam("r", t0, "a")); !errors.Is(err, context.Canceled) {
		t.Errorf("Report with a cancelled context: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Report(ctx, spam("r", t0, "a")); !errors.Is(err, ErrClosed) {
		t.Errorf("Report after Close: %v", err)
	}
	if _, err := s.Lookup(ctx, keys("a")); !errors.Is(err, ErrClosed) {
		t.Errorf("Lookup after Close: %v", err)
	}
}

// TestMergeLongLivedCampaign merges a campaign whose size estimate
// (based on its 15-year span) exceeds a transaction although it holds
// little: the merge must still complete.
func TestMergeLongLivedCampaign(t *testing.T) {
	s := openTest(t, "", Options{Expiry: -1})
	a := mustReport(t, s, spam("r", t0, "a")).Campaign
	b := mustReport(t, s, spam("r", t0.AddDate(-15, 0, 0), "b")).Campaign
	mustReport(t, s, spam("r2", t0, "b"))
	done := make(chan ReportResult, 1)
	go func() {
		r, err := s.Report(ctx, spam("r3", t0, "a", "b"))
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	select {
	case r := <-done:
		if r.Campaign != a || !slices.Equal(r.Merged, []CampaignID{b}) {
			t.Errorf("merge: %+v", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("merge of a long-lived campaign does not terminate")
	}
	verifyClean(t, s)
}

// TestSentinelErrors checks the errors callers test with errors.Is: a
// second Open of a store in use (the daemon holds it) is ErrLocked, read
// and write calls on a closed store are ErrClosed, an unknown campaign is
// ErrNotFound.
func TestSentinelErrors(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	a := mustReport(t, s, spam("r", t0, "a"))
	for _, ro := range []bool{false, true} {
		second, err := Open(dir, Options{ReadOnly: ro, Logger: testLogger(t)})
		if err == nil {
			second.Close()
			t.Fatalf("second Open (read-only %v) of a store in use succeeded", ro)
		}
		if !errors.Is(err, ErrLocked) {
			t.Errorf("second Open (read-only %v): %v, want ErrLocked", ro, err)
		}
		// The project's own words and the holder's pid, not Badger's.
		if want := fmt.Sprintf("(pid %d,", os.Getpid()); !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "Cannot acquire") {
			t.Errorf("second Open (read-only %v): %q, want the holder %q and no Badger text", ro, err, want)
		}
	}
	if _, err := s.Get(ctx, a.Campaign+1000); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of an unknown campaign: %v, want ErrNotFound", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Report(ctx, spam("r", t0, "b")); !errors.Is(err, ErrClosed) {
		t.Errorf("Report on a closed store: %v, want ErrClosed", err)
	}
	// Once closed, the directory opens again.
	again := openTest(t, dir, Options{})
	if lookupOne(t, again, "a") != a.Campaign {
		t.Errorf("reopened store lost campaign %d", a.Campaign)
	}
}

func TestTerms(t *testing.T) {
	s := openTest(t, "", Options{MaxSketches: 3})
	var id CampaignID
	for i := 0; i < 6; i++ {
		in := spam(fmt.Sprint(i), t0, "k")
		in.Terms = []byte{1, byte(i % 4)}
		id = mustReport(t, s, in).Campaign
	}
	in := spam("big", t0, "k")
	in.Terms = make([]byte, MaxTermsLen+1)
	mustReport(t, s, in)
	c := mustGet(t, s, id)
	if want := [][]byte{{1, 0}, {1, 1}, {1, 2}}; !slices.EqualFunc(c.Terms, want, bytes.Equal) {
		t.Errorf("terms %v, want %v", c.Terms, want)
	}
	// A merge carries the merged campaign's term sets.
	other := spam("o", t0, "other")
	other.Terms = []byte{1, 9}
	o := mustReport(t, s, other).Campaign
	both := spam("both", t0, "other", "k2")
	both.Join = []CampaignID{o}
	mustReport(t, s, both)
	if c := mustGet(t, s, o); len(c.Terms) != 1 || !bytes.Equal(c.Terms[0], []byte{1, 9}) {
		t.Errorf("other campaign's terms %v", c.Terms)
	}
}

func TestRecordTermsSection(t *testing.T) {
	old := (&record{Campaign: Campaign{ID: 1, Sketches: [][]byte{{1}}, MergedFrom: []CampaignID{4}}}).encode()
	r, err := decodeRecord(1, old)
	if err != nil || r.Terms != nil {
		t.Fatalf("record without terms: %+v %v", r, err)
	}
	withTerms := (&record{Campaign: Campaign{ID: 1, Sketches: [][]byte{{1}}, Terms: [][]byte{{1, 2, 3}, {4}}}}).encode()
	r, err = decodeRecord(1, withTerms)
	if err != nil || len(r.Terms) != 2 || !bytes.Equal(r.Terms[0], []byte{1, 2, 3}) {
		t.Fatalf("record with terms: %+v %v", r, err)
	}
	if !bytes.HasPrefix(withTerms, old[:len(old)-2]) {
		t.Errorf("the terms section is not a trailing one")
	}
	for i := len(old); i < len(withTerms); i++ {
		if _, err := decodeRecord(1, withTerms[:i]); err == nil {
			t.Errorf("truncated terms section (%d bytes) decoded", i)
		}
	}
}
