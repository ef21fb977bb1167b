package zap

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/nddmilter/nddmilter/internal/zap/move"
)

// An undo by hand moves back what the purge moved without allowing the
// campaign, skips the moves not run yet, purges no new copy while the
// campaign stays at the trigger, and lets a later escalation purge new
// copies again; the report counts it all.
func TestUndoPurgeByHand(t *testing.T) {
	ctx := context.Background()
	eng := engine(t)
	c := &clock{t: time.Now()}
	l, err := ledger.Open("", ledger.Options{InMemory: true, Clock: c.now, FlushInterval: time.Hour, EvictInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 6 {
		record(t, eng, l, spamCopy(i), fmt.Sprintf("u%d@example.org", i), c.now())
	}
	l.Flush()
	fm := &fakeMover{}
	p, err := New(l, engCampaigns{eng}, fm, Options{Clock: c.now, Rate: 1000, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var id store.CampaignID
	for i, u := range []string{"r1", "r2", "r3", "r4", "r5"} {
		out, err := eng.Ingester.Report(ctx, spamCopy(20+i), store.KindSpam, u)
		if err != nil {
			t.Fatal(err)
		}
		id = out.Campaign
	}
	c.add(time.Second)
	if err := p.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	// Four of the six moves run; two wait (the server was down for them).
	due, _ := l.DueJobs(c.now(), 100)
	if len(due) != 6 {
		t.Fatalf("%d jobs due, want 6", len(due))
	}
	for _, j := range due[:2] {
		j.Attempts, j.Next = 1, c.now().Add(time.Hour)
		if err := l.UpdateJob(j); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := p.Work(ctx); n != 4 || err != nil {
		t.Fatalf("Work: %d, %v", n, err)
	}
	n, err := p.UndoPurge(ctx, uint64(id), "alice")
	if n != 4 || err != nil {
		t.Fatalf("UndoPurge: %d, %v; want 4 undo jobs", n, err)
	}
	if n, _ := p.UndoPurge(ctx, uint64(id), "alice"); n != 0 {
		t.Errorf("a second UndoPurge made %d undo jobs", n)
	}
	c.add(2 * time.Hour)
	if err := p.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Work(ctx); err != nil {
		t.Fatal(err)
	}
	moves, undos := fm.counts()
	if moves != 4 || undos != 4 {
		t.Fatalf("%d moves and %d undos, want 4 and 4", moves, undos)
	}
	cp, err := eng.Reader.Get(ctx, id)
	if err != nil || cp.State != store.StateActive {
		t.Fatalf("campaign after the undo: %+v, %v (not allowed)", cp, err)
	}
	// A copy delivered while the purge is held (tagged, say) is not
	// purged.
	_, msg, err := eng.Checker.CheckEvidence(ctx, spamCopy(6), campaign.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := msg.MarshalEvidence(pipeline.EvidenceOptions{})
	l.Record(ledger.Delivery{Time: c.now(), MessageID: msg.MessageID, Rcpts: []string{"u6@example.org"}, RcptCount: 1, Evidence: ev})
	l.Flush()
	c.add(time.Second)
	p.Scan(ctx)
	p.Work(ctx)
	if m, _ := fm.counts(); m != 4 {
		t.Fatalf("%d moves while the purge is held", m)
	}
	pu, err := p.Purge(uint64(id), -1)
	if err != nil {
		t.Fatal(err)
	}
	if !pu.Mark.Held() || pu.Mark.HeldBy != "alice" || !pu.Mark.Triggered.IsZero() || pu.Mark.Undone.IsZero() {
		t.Errorf("mark %+v", pu.Mark)
	}
	if pu.Moves.Moved != 4 || pu.Moves.Skipped[ledger.SkipLeft] != 2 || pu.Moves.Jobs != 6 || pu.Undos.Moved != 4 || pu.Total != 10 {
		t.Errorf("report: moves %+v, undos %+v, total %d", pu.Moves, pu.Undos, pu.Total)
	}
	for i := 1; i < len(pu.Jobs); i++ {
		if pu.Jobs[i].When().After(pu.Jobs[i-1].When()) {
			t.Fatalf("jobs not latest first: %v after %v", pu.Jobs[i].When(), pu.Jobs[i-1].When())
		}
	}
	if short, _ := p.Purge(uint64(id), 3); len(short.Jobs) != 3 || short.Total != 10 {
		t.Errorf("Purge(limit 3): %d jobs of %d", len(short.Jobs), short.Total)
	}
	// Allowed then active again: the campaign reaches the trigger anew,
	// and its new copy is purged (the old ones are never moved twice).
	if _, err := eng.Ingester.Allow(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	c.add(time.Second)
	p.Scan(ctx)
	if m, _ := l.GetMark(uint64(id)); m.Held() {
		t.Fatalf("still held after the allow: %+v", m)
	}
	if _, err := eng.Ingester.Allow(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	// (A new purger, as after a restart, lists every campaign: this
	// one's last message is older than the test clock's last scan.)
	p, _ = New(l, engCampaigns{eng}, fm, Options{Clock: c.now, Rate: 1000})
	c.add(time.Second)
	p.Scan(ctx)
	p.Work(ctx)
	if m, _ := fm.counts(); m != 5 {
		t.Fatalf("%d moves after the campaign reached the trigger anew, want 5 (the new copy only)", m)
	}
}

// A move that finishes after the campaign left the trigger is moved back.
func TestMoveFinishingAfterUndo(t *testing.T) {
	ctx := context.Background()
	eng := engine(t)
	l, err := ledger.Open("", ledger.Options{InMemory: true, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	record(t, eng, l, spamCopy(0), "u0@example.org", time.Now())
	l.Flush()
	var id store.CampaignID
	for i, u := range []string{"r1", "r2", "r3", "r4", "r5"} {
		out, _ := eng.Ingester.Report(ctx, spamCopy(20+i), store.KindSpam, u)
		id = out.Campaign
	}
	var p *Purger
	hm := &hookMover{fakeMover: &fakeMover{}}
	hm.during = func() {
		if _, err := p.UndoPurge(ctx, uint64(id), "bob"); err != nil {
			t.Error(err)
		}
	}
	p, _ = New(l, engCampaigns{eng}, hm, Options{Rate: 1000})
	p.Scan(ctx)
	p.Work(ctx)
	p.Work(ctx)
	if m, u := hm.counts(); m != 1 || u != 1 {
		t.Fatalf("%d moves, %d undos: want the move finishing after the undo moved back", m, u)
	}
}

// hookMover calls during inside its first Move.
type hookMover struct {
	*fakeMover
	during func()
}

func (h *hookMover) Move(ctx context.Context, r move.Request) (move.Result, error) {
	if f := h.during; f != nil {
		h.during = nil
		f()
	}
	return h.fakeMover.Move(ctx, r)
}

// Every reason a backend or the purger gives has its class.
func TestSkipClasses(t *testing.T) {
	for reason, want := range map[string]string{
		move.ReasonRead:      ledger.SkipRead,
		move.ReasonGone:      ledger.SkipGone,
		move.ReasonNotFound:  ledger.SkipNotFound,
		move.ReasonNoMailbox: ledger.SkipNotFound,
		move.ReasonAmbiguous: ledger.SkipAmbiguous,
		move.ReasonNoUser:    ledger.SkipNoUser,
		"ambiguous: the Message-ID of another message to the recipient": ledger.SkipAmbiguous,
		"unpurgeable: " + ledger.NoMessageID:                            ledger.SkipUnpurgeable,
		"no mailbox user for the recipient":                             ledger.SkipNoUser,
		"the campaign left the trigger":                                 ledger.SkipLeft,
		"the purge was undone by alice":                                 ledger.SkipLeft,
		"something else":                                                ledger.SkipOther,
	} {
		if got := ledger.SkipClass(reason); got != want {
			t.Errorf("SkipClass(%q) = %q, want %q", reason, got, want)
		}
	}
}
