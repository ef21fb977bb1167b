package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// TestReplayGuard: an event signed further than the replay window from
// when the stream stored it is skipped as stale, either way; an event
// applied already is skipped as replayed while its window lasts, stale
// after; an event without a signing time (a build before it) is applied
// as before; the same message delivered again is decided alike.
func TestReplayGuard(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	n := offlineNode(t, func() time.Time { return at })
	w := n.opts.ReplayWindow
	state := func(id string, signed time.Time) []byte {
		return mustEncode(t, &event{ID: id, V: jsonVersion, Type: evState, Node: "mx1", Time: at, Signed: signed,
			Campaign: 7, State: store.StateAllowed})
	}
	fresh := state("fresh", at)
	for _, tc := range []struct {
		name   string
		data   []byte
		stored time.Time
		want   string
	}{
		{"untimed", state("old", time.Time{}), at, ""},
		{"untimed again, much later", state("old", time.Time{}), at.Add(24 * time.Hour), ""},
		{"fresh", fresh, at.Add(time.Second), ""},
		{"published again in the window", fresh, at.Add(w - time.Second), RejectReplayed},
		{"published again at the window's end", fresh, at.Add(w), RejectReplayed},
		{"published again after the window", fresh, at.Add(w + time.Second), RejectStale},
		{"signed long before", state("late", at.Add(-w-time.Second)), at, RejectStale},
		{"signed long after", state("early", at.Add(w+time.Second)), at, RejectStale},
		{"clock behind, in the window", state("behind", at.Add(-w+time.Second)), at, ""},
		{"clock ahead, in the window", state("ahead", at.Add(w-time.Second)), at, ""},
		{"another event", state("other", at.Add(time.Minute)), at.Add(time.Minute), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq := n.applied + 1
			in := signedMsg(t, seq, 1, tc.data)
			in.stored = tc.stored
			before := n.rejected[tc.want]
			if err := n.applyMsg(in); err != nil {
				t.Fatal(err)
			}
			if n.applied != seq {
				t.Fatalf("applied %d, want %d", n.applied, seq)
			}
			if tc.want != "" && n.rejected[tc.want] != before+1 {
				t.Fatalf("skipped %v, want one more %s", n.rejected, tc.want)
			}
			// Delivered again (a consumer recreated): the same decision,
			// counted once.
			if err := n.applyMsg(in); err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && n.rejected[tc.want] != before+1 {
				t.Fatalf("delivered again: skipped %v", n.rejected)
			}
			ev, err := decodeEvent(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if got := n.replay.check(seq, tc.stored, ev, w); got != tc.want {
				t.Fatalf("decision %q, want %q", got, tc.want)
			}
		})
	}
}

// streamEvent returns the first message of the stream whose event
// matches ok, as the stream holds it (headers, signature and payload).
func streamEvent(t *testing.T, js jetstream.JetStream, ok func(*event) bool) *jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, Options{}.withDefaults().Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		if ev, err := decodeEvent(m.Data); err == nil && ok(ev) {
			return m
		}
	}
	t.Fatal("no such event in the stream")
	return nil
}

// republish publishes m again, as it is, once the stream's deduplication
// has forgotten it: the stream's duplicate window is shortened first (as
// if its time had passed). It returns the new sequence.
func republish(t *testing.T, js jetstream.JetStream, m *jetstream.RawStreamMsg) uint64 {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, Options{}.withDefaults().Stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.Duplicates != 100*time.Millisecond {
		cfg.Duplicates = 100 * time.Millisecond
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
		if err != nil {
			t.Fatal(err)
		}
		if !ack.Duplicate {
			return ack.Sequence
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the stream kept deduplicating the event")
	return 0
}

// TestReplayedEvent: a genuine signed event of the past (an allow an
// administrator undid since), published again by a node once the
// stream's deduplication forgot it, changes no node's state: it is
// skipped as replayed within the replay window, as stale after it, on
// every node alike (a node down meanwhile too, which reads the window's
// events again when it starts), and the state hashes stay equal.
func TestReplayedEvent(t *testing.T) {
	const window = 10 * time.Second
	f := newTestFleetWith(t, func(o *Options) { o.ReplayWindow = window })
	ctx := context.Background()
	a := f.report(0, copyOf(t, 0, 1), store.KindSpam, "alice")
	if err := f.members[1].eng.Ingester.SetState(ctx, a.Campaign, store.StateAllowed); err != nil {
		t.Fatal(err)
	}
	f.converge()
	allow := streamEvent(t, f.members[2].node.js, func(e *event) bool {
		return e.Type == evState && e.Campaign == a.Campaign && e.State == store.StateAllowed
	})
	ev, err := decodeEvent(allow.Data)
	if err != nil || ev.Signed.IsZero() {
		t.Fatalf("the allow event carries no signing time: %+v %v", ev, err)
	}
	if err := f.members[1].eng.Ingester.SetState(ctx, a.Campaign, store.StateActive); err != nil {
		t.Fatal(err)
	}
	f.converge()

	active := func(what string) {
		t.Helper()
		for i, m := range f.members {
			c, err := m.st.Get(ctx, a.Campaign)
			if err != nil || c.State != store.StateActive {
				t.Fatalf("%s: mx%d: campaign %d is %v (%v), want active: the undone allow was applied again", what, i, a.Campaign, c.State, err)
			}
		}
	}
	skipped := func(what, reason string, want uint64) {
		t.Helper()
		for i, m := range f.members {
			s := m.node.Status(ctx, false)
			if s.Rejected[reason] != want || s.Error != "" {
				t.Fatalf("%s: mx%d skipped %v (error %q), want %d %s", what, i, s.Rejected, s.Error, want, reason)
			}
		}
	}

	// Published again by mx1 within the window, while mx2 is down.
	down := f.members[2]
	down.stop()
	f.members[2] = nil
	seq := republish(t, f.members[1].node.js, allow)
	if time.Since(ev.Signed) >= window {
		t.Skipf("the machine is too slow: the replay came %v after the signature", time.Since(ev.Signed))
	}
	f.members[2] = f.startMember(2, down.dir)
	f.requireEqualHashes("allow published again in the window")
	active("in the window")
	skipped("in the window", RejectReplayed, 1)
	for i, m := range f.members {
		if s := m.node.Status(ctx, false); s.Applied < seq {
			t.Fatalf("mx%d did not go past the replay: %+v", i, s)
		}
	}

	// Published again after the window.
	time.Sleep(time.Until(ev.Signed.Add(window + time.Second)))
	republish(t, f.members[0].node.js, allow)
	b := f.report(2, copyOf(t, 1, 2), store.KindSpam, "bob") // the stream goes on
	if b.Campaign == 0 || b.Replication != campaign.Replicated {
		t.Fatalf("report after the replays: %+v", b)
	}
	f.requireEqualHashes("allow published again after the window")
	active("after the window")
	skipped("after the window", RejectStale, 1)
}

// TestQueuedOutlastsWindow: events queued in the outbox while the stream
// is unreachable for longer than the replay window are signed again when
// they are published: they apply on every node, none is skipped.
func TestQueuedOutlastsWindow(t *testing.T) {
	const window = 2 * time.Second
	f := newTestFleetWith(t, func(o *Options) { o.ReplayWindow = window })
	ctx := context.Background()
	a := f.report(0, copyOf(t, 0, 1), store.KindSpam, "alice")
	f.converge()
	f.cluster.shutdown()
	if o := f.report(1, copyOf(t, 2, 5), store.KindSpam, "quinn"); o.Replication != campaign.Queued {
		t.Fatalf("report with NATS down: %+v", o)
	}
	if err := f.members[2].eng.Ingester.SetState(ctx, a.Campaign, store.StateAllowed); err != nil {
		t.Fatal(err)
	}
	queuedAt := time.Now()
	time.Sleep(2 * window)
	for i := range 3 {
		f.cluster.start(i)
	}
	f.requireEqualHashes("queued events published")
	if time.Since(queuedAt) <= window {
		t.Fatal("the outage did not outlast the replay window")
	}
	for i, m := range f.members {
		s := m.node.Status(ctx, false)
		for _, r := range []string{RejectStale, RejectReplayed} {
			if s.Rejected[r] != 0 {
				t.Errorf("mx%d skipped queued events: %v", i, s.Rejected)
			}
		}
		if v := f.check(i, base(2)); v.Campaign == 0 || v.Provisional {
			t.Errorf("mx%d: the queued report is not a campaign: %+v", i, v)
		}
		if c, err := m.st.Get(ctx, a.Campaign); err != nil || c.State != store.StateAllowed {
			t.Errorf("mx%d: the queued allow was not applied: %+v %v", i, c, err)
		}
	}
}
