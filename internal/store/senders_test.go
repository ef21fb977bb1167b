package store

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// The ham table keeps at most MaxHamSenders domains; a steady sender is
// never crowded out by one-off domains, and what it reports is a lower
// bound of each domain's count.
func TestHamTableBounded(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		steady map[string]int // domain → messages, counted first
		noise  int            // one-off domains after them
	}{
		{"fits", 10, map[string]int{"a.example": 5, "b.example": 3}, 0},
		{"noise", 4, map[string]int{"big.example": 50, "mid.example": 20}, 500},
		{"one slot", 1, map[string]int{"only.example": 7}, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHamTable(tt.max)
			for d, n := range tt.steady {
				for range n {
					h.add(d, 1, 0)
				}
			}
			for i := range tt.noise {
				h.add(fmt.Sprintf("noise%d.example", i), 1, 0)
			}
			if len(h.entries) > tt.max || len(h.heap) != len(h.entries) {
				t.Fatalf("%d entries, %d in the heap, max %d", len(h.entries), len(h.heap), tt.max)
			}
			for d, n := range tt.steady {
				if got := h.lower(d); got > int64(n) || (tt.noise == 0 && got != int64(n)) {
					t.Errorf("%s: lower bound %d of %d messages", d, got, n)
				}
			}
			top := h.top(0, 1)
			if !slices.IsSortedFunc(top, func(a, b SenderCount) int { return int(b.Messages - a.Messages) }) {
				t.Errorf("top not sorted: %v", top)
			}
		})
	}
	// A sender of more than a 1/max share of the messages is never
	// evicted (Space-Saving), and keeps its exact count when it came first.
	h := newHamTable(4)
	for range 300 {
		h.add("big.example", 1, 0)
	}
	for i := range 500 {
		h.add(fmt.Sprintf("noise%d.example", i), 1, 0)
	}
	if got := h.lower("big.example"); got != 300 {
		t.Errorf("a steady sender among one-off domains: lower bound %d, want 300", got)
	}
}

// A campaign keeps its senders, most copies first, at most
// MaxCampaignSenders of them, with a reverse index by domain; they
// follow merges and go with deletion; the ham table outlives a restart.
func TestCampaignSenders(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1, MaxCampaignSenders: 3})
	a := mustReport(t, s, spam("r1", t0, "ka")).Campaign
	b := mustReport(t, s, spam("r2", t0, "kb")).Campaign
	copies := []struct {
		id     CampaignID
		sender string
		n      int
	}{
		{a, "bulk.example", 9}, {a, "mail.example", 4}, {a, "one.example", 1}, {a, "two.example", 2},
		{a, "", 5}, {a, "bad\x00domain", 5}, {b, "mail.example", 3},
	}
	for _, c := range copies {
		for range c.n {
			s.RecordSender(c.id, c.sender)
		}
	}
	for range 30 {
		s.RecordHam("mail.example")
	}
	s.RecordHam("")
	if err := s.flushHits(); err != nil {
		t.Fatal(err)
	}
	got, err := s.CampaignSenders(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	// Space-Saving: the flush adds the most copies first; one.example
	// replaced two.example and inherited its count (2 + 1).
	want := []SenderCount{{"bulk.example", 9}, {"mail.example", 4}, {"one.example", 3}}
	if !slices.Equal(got, want) {
		t.Errorf("senders of %d: %v, want %v", a, got, want)
	}
	ids, err := s.SenderCampaigns(ctx, "mail.example", 10)
	if err != nil || !slices.Equal(ids, []CampaignID{a, b}) {
		t.Errorf("campaigns of mail.example: %v %v", ids, err)
	}
	if ids, _ := s.SenderCampaigns(ctx, "two.example", 10); len(ids) != 0 {
		t.Errorf("a replaced sender still indexed: %v", ids)
	}
	// A merge adds b's senders to a's; deletion drops them.
	res := mustReport(t, s, spam("r3", t0, "ka", "kb"))
	if len(res.Merged) != 1 {
		t.Fatalf("merge: %+v", res)
	}
	into, from := res.Campaign, res.Merged[0]
	if got, _ := s.CampaignSenders(ctx, into); len(got) == 0 || got[0].Domain != "bulk.example" && got[0].Domain != "mail.example" {
		t.Errorf("merged senders: %v", got)
	}
	if got, _ := s.CampaignSenders(ctx, from); len(got) != 0 {
		t.Errorf("senders of the merged campaign: %v", got)
	}
	if err := s.Delete(ctx, into); err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.SenderCampaigns(ctx, "mail.example", 10); len(ids) != 0 {
		t.Errorf("reverse index after delete: %v", ids)
	}
	// Senders of a campaign deleted before the flush are dropped.
	s.RecordSender(into, "late.example")
	if err := s.flushHits(); err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.SenderCampaigns(ctx, "late.example", 10); len(ids) != 0 {
		t.Errorf("senders of a deleted campaign: %v", ids)
	}
	// The ham table is persisted and reloaded.
	if got := s.HamMessages("mail.example"); got != 30 {
		t.Errorf("ham of mail.example: %d", got)
	}
	s.Close()
	s = openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1})
	if got := s.HamMessages("mail.example"); got != 30 {
		t.Errorf("ham of mail.example after a restart: %d", got)
	}
	if top := s.HamSenders(5, 10); len(top) != 1 || top[0] != (SenderCount{"mail.example", 30}) {
		t.Errorf("HamSenders: %v", top)
	}
	verifyClean(t, s)
}

// Copies held back as graymail are counted per campaign, listed most
// first, carried by a merge and dropped with their campaign, before or
// after the flush.
func TestGraymailHolds(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1})
	a := mustReport(t, s, spam("r1", t0, "ka")).Campaign
	b := mustReport(t, s, spam("r2", t0, "kb")).Campaign
	c := mustReport(t, s, spam("r3", t0, "kc")).Campaign
	for range 3 {
		s.RecordGraymail(a)
	}
	s.RecordGraymail(b)
	s.RecordSender(b, "mail.example")
	if got, _ := s.GraymailCampaigns(ctx, 10); len(got) != 0 {
		t.Errorf("before the flush: %v", got)
	}
	if err := s.flushHits(); err != nil {
		t.Fatal(err)
	}
	s.RecordGraymail(b)
	if err := s.flushHits(); err != nil {
		t.Fatal(err)
	}
	want := []HeldCampaign{{a, 3}, {b, 2}}
	if got, err := s.GraymailCampaigns(ctx, 10); err != nil || !slices.Equal(got, want) {
		t.Errorf("GraymailCampaigns: %v %v, want %v", got, err, want)
	}
	if got, _ := s.GraymailCampaigns(ctx, 1); !slices.Equal(got, want[:1]) {
		t.Errorf("GraymailCampaigns limited to 1: %v", got)
	}
	for id, n := range map[CampaignID]int64{a: 3, b: 2, c: 0} {
		if got, err := s.CampaignGraymail(ctx, id); err != nil || got != n {
			t.Errorf("CampaignGraymail(%d) = %d %v, want %d", id, got, err, n)
		}
	}
	if got, _ := s.CampaignSenders(ctx, b); !slices.Equal(got, []SenderCount{{"mail.example", 1}}) {
		t.Errorf("senders beside the holds: %v", got)
	}
	// Restarted: read from the store.
	s.Close()
	s = openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1})
	// A merge of a into b adds a's holds to b's.
	res := mustReport(t, s, spam("r4", t0, "ka", "kb"))
	if len(res.Merged) != 1 {
		t.Fatalf("merge: %+v", res)
	}
	into := res.Campaign
	if got, _ := s.GraymailCampaigns(ctx, 10); !slices.Equal(got, []HeldCampaign{{into, 5}}) {
		t.Errorf("after the merge: %v", got)
	}
	// Holds of a campaign deleted before the flush are dropped; a deleted
	// campaign leaves none.
	s.RecordGraymail(c)
	if err := s.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, into); err != nil {
		t.Fatal(err)
	}
	if err := s.flushHits(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GraymailCampaigns(ctx, 10); err != nil || len(got) != 0 {
		t.Errorf("after the deletes: %v %v", got, err)
	}
	n := 0
	if err := s.view(func(txn *badger.Txn) error {
		var err error
		n, err = scanPrefix(txn, []byte{pfxGrayCamp}, false, 0, func(_, _ []byte) error { return nil })
		return err
	}); err != nil || n != 0 {
		t.Errorf("%d graymail index entries left: %v", n, err)
	}
	verifyClean(t, s)
}

// Malformed sender values never panic: a list is an error, a ham entry
// is forgotten.
func TestSendersMalformed(t *testing.T) {
	// The last two: a trailing graymail count that is not one uvarint.
	for _, b := range [][]byte{nil, {0xff}, {5}, {1, 200, 'a'}, {1, 1, 'a'}, {1, 1, 'a', 0xff}, {0, 0xff}, {0, 1, 2}} {
		if _, _, err := decodeSenders(b); err == nil && len(b) > 1 {
			t.Errorf("decodeSenders(%x): no error", b)
		}
	}
	ss := []SenderCount{{"a.example", 3}, {"b.example", 1}}
	for _, held := range []int64{0, 1, 300} {
		if got, h, err := decodeSenders(encodeSenders(ss, held)); err != nil || !slices.Equal(got, ss) || h != held {
			t.Errorf("round trip with %d held: %v %d %v", held, got, h, err)
		}
	}
	// A record without holds is the one written before they were counted.
	if got := encodeSenders(ss, 0); !bytes.Equal(got, []byte("\x02\x09a.example\x03\x09b.example\x01")) {
		t.Errorf("encodeSenders without holds: %q", got)
	}
	dir := t.TempDir()
	s := openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1})
	err := s.db.Update(func(txn *badger.Txn) error {
		for k, v := range map[string][]byte{"ok.example": {7, 0}, "bad.example": {0xff}, "over.example": {1, 5}, "bad\x01": {1, 0}} {
			if err := txn.Set(countKey(pfxHamSender, k), v); err != nil {
				return err
			}
		}
		return txn.Set(idKey(pfxCampSenders, 99), []byte{9, 9})
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1})
	if got := s.HamSenders(10, 1); len(got) != 1 || got[0].Domain != "ok.example" {
		t.Errorf("ham table from malformed entries: %v", got)
	}
	if _, err := s.CampaignSenders(ctx, 99); err == nil {
		t.Error("a malformed sender list: no error")
	}
}

// The list table counts accepted messages by mailing list, refuses
// identifiers that cannot be one, is bounded, and outlives a restart;
// a malformed stored entry is forgotten.
func TestHamListsPersist(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1, MaxHamLists: 2})
	for range 12 {
		s.RecordListHam("users.lists.example.org")
	}
	for _, bad := range []string{"", "a b", "<x>", "x\x00y", strings.Repeat("l", MaxListID+1), "\xff\xfe"} {
		s.RecordListHam(bad)
		if got := s.ListHamMessages(bad); got != 0 {
			t.Errorf("list %q counted %d times", bad, got)
		}
	}
	s.RecordListHam("news@example.com")
	s.RecordListHam("other.example.net") // the bound: replaces the smaller
	if err := s.flushHits(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(countKey(pfxHamList, "broken.example.org"), []byte{0xff})
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir, Options{NoSyncWrites: true, Expiry: -1, MaxHamLists: 2})
	if got := s.ListHamMessages("users.lists.example.org"); got != 12 {
		t.Errorf("after a restart: %d messages, want 12", got)
	}
	if got := s.ListHamMessages("news@example.com"); got != 0 {
		t.Errorf("an evicted list: %d messages, want 0 (a lower bound)", got)
	}
	if got := s.ListHamMessages("broken.example.org"); got != 0 {
		t.Errorf("a malformed entry: %d messages", got)
	}
}

// FuzzDecodeSenders: any bytes decode or fail without a panic, and what
// decodes encodes back to a record that decodes to the same senders and
// graymail count.
func FuzzDecodeSenders(f *testing.F) {
	f.Add(encodeSenders([]SenderCount{{"a.example", 3}}, 0))
	f.Add(encodeSenders([]SenderCount{{"a.example", 3}, {"b.example", 1}}, 7))
	f.Add([]byte{0, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		ss, held, err := decodeSenders(b)
		if err != nil {
			return
		}
		ss2, held2, err := decodeSenders(encodeSenders(ss, held))
		if err != nil || !slices.Equal(ss, ss2) || held != held2 {
			t.Fatalf("round trip of %x: %v %d %v, want %v %d", b, ss2, held2, err, ss, held)
		}
	})
}

// GraymailCampaigns reads at most maxGrayScan campaigns, the newest: with
// one more, the oldest is left out and the newest listed.
func TestGraymailScanBound(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{NoSyncWrites: true, Expiry: -1})
	ins := make([]ReportInput, maxGrayScan+1)
	for i := range ins {
		ins[i] = spam(fmt.Sprintf("r%d", i), t0, fmt.Sprintf("k%d", i))
	}
	res, err := s.ReportBatch(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		s.RecordGraymail(r.Campaign)
	}
	if err := s.flushHits(); err != nil {
		t.Fatal(err)
	}
	got, err := s.GraymailCampaigns(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != maxGrayScan {
		t.Fatalf("%d campaigns listed, want %d", len(got), maxGrayScan)
	}
	oldest, newest := res[0].Campaign, res[len(res)-1].Campaign
	if slices.ContainsFunc(got, func(h HeldCampaign) bool { return h.ID == oldest }) {
		t.Errorf("the oldest campaign %d listed", oldest)
	}
	if !slices.ContainsFunc(got, func(h HeldCampaign) bool { return h.ID == newest }) {
		t.Errorf("the newest campaign %d not listed", newest)
	}
}

// scanPrefixReverse visits a prefix's keys last first, those whose
// suffix starts with 0xff bytes too, none of the next prefix, and stops
// when told.
func TestScanPrefixReverse(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{NoSyncWrites: true, Expiry: -1})
	pfx := []byte{0xf0, 1}
	suffixes := [][]byte{{0}, {1, 2}, {0xff}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 7}}
	if err := s.db.Update(func(txn *badger.Txn) error {
		for _, sfx := range suffixes {
			if err := txn.Set(append(bytes.Clone(pfx), sfx...), nil); err != nil {
				return err
			}
		}
		return txn.Set([]byte{0xf0, 2}, nil) // the next prefix
	}); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	if err := s.db.View(func(txn *badger.Txn) error {
		return scanPrefixReverse(txn, pfx, func(sfx []byte) (bool, error) {
			got = append(got, bytes.Clone(sfx))
			return len(got) < 3, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	want := [][]byte{suffixes[3], suffixes[2], suffixes[1]}
	if !slices.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("visited %x, want %x", got, want)
	}
}
