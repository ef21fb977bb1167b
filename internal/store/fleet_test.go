package store

import (
	"context"
	"testing"
	"time"
)

// Two stores applying the same events get the same campaign ids, the
// same applied sequence and the same state hash; an id tells its event.
func TestApplyEventsDeterministic(t *testing.T) {
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	events := []struct {
		seq uint64
		ins []ReportInput
	}{
		{3, []ReportInput{spam("a", at, "k1", "k2"), spam("b", at, "k9")}},
		{5, []ReportInput{spam("c", at.Add(time.Hour), "k2", "k3")}},
		{8, []ReportInput{spam("d", at.Add(2*time.Hour), "k9", "k1")}}, // merges the two
	}
	var hashes []string
	var ids [][]CampaignID
	for range 2 {
		s := openTest(t, "", Options{NoSyncWrites: true, Expiry: -1})
		// Ids of the store's own sequence must not matter.
		mustReport(t, s, spam("local", at, "local-only"))
		var got []CampaignID
		for _, ev := range events {
			rs, err := s.ForEvent(ev.seq).ReportBatch(context.Background(), ev.ins)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				got = append(got, r.Campaign)
			}
		}
		if err := s.Delete(ctx, 1); err != nil { // the local campaign
			t.Fatal(err)
		}
		if err := s.ForEvent(9).ApplyHits(context.Background(), []HitDelta{{Campaign: got[0], Action: "tag", Hour: at.Truncate(time.Hour), Last: at, N: 3}}); err != nil {
			t.Fatal(err)
		}
		if seq, err := s.Applied(ctx); err != nil || seq != 9 {
			t.Fatalf("Applied = %d, %v", seq, err)
		}
		h, err := s.StateHash(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// StateHashAt: the same hash, with the progress it is the hash after.
		if h2, p, err := s.StateHashAt(ctx); err != nil || h2 != h || p.Seq != 9 || p.Partial {
			t.Errorf("StateHashAt = %s %+v %v, want %s at 9", h2, p, err, h)
		}
		hashes, ids = append(hashes, h), append(ids, got)
		c, err := s.Get(ctx, got[0])
		if err != nil || c.Messages != 3 || c.Actions["tag"] != 3 {
			t.Fatalf("hits: %+v %v", c, err)
		}
	}
	if hashes[0] != hashes[1] {
		t.Errorf("state hashes differ: %v", hashes)
	}
	for i := range ids[0] {
		if ids[0][i] != ids[1][i] {
			t.Fatalf("ids differ: %v %v", ids[0], ids[1])
		}
	}
	if seq, ok := EventOf(ids[0][1]); !ok || seq != 3 {
		t.Errorf("EventOf(%d) = %d %v, want 3", ids[0][1], seq, ok)
	}
	if _, ok := EventOf(1); ok {
		t.Error("EventOf of a standalone id")
	}
}

func TestOutbox(t *testing.T) {
	s := openTest(t, "", Options{NoSyncWrites: true})
	a, err := s.OutboxPut(ctx, []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.OutboxPut(ctx, []byte("two"))
	items, total, err := s.OutboxList(ctx, 1)
	if err != nil || total != 2 || len(items) != 1 || items[0].ID != a || string(items[0].Data) != "one" {
		t.Fatalf("list: %+v %d %v", items, total, err)
	}
	if err := s.OutboxDelete(ctx, a); err != nil {
		t.Fatal(err)
	}
	items, total, _ = s.OutboxList(ctx, 10)
	if total != 1 || items[0].ID != b {
		t.Fatalf("after delete: %+v", items)
	}
	if err := s.DropOutbox(); err != nil {
		t.Fatal(err)
	}
	if _, total, _ = s.OutboxList(ctx, 10); total != 0 {
		t.Fatalf("after drop: %d", total)
	}
	// The outbox is not campaign state.
	if seq, _ := s.Applied(ctx); seq != 0 {
		t.Errorf("applied %d", seq)
	}
}
