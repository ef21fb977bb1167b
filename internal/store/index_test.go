package store

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// testClock is a settable clock for Options.Now.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// scanList is List the slow way: every record, sorted and paged.
func scanList(t *testing.T, s *Badger, q Query) []CampaignID {
	t.Helper()
	var all []Campaign
	err := s.forEachRecord(ctx, func(r *record) error {
		if q.Since.IsZero() || !r.LastSeen.Before(q.Since) {
			all = append(all, r.Campaign)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var f func(a, b Campaign) int
	switch q.Sort {
	case "", SortRecent:
		f = func(a, b Campaign) int { return b.LastSeen.Compare(a.LastSeen) }
	case SortVolume:
		f = func(a, b Campaign) int { return cmp.Compare(b.Messages, a.Messages) }
	case SortReports:
		f = func(a, b Campaign) int {
			return cmp.Or(cmp.Compare(b.SpamReporters, a.SpamReporters), cmp.Compare(b.SpamReports, a.SpamReports))
		}
	case SortHam:
		all = slices.DeleteFunc(all, func(c Campaign) bool { return c.HamReports == 0 })
		f = func(a, b Campaign) int {
			return cmp.Or(cmp.Compare(b.HamReporters, a.HamReporters), cmp.Compare(b.HamReports, a.HamReports))
		}
	}
	slices.SortFunc(all, func(a, b Campaign) int { return cmp.Or(f(a, b), cmp.Compare(a.ID, b.ID)) })
	limit, offset := q.Page()
	var ids []CampaignID
	for i := offset; i < len(all) && len(ids) < limit; i++ {
		ids = append(ids, all[i].ID)
	}
	return ids
}

func listIDs(t *testing.T, s *Badger, q Query) []CampaignID {
	t.Helper()
	cs, err := s.List(ctx, q)
	if err != nil {
		t.Fatalf("List(%+v): %v", q, err)
	}
	var ids []CampaignID
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

// fillVaried makes 80 campaigns with varied reports, not-spam reports,
// hits, merges, states and a deletion, seen over 80 hours from t0.
func fillVaried(t *testing.T, s *Badger) []CampaignID {
	t.Helper()
	var ids []CampaignID
	for i := range 80 {
		at := t0.Add(time.Duration(i) * time.Hour)
		r := mustReport(t, s, spam(fmt.Sprintf("r%d", i%7), at, fmt.Sprintf("k%d", i), fmt.Sprintf("k%d-b", i)))
		ids = append(ids, r.Campaign)
		for j := range i % 5 {
			mustReport(t, s, spam(fmt.Sprintf("x%d", j), at, fmt.Sprintf("k%d", i)))
		}
		if i%6 == 0 {
			h := spam(fmt.Sprintf("h%d", i%4), at, fmt.Sprintf("k%d", i))
			h.Kind, h.Create, h.Index = KindHam, false, false
			mustReport(t, s, h)
		}
		for range (i * 7) % 13 {
			if err := s.RecordHit(ctx, r.Campaign, "tag", at.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Merges: a report bridging two campaigns merges them.
	mustReport(t, s, spam("m", t0.Add(90*time.Hour), "k10", "k11", "k12"))
	if err := s.SetState(ctx, ids[20], StateAllowed); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, ids[30]); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushHits(ctx); err != nil {
		t.Fatal(err)
	}
	return ids
}

// Every order, with and without a look-back, on every page, lists what a
// scan of every record lists; Stats agrees with the records.
func TestListOrdersMatchScan(t *testing.T) {
	s := openTest(t, "", Options{Expiry: -1})
	fillVaried(t, s)
	for _, sort := range []string{SortRecent, SortVolume, SortReports, SortHam} {
		// Since: none, most campaigns (the index walk finishes first),
		// few (the recency walk does).
		for _, since := range []time.Time{{}, t0.Add(5 * time.Hour), t0.Add(75 * time.Hour)} {
			for _, pg := range [][2]int{{5, 0}, {5, 3}, {7, 70}, {0, 0}} {
				q := Query{Sort: sort, Since: since, Limit: pg[0], Offset: pg[1]}
				got, want := listIDs(t, s, q), scanList(t, s, q)
				if !slices.Equal(got, want) {
					t.Errorf("List(sort %s since %v limit %d offset %d) = %v, want %v", sort, since.Sub(t0), pg[0], pg[1], got, want)
				}
			}
		}
	}
	var want Stats
	err := s.forEachRecord(ctx, func(r *record) error {
		want.Campaigns++
		switch r.State {
		case StateActive:
			want.Active++
		case StateAllowed:
			want.Allowed++
		default:
			want.Revoked++
		}
		want.Keys += r.numKeys
		want.SpamReports += r.SpamReports
		want.HamReports += r.HamReports
		want.Messages += r.Messages
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got.DiskBytes, got.DiskFree, got.DiskFull, got.WritesRefused = 0, 0, false, 0
	if got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	verifyClean(t, s)
	// Expire reads the recency index from the oldest end.
	n, err := s.Expire(ctx, t0.Add(40*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if left := scanList(t, s, Query{Limit: MaxListLimit}); n == 0 || len(left) == 0 {
		t.Errorf("Expire deleted %d, %d left", n, len(left))
	}
	for _, id := range scanList(t, s, Query{Limit: MaxListLimit}) {
		if c := mustGet(t, s, id); c.LastSeen.Before(t0.Add(40 * time.Hour)) {
			t.Errorf("campaign %d last seen %v survived expiry", id, c.LastSeen)
		}
	}
	verifyClean(t, s)
	if _, err := s.List(ctx, Query{Sort: "size"}); err == nil {
		t.Error("unknown sort accepted")
	}
}

// The hour and day rankings count hits by hour, follow the clock, re-rank
// campaigns whose hits leave a window, and add up when campaigns merge.
func TestWindowRankings(t *testing.T) {
	clock := &testClock{t: t0.Add(30 * time.Minute)}
	s := openTest(t, "", Options{Expiry: -1, Now: clock.Now})
	H := t0 // the current hour
	a := mustReport(t, s, spam("r", H, "a")).Campaign
	b := mustReport(t, s, spam("r", H, "b")).Campaign
	c := mustReport(t, s, spam("r", H, "c")).Campaign
	hit := func(id CampaignID, n int, at time.Time) {
		for range n {
			if err := s.RecordHit(ctx, id, "reject", at); err != nil {
				t.Fatal(err)
			}
		}
	}
	hit(a, 5, H.Add(10*time.Minute))
	hit(b, 3, H.Add(-50*time.Minute))
	hit(c, 10, H.Add(-10*time.Hour))
	if err := s.FlushHits(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(step string, sort string, want []CampaignID, sums []int64) {
		t.Helper()
		cs, err := s.List(ctx, Query{Sort: sort})
		if err != nil {
			t.Fatal(err)
		}
		var ids []CampaignID
		var got []int64
		for _, c := range cs {
			ids = append(ids, c.ID)
			if sort == SortHour {
				got = append(got, c.HourMessages)
			} else {
				got = append(got, c.DayMessages)
			}
		}
		if !slices.Equal(ids, want) || !slices.Equal(got, sums) {
			t.Errorf("%s: %s ranking %v %v, want %v %v", step, sort, ids, got, want, sums)
		}
	}
	check("start", SortHour, []CampaignID{a, b}, []int64{5, 3})
	check("start", SortDay, []CampaignID{c, a, b}, []int64{10, 5, 3})

	clock.Add(2 * time.Hour) // a's and b's hits leave the hour window
	if err := s.hourly(ctx); err != nil {
		t.Fatal(err)
	}
	check("+2h", SortHour, nil, nil)
	check("+2h", SortDay, []CampaignID{c, a, b}, []int64{10, 5, 3})
	if n := countPrefix(t, s, pfxRankHour); n != 0 {
		t.Errorf("+2h: %d hour rank entries left after re-ranking", n)
	}
	clock.Add(14 * time.Hour) // c's hits (H-10) leave the day window
	if err := s.hourly(ctx); err != nil {
		t.Fatal(err)
	}
	check("+16h", SortDay, []CampaignID{a, b}, []int64{5, 3})
	if n := countPrefix(t, s, pfxRankDay); n != 2 {
		t.Errorf("+16h: %d day rank entries, want 2", n)
	}
	// Merging a and b adds their rings.
	mustReport(t, s, spam("m", clock.Now(), "a", "b"))
	check("merge", SortDay, []CampaignID{a}, []int64{8})
	if rec, err := s.Record(ctx, a); err != nil || rec.DayMessages != 8 || rec.HourMessages != 0 {
		t.Errorf("Record(a) = %+v, %v", rec, err)
	}
	verifyClean(t, s)
	// Paging a window ranking.
	d := mustReport(t, s, spam("r", clock.Now(), "d")).Campaign
	hit(d, 2, clock.Now())
	if err := s.FlushHits(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, s, Query{Sort: SortDay, Limit: 1, Offset: 1}); !slices.Equal(got, []CampaignID{d}) {
		t.Errorf("day ranking page 2 = %v, want [%d]", got, d)
	}
}

func countPrefix(t *testing.T, s *Badger, pfx byte) int {
	t.Helper()
	n := 0
	err := s.view(func(txn *badger.Txn) error {
		var err error
		n, err = scanPrefix(txn, []byte{pfx}, false, 0, func(_, _ []byte) error { return nil })
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Hourly series and totals count hits, checks and reports by hour and are
// pruned after the retention.
func TestHoursAndTotals(t *testing.T) {
	clock := &testClock{t: t0.Add(30 * time.Minute)}
	s := openTest(t, "", Options{Expiry: -1, Now: clock.Now, HourRetention: 30 * time.Hour})
	a := mustReport(t, s, spam("r", t0, "a")).Campaign
	h := spam("h", t0.Add(-time.Hour), "a")
	h.Kind, h.Create, h.Index = KindHam, false, false
	mustReport(t, s, h)
	for i, act := range []string{"reject", "reject", "accept"} {
		if err := s.RecordHit(ctx, a, act, t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		if err := s.RecordCheck(ctx, "accept", t0); err != nil {
			t.Fatal(err)
		}
	}
	wantHours := []HourCount{
		{Hour: t0.Add(-time.Hour), HamReports: 1},
		{Hour: t0, Messages: 3, SpamReports: 1, Acted: 2},
	}
	wantTotals := []HourTotal{
		{Hour: t0.Add(-time.Hour), HamReports: 1},
		{Hour: t0, Checked: 7, Matched: 3, SpamReports: 1, Actions: map[string]int64{"reject": 2, "accept": 5}},
	}
	for _, flushed := range []bool{false, true} { // buffered, then written
		if flushed {
			if err := s.FlushHits(ctx); err != nil {
				t.Fatal(err)
			}
		}
		hs, err := s.Hours(ctx, a, time.Time{})
		if err != nil || !slices.Equal(hs, wantHours) {
			t.Errorf("flushed %v: Hours = %+v, %v, want %+v", flushed, hs, err, wantHours)
		}
		ts, err := s.Totals(ctx, t0.Add(-24*time.Hour))
		if err != nil || fmt.Sprint(ts) != fmt.Sprint(wantTotals) {
			t.Errorf("flushed %v: Totals = %+v, %v, want %+v", flushed, ts, err, wantTotals)
		}
	}
	if err := s.foldCounters(ctx); err != nil {
		t.Fatal(err)
	}
	if ts, _ := s.Totals(ctx, time.Time{}); fmt.Sprint(ts) != fmt.Sprint(wantTotals) {
		t.Errorf("folded: Totals = %+v, want %+v", ts, wantTotals)
	}
	if _, err := s.Hours(ctx, 12345, time.Time{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Hours of a missing campaign: %v", err)
	}
	clock.Add(40 * time.Hour)
	if err := s.hourly(ctx); err != nil {
		t.Fatal(err)
	}
	if hs, _ := s.Hours(ctx, a, time.Time{}); len(hs) != 0 {
		t.Errorf("after the retention: Hours = %+v", hs)
	}
	if ts, _ := s.Totals(ctx, time.Time{}); len(ts) != 0 {
		t.Errorf("after the retention: Totals = %+v", ts)
	}
	for _, p := range []byte{pfxHourHits, pfxHourReports} {
		if n := countPrefix(t, s, p); n != 0 {
			t.Errorf("%d %q markers left after the retention", n, p)
		}
	}
	verifyClean(t, s)
}

// A schema 1 store (no indexes, no counters) is upgraded when opened, and
// an interrupted upgrade resumes: the lists and counts are those of a
// store written by schema 2 all along.
func TestUpgradeFromSchema1(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{Expiry: -1})
	fillVaried(t, s)
	queries := []Query{{}, {Sort: SortVolume}, {Sort: SortReports, Since: t0.Add(50 * time.Hour)}, {Sort: SortHam}}
	var before [][]CampaignID
	for _, q := range queries {
		before = append(before, listIDs(t, s, q))
	}
	stBefore, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Make it a schema 1 store: drop everything schema 2 added.
	db, err := badger.Open(badgerOptions(dir, Options{Logger: testLogger(t)}.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []byte{pfxRecent, pfxVolume, pfxReports, pfxHam, pfxDelta, pfxTotals, pfxHour, pfxHourHits, pfxHourReports, pfxRing, pfxRankHour, pfxRankDay} {
		if err := db.DropPrefix([]byte{p}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range [][]byte{metaCountsKey, metaRankedKey} {
		if err := db.DropPrefix(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeSchema(db, 1); err != nil {
		t.Fatal(err)
	}
	// Interrupt an upgrade after two transactions of 5 campaigns.
	if done, err := indexCampaigns(db, testLogger(t), 5, 2); err != nil || done {
		t.Fatalf("interrupted upgrade: done %v, %v", done, err)
	}
	db.Close()

	s2 := openTest(t, dir, Options{Expiry: -1})
	for i, q := range queries {
		if got := listIDs(t, s2, q); !slices.Equal(got, before[i]) {
			t.Errorf("after upgrade: List(%+v) = %v, want %v", q, got, before[i])
		}
	}
	st, err := s2.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.DiskBytes, stBefore.DiskBytes = 0, 0
	st.DiskFree, stBefore.DiskFree = 0, 0
	if st != stBefore {
		t.Errorf("after upgrade: Stats = %+v, want %+v", st, stBefore)
	}
	verifyClean(t, s2)
}

// Truncated or corrupt counter deltas, rings and hour counters are
// refused with an error, never a panic.
func TestDecodeMalformedSchema2Values(t *testing.T) {
	d := delta{c: counters{byState: [3]int64{1, 2, 3}, keys: 9, spamReports: -4}}
	d.hour(12).add(&HourTotal{Checked: 5, Matched: 2, Actions: map[string]int64{"reject": 2}})
	r := ring{anchor: 100, hourIx: 3, dayIx: 7}
	r.c[0], r.c[5] = 3, 4
	values := map[string][]byte{
		"delta": d.encode(),
		"ring":  r.encode(),
		"hour":  hourCounts{1, 2, 3, 4}.encode(),
	}
	if got, err := decodeDelta(values["delta"]); err != nil || got.c != d.c || got.hours[12].Actions["reject"] != 2 {
		t.Errorf("delta round trip: %+v %v", got, err)
	}
	if got, err := decodeRing(values["ring"]); err != nil || got != r {
		t.Errorf("ring round trip: %+v %v", got, err)
	}
	for name, v := range values {
		for n := range len(v) {
			var err error
			switch name {
			case "delta":
				_, err = decodeDelta(v[:n])
			case "ring":
				_, err = decodeRing(v[:n])
			case "hour":
				_, err = decodeHour(v[:n])
			}
			if err == nil {
				t.Errorf("%s truncated to %d of %d bytes decoded without error", name, n, len(v))
			}
		}
		bad := append([]byte{}, v...)
		for i := range bad {
			bad[i] = 0xff
		}
		switch name { // must not panic
		case "delta":
			decodeDelta(bad)
		case "ring":
			decodeRing(bad)
		case "hour":
			decodeHour(bad)
		}
	}
}

// Stats (what /readyz and the store gauges call) reads the counters, not
// the campaign records: records made unreadable behind its back do not
// change it, and nothing is scanned.
func TestStatsReadsCountersOnly(t *testing.T) {
	s := openTest(t, "", Options{Expiry: -1})
	var ids []CampaignID
	for i := range 3 {
		ids = append(ids, mustReport(t, s, spam("r", t0, fmt.Sprintf("k%d", i))).Campaign)
	}
	before, err := s.Stats(ctx)
	if err != nil || before.Campaigns != 3 || before.Active != 3 || before.SpamReports != 3 {
		t.Fatalf("Stats = %+v, %v", before, err)
	}
	err = s.db.Update(func(txn *badger.Txn) error {
		for _, id := range ids {
			if err := txn.Set(campaignKey(id), []byte{0xff}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	after, err := s.Stats(ctx)
	if err != nil || after.Campaigns != before.Campaigns || after.Keys != before.Keys {
		t.Errorf("Stats after the records were garbled = %+v, %v; want %+v", after, err, before)
	}
}

// RebuildIndexes writes the indexes and counters again from the records.
func TestRebuildIndexes(t *testing.T) {
	s := openTest(t, "", Options{Expiry: -1})
	fillVaried(t, s)
	want := listIDs(t, s, Query{Sort: SortVolume})
	st0, _ := s.Stats(ctx)
	for _, p := range []byte{pfxVolume, pfxRecent} {
		if err := s.db.DropPrefix([]byte{p}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.DropPrefix(metaCountsKey, []byte{pfxDelta}); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Verify(ctx, false); err != nil || v.BadIndexEntries == 0 || !v.CountersWrong {
		t.Fatalf("Verify after dropping indexes: %+v %v", v, err)
	}
	if err := s.RebuildIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, s, Query{Sort: SortVolume}); !slices.Equal(got, want) {
		t.Errorf("after rebuild: %v, want %v", got, want)
	}
	st, _ := s.Stats(ctx)
	if st.Campaigns != st0.Campaigns || st.Keys != st0.Keys || st.SpamReports != st0.SpamReports {
		t.Errorf("after rebuild: Stats %+v, want %+v", st, st0)
	}
	verifyClean(t, s)
}
