package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/nddmilter/nddmilter/internal/testutil"
)

var texts = []struct{ subject, body string }{
	{"Exclusive offer: refinance your mortgage at record low rates",
		"Dear homeowner, our records indicate that you may qualify for a substantially lower monthly payment on your current mortgage. Interest rates have fallen to historic lows and thousands of families are already saving hundreds of dollars every month.\n\nOur licensed advisors compare offers from dozens of national lenders in minutes. There is no obligation, no hidden fee and your credit score will not be affected by requesting a personal quote today.\n\nApproval takes less than two days for most applicants. Simply visit our secure website, answer a few short questions about your property and your income, and a specialist will contact you with several tailored proposals."},
	{"Your account has been selected for a luxury watch giveaway",
		"Congratulations! Your email address was randomly chosen among our loyal customers to receive a genuine Swiss luxury chronograph, absolutely free of charge, as part of our anniversary celebration.\n\nTo claim your reward you only need to confirm your shipping details and cover a small handling fee. Quantities are strictly limited and unclaimed prizes will be offered to the next winner on our waiting list.\n\nEvery timepiece comes with a certificate of authenticity, a premium leather strap, sapphire crystal glass and water resistance up to one hundred meters. Retail value exceeds three thousand dollars."},
	{"Lose weight fast with this natural miracle supplement",
		"Doctors are stunned by a natural formula that melts stubborn belly fat without dieting or exercise. Thousands of satisfied customers report dramatic results within the very first weeks of treatment.\n\nThe secret is a rare tropical fruit extract combined with green tea, ginger and powerful antioxidants that boost your metabolism and suppress cravings throughout the entire day.\n\nOrder today and receive three bottles for the price of one, plus free express shipping worldwide. Every purchase is protected by our unconditional ninety day money back guarantee."},
}

func base(i int) []byte { return spamgen.NewMessage(texts[i].subject, texts[i].body, false) }

func copyOf(t testing.TB, i int, seed uint64) []byte {
	t.Helper()
	b, err := spamgen.Mutate(base(i), spamgen.Options{Kinds: []spamgen.Kind{spamgen.Reencode}, Seed: seed, Strength: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	resOnce sync.Once
	resLex  *imatchbag.Lexicon
	resMod  *andd.Model
	resErr  error
)

func resources(t testing.TB) (*imatchbag.Lexicon, *andd.Model) {
	t.Helper()
	resOnce.Do(func() {
		resLex, resErr = imatchbag.DefaultLexicon()
		if resErr == nil {
			resMod, resErr = andd.DefaultModel()
		}
	})
	if resErr != nil {
		t.Fatal(resErr)
	}
	return resLex, resMod
}

// clock is a settable clock shared by the test's engines and nodes.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// member is one node of a test fleet: store, engine and fleet node.
type member struct {
	dir  string
	st   *store.Badger
	eng  *campaign.Engine
	node *Node
}

type testFleet struct {
	t       *testing.T
	cluster *testCluster
	clock   *clock
	members []*member
	// mod changes the options of each member before it starts (nil:
	// none).
	mod func(*Options)
}

func nodeOptions(c *testCluster, i int, clk *clock) Options {
	keys, nodes := testKeys(c.t)
	return Options{
		Signer:        keys[i],
		Nodes:         nodes,
		Node:          fmt.Sprintf("mx%d", i),
		URLs:          []string{c.url(i)},
		HitsEvery:     100 * time.Millisecond,
		StatusEvery:   200 * time.Millisecond,
		SnapshotEvery: -1,
		ApplyTimeout:  10 * time.Second,
		StallAfter:    time.Second,
		Logger:        slog.New(slog.DiscardHandler),
		Clock:         clk.Now,
		Version:       fmt.Sprintf("build-%d", i),
	}
}

func storeOptions() store.Options {
	return store.Options{NoSyncWrites: true, Expiry: -1, Logger: slog.New(slog.DiscardHandler)}
}

// startMember opens the store in dir, its engine and its node.
func (f *testFleet) startMember(i int, dir string) *member {
	f.t.Helper()
	st, err := store.Open(dir, storeOptions())
	if err != nil {
		f.t.Fatal(err)
	}
	lex, mod := resources(f.t)
	eng, err := campaign.New(st, lex, mod, campaign.Options{Clock: f.clock.Now, CacheTTL: -1}, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	o := nodeOptions(f.cluster, i, f.clock)
	if f.mod != nil {
		f.mod(&o)
	}
	node, err := Start(context.Background(), eng, st, o)
	if err != nil {
		f.t.Fatal(err)
	}
	wire(eng, node)
	return &member{dir: dir, st: st, eng: eng, node: node}
}

// wire makes node eng's write target, as the daemon does.
func wire(eng *campaign.Engine, node *Node) {
	node.SetEngine(eng)
	eng.Ingester.SetWriter(node)
	eng.Checker.SetHitCounter(node)
	eng.Checker.SetProvisional(node.Provisional())
}

func (m *member) stop() {
	m.node.Close()
	m.st.Close()
}

// newTestFleet starts three servers and three members, or skips t in
// -short mode.
func newTestFleet(t *testing.T) *testFleet {
	return newTestFleetWith(t, nil)
}

// newTestFleetWith is newTestFleet with the members' options changed by
// mod.
func newTestFleetWith(t *testing.T, mod func(*Options)) *testFleet {
	if testing.Short() {
		t.Skip("starts a JetStream cluster")
	}
	c := startCluster(t, 3)
	f := &testFleet{t: t, cluster: c, clock: &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}, mod: mod}
	for i := range 3 {
		f.members = append(f.members, f.startMember(i, t.TempDir()))
	}
	// The cluster elects its leaders meanwhile: reports before would be
	// queued (and published later).
	deadline := time.Now().Add(20 * time.Second)
	for _, m := range f.members {
		for !m.node.isReady() {
			if time.Now().After(deadline) {
				t.Fatal("the stream was not set up in 20s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Cleanup(func() {
		for _, m := range f.members {
			if m != nil {
				m.stop()
			}
		}
	})
	return f
}

func (f *testFleet) report(i int, raw []byte, kind store.Kind, who string) campaign.ReportOutcome {
	f.t.Helper()
	o, err := f.members[i].eng.Ingester.Report(context.Background(), raw, kind, who)
	if err != nil {
		f.t.Fatalf("report on mx%d: %v", i, err)
	}
	return o
}

func (f *testFleet) check(i int, raw []byte) campaign.Verdict {
	f.t.Helper()
	v, err := f.members[i].eng.Checker.Check(context.Background(), raw)
	if err != nil {
		f.t.Fatalf("check on mx%d: %v", i, err)
	}
	return v
}

// converge waits until every node applied the whole stream and no hits
// are pending, and returns the nodes' state hashes.
func (f *testFleet) converge() []string {
	f.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var hashes []string
		done := true
		seqs := map[uint64]bool{}
		for _, m := range f.members {
			m.node.flushHits(ctx)
			s := m.node.Status(ctx, true)
			if !s.Ready || s.StreamLast == 0 || s.Lag != 0 || s.Outbox != 0 || len(m.node.hits) != 0 {
				done = false
			}
			hashes = append(hashes, s.StateHash)
			seqs[s.StateHashSeq] = true
		}
		// A node that flushed hits after another hashed its state: the
		// hashes are of different sequences, and compared only once equal.
		if len(seqs) != 1 {
			done = false
		}
		if done {
			// Nothing was published meanwhile (hits): the hashes are final.
			again := f.members[0].node.Status(ctx, false)
			if again.Lag == 0 && again.StreamLast == f.members[0].node.Status(ctx, false).StreamLast {
				return hashes
			}
		}
		if time.Now().After(deadline) {
			for _, m := range f.members {
				f.t.Logf("%+v", m.node.Status(ctx, true))
			}
			f.t.Fatal("the fleet did not converge")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *testFleet) requireEqualHashes(what string) {
	f.t.Helper()
	h := f.converge()
	for i := 1; i < len(h); i++ {
		if h[i] != h[0] {
			f.t.Fatalf("%s: state hashes differ: %v", what, h)
		}
	}
	f.t.Logf("%s: state hash %s on %d nodes", what, h[0][:12], len(h))
}

// waitFor waits up to 20 s for ok, polling.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFleet runs the scenario on three embedded JetStream servers
// and three engines: reports on different nodes, not-spam revocation,
// allow and delete, hits and expiry converge to one state hash; a node
// restarted from an empty store catches up from a snapshot and the
// events after it; with NATS down checks still answer and reports queue,
// then arrive.
func TestFleet(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()

	// Reports on different nodes make one campaign, seen on every node.
	a := f.report(0, copyOf(t, 0, 1), store.KindSpam, "alice")
	if a.Replication != campaign.Replicated || !a.Created || a.Campaign == 0 {
		t.Fatalf("first report: %+v", a)
	}
	b := f.report(1, copyOf(t, 0, 2), store.KindSpam, "bob")
	if b.Campaign != a.Campaign || b.Created {
		t.Fatalf("second report on another node: %+v, want campaign %d", b, a.Campaign)
	}
	f.converge()
	for i := range 3 {
		if v := f.check(i, base(0)); v.Campaign != a.Campaign || v.Action != action.Tag {
			t.Fatalf("check on mx%d: %+v", i, v)
		}
	}
	// Batches through several nodes at once.
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs := []campaign.ReportRequest{
				{Raw: copyOf(t, 1, uint64(10+i)), Kind: store.KindSpam, Reporter: fmt.Sprint("w", i)},
				{Raw: copyOf(t, 2, uint64(20+i)), Kind: store.KindSpam, Reporter: fmt.Sprint("l", i)},
			}
			outs, err := f.members[i].eng.Ingester.ReportBatch(ctx, reqs)
			if err != nil || len(outs) != 2 {
				t.Errorf("batch on mx%d: %v %v", i, outs, err)
			}
		}()
	}
	wg.Wait()
	f.requireEqualHashes("reports")
	watch := f.check(2, base(1)).Campaign
	lose := f.check(0, base(2)).Campaign
	if watch == 0 || lose == 0 || watch == lose {
		t.Fatalf("campaigns %d %d", watch, lose)
	}

	// Not-spam reports on two nodes revoke the first campaign everywhere.
	f.report(2, copyOf(t, 0, 3), store.KindHam, "henry")
	if o := f.report(1, copyOf(t, 0, 4), store.KindHam, "irene"); !o.Revoked {
		t.Fatalf("second not-spam report did not revoke: %+v", o)
	}
	f.converge()
	for i := range 3 {
		c, err := f.members[i].st.Get(ctx, a.Campaign)
		if err != nil || c.State != store.StateRevoked {
			t.Fatalf("mx%d: campaign %d: %+v %v", i, a.Campaign, c, err)
		}
	}
	// Allow on one node, delete on another.
	if err := f.members[0].eng.Ingester.SetState(ctx, watch, store.StateAllowed); err != nil {
		t.Fatal(err)
	}
	if err := f.members[1].eng.Ingester.Delete(ctx, lose); err != nil {
		t.Fatal(err)
	}
	if err := f.members[2].eng.Ingester.Delete(ctx, lose); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete of a deleted campaign: %v", err)
	}
	// Hits counted on every node add up everywhere.
	for i := range 3 {
		for range i + 1 {
			if v := f.check(i, base(1)); v.Campaign != watch || v.Action != action.Accept {
				t.Fatalf("allowed campaign on mx%d: %+v", i, v)
			}
		}
	}
	f.requireEqualHashes("revocation, allow, delete, hits")
	for i := range 3 {
		c, err := f.members[i].st.Get(ctx, watch)
		if err != nil || c.State != store.StateAllowed || c.Messages != 7 { // 6 checks here, 1 above
			t.Fatalf("mx%d: allowed campaign: %+v %v", i, c, err)
		}
		if _, err := f.members[i].st.Get(ctx, lose); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("mx%d: deleted campaign: %v", i, err)
		}
	}

	// Expiry: a campaign reported 20 days later outlives the others.
	f.clock.Add(20 * 24 * time.Hour)
	late := f.report(2, base(2), store.KindSpam, "late")
	f.clock.Add(15 * 24 * time.Hour)
	if _, err := f.members[1].eng.Ingester.Expire(ctx); err != nil {
		t.Fatal(err)
	}
	f.requireEqualHashes("expiry")
	for i := range 3 {
		if _, err := f.members[i].st.Get(ctx, a.Campaign); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("mx%d: expired campaign: %v", i, err)
		}
		if _, err := f.members[i].st.Get(ctx, late.Campaign); err != nil {
			t.Fatalf("mx%d: recent campaign: %v", i, err)
		}
	}

	// A node restarted from an empty store catches up from the snapshot
	// and the events after it.
	if seq, size, err := f.members[0].node.Snapshot(ctx); err != nil || seq == 0 || size == 0 {
		t.Fatalf("snapshot: %d %d %v", seq, size, err)
	}
	m := f.members[2]
	m.stop()
	f.members[2] = nil
	if err := os.RemoveAll(m.dir); err != nil {
		t.Fatal(err)
	}
	after := f.report(0, copyOf(t, 1, 30), store.KindSpam, "after-snapshot")
	if ok, err := Bootstrap(ctx, m.dir, storeOptions(), nodeOptions(f.cluster, 2, f.clock)); err != nil || !ok {
		t.Fatalf("bootstrap: %v %v", ok, err)
	}
	f.members[2] = f.startMember(2, m.dir)
	f.requireEqualHashes("restart from a snapshot")
	if c, err := f.members[2].st.Get(ctx, after.Campaign); err != nil || c.SpamReporters == 0 {
		t.Fatalf("report after the snapshot on the restored node: %+v %v", c, err)
	}

	// A node stopped while the others take reports resumes from its
	// applied sequence: each event applied once.
	m = f.members[1]
	m.stop()
	f.members[1] = nil
	during := f.report(0, copyOf(t, 2, 50), store.KindSpam, "while-stopped")
	f.members[1] = f.startMember(1, m.dir)
	f.requireEqualHashes("restart with its store")
	want, _ := f.members[0].st.Get(ctx, during.Campaign)
	if c, err := f.members[1].st.Get(ctx, during.Campaign); err != nil || want == nil || c.SpamReports != want.SpamReports {
		t.Fatalf("report while stopped, on the restarted node: %+v %v (want %+v)", c, err, want)
	}

	// A node stopped for longer than the stream keeps events (purged
	// before the previous snapshot) cannot resume: ErrBehind, and it
	// starts again from the snapshot.
	m = f.members[1]
	m.stop()
	f.members[1] = nil
	for i := range 3 {
		f.report(0, copyOf(t, 1, uint64(60+i)), store.KindSpam, fmt.Sprint("behind", i))
		if i == 1 {
			if _, _, err := f.members[0].node.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := f.members[0].node.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(m.dir, storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	lex, mod := resources(t)
	eng, _ := campaign.New(st, lex, mod, campaign.Options{Clock: f.clock.Now}, nil)
	if _, err := Start(ctx, eng, st, nodeOptions(f.cluster, 1, f.clock)); !errors.Is(err, ErrBehind) {
		t.Fatalf("start of a node behind the stream: %v", err)
	}
	st.Close()
	os.RemoveAll(m.dir)
	if ok, err := Bootstrap(ctx, m.dir, storeOptions(), nodeOptions(f.cluster, 1, f.clock)); err != nil || !ok {
		t.Fatalf("bootstrap: %v %v", ok, err)
	}
	f.members[1] = f.startMember(1, m.dir)
	f.requireEqualHashes("a node behind the stream, from the snapshot")

	// NATS down: checks answer from the local store, reports queue.
	f.cluster.shutdown()
	start := time.Now()
	if v := f.check(1, base(2)); v.Campaign != late.Campaign {
		t.Fatalf("check with NATS down: %+v", v)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("check with NATS down took %v", d)
	}
	q := f.report(1, copyOf(t, 0, 40), store.KindSpam, "queued")
	if q.Replication != campaign.Queued || q.Campaign != 0 {
		t.Fatalf("report with NATS down: %+v", q)
	}
	if s := f.members[1].node.Status(ctx, false); s.Outbox != 1 {
		t.Fatalf("outbox with NATS down: %+v", s)
	}
	for i := range 3 {
		f.cluster.start(i)
	}
	f.requireEqualHashes("NATS back")
	for i := range 3 {
		if v := f.check(i, base(0)); v.Campaign == 0 {
			t.Fatalf("mx%d: the queued report did not arrive: %+v", i, v)
		}
	}
}

// Events of version 1 (the raw message, signed by every node) already in
// a stream are still applied, the same on every node; an event of a newer
// version than a node's stops it there (ErrNewerEvent) instead of letting
// its state differ.
func TestEventVersions(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	n := f.members[0].node
	old := &event{ID: newEventID("old"), Type: evReport, Node: "mx0", Time: f.clock.Now(),
		Reports: []eventReport{{Raw: copyOf(t, 1, 7), Kind: store.KindSpam, Reporter: "v1"}}}
	data, err := old.encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.publish(ctx, old.ID, data); err != nil {
		t.Fatal(err)
	}
	o := f.report(1, copyOf(t, 1, 8), store.KindSpam, "v2")
	if o.Created || o.Campaign == 0 {
		t.Fatalf("a report joining the campaign of a version 1 event: %+v", o)
	}
	f.requireEqualHashes("version 1 and 2 events")

	newer := &event{ID: newEventID("new"), V: eventVersion + 1, Type: evReport, Node: "mx0", Time: f.clock.Now()}
	if data, err = newer.encode(); err != nil {
		t.Fatal(err)
	}
	seq, err := n.publish(ctx, newer.ID, data)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, m := range f.members {
		for {
			s := m.node.Status(ctx, false)
			if s.Applied == seq-1 && strings.Contains(s.Error, "newer version") && s.Halted != nil {
				if *s.Halted != (Halt{Seq: seq, Version: eventVersion + 1}) {
					t.Fatalf("%s halted at %+v, want event %d", s.Node, s.Halted, seq)
				}
				break
			}
			if s.Applied >= seq || time.Now().After(deadline) {
				t.Fatalf("%s after an event of a newer version: %+v", s.Node, s)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The halt is not silent: fleet status says so instead of converged.
	nodes, err := n.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("halted: event %d of version %d needs an upgrade", seq, eventVersion+1)
	if c := Compare(nodes); c.Converged || !strings.Contains(c.Summary(), "HALTED") || !strings.Contains(c.Summary(), want) {
		t.Fatalf("comparison of halted nodes: %+v %q", c, c.Summary())
	}
	// Recovery when no build will apply it: the event taken out of the
	// stream (an admin's nats stream rmm), the nodes go on.
	js := newRawPublisher(t, f.cluster.url(2)).js
	s, err := js.Stream(ctx, n.opts.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, seq); err != nil {
		t.Fatal(err)
	}
	o = f.report(2, copyOf(t, 2, 9), store.KindSpam, "after")
	f.requireEqualHashes("after the newer event was taken out")
	for _, m := range f.members {
		if s := m.node.Status(ctx, false); s.Halted != nil || s.Applied <= seq {
			t.Fatalf("%s after the newer event was taken out: %+v", s.Node, s)
		}
	}
}

// TestStalledConsumer drops the events one node's consumer delivers, as
// a consumer that stalled would deliver none: the node's watchdog
// recreates the consumer, which applies the events from the store's
// applied sequence, and the fleet converges.
func TestStalledConsumer(t *testing.T) {
	f := newTestFleet(t)
	f.report(0, copyOf(t, 0, 1), store.KindSpam, "alice")
	f.converge()
	stalled := f.members[1].node
	stalled.dropEvents.Store(true)
	f.report(0, copyOf(t, 1, 2), store.KindSpam, "bob")
	f.report(2, copyOf(t, 2, 3), store.KindSpam, "carol")
	deadline := time.Now().Add(20 * time.Second)
	for stalled.Status(context.Background(), false).ConsumerRestarts == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no consumer recreated in 20s: %+v", stalled.Status(context.Background(), false))
		}
		time.Sleep(50 * time.Millisecond)
	}
	stalled.dropEvents.Store(false)
	f.requireEqualHashes("after the stall")
	if v := f.check(1, base(2)); v.Campaign == 0 {
		t.Fatalf("mx1 did not apply the reports after the stall: %+v", v)
	}
}

// TestForgetNode retires a node: while it publishes its status it cannot
// be forgotten; once stopped it turns silent in the others' view and is
// forgotten. The status bucket keeps statuses ForgetAfter (its TTL), set
// again on a bucket made without it.
func TestForgetNode(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	n := f.members[0].node
	names := func() (live, silent []string) {
		st, err := n.Peers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.Silent {
				silent = append(silent, s.Node)
			} else {
				live = append(live, s.Node)
			}
		}
		return live, silent
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				live, silent := names()
				t.Fatalf("%s: not within 20s (live %v, silent %v)", what, live, silent)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("three live nodes", func() bool { live, _ := names(); return len(live) == 3 })
	// Each status names the node's build and the event versions it applies.
	st, err := n.Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Version != "build-"+strings.TrimPrefix(s.Node, "mx") || s.Events != eventVersion {
			t.Errorf("%s: version %q, events %d", s.Node, s.Version, s.Events)
		}
	}

	for _, tt := range []struct {
		node string
		want error
	}{
		{"mx0", ErrNodeAlive}, // this node
		{"mx1", ErrNodeAlive},
		{"mx9", ErrUnknownNode},
	} {
		if err := n.Forget(ctx, tt.node); !errors.Is(err, tt.want) {
			t.Errorf("Forget(%s) = %v, want %v", tt.node, err, tt.want)
		}
	}

	f.members[2].stop()
	f.members[2] = nil
	waitFor("mx2 silent", func() bool { _, silent := names(); return slices.Equal(silent, []string{"mx2"}) })
	if err := n.Forget(ctx, "mx2"); err != nil {
		t.Fatalf("Forget(mx2) = %v", err)
	}
	// Status reads may be served by a replica of the bucket a moment
	// behind its leader's purge.
	waitFor("mx2 forgotten", func() bool { live, silent := names(); return len(live) == 2 && len(silent) == 0 })
	if err := n.Forget(ctx, "mx2"); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("Forget(mx2) again = %v, want ErrUnknownNode", err)
	}

	ttl := func() time.Duration {
		kv, err := n.js.KeyValue(ctx, n.opts.nodesBucket())
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.TTL()
	}
	if got := ttl(); got != 7*24*time.Hour {
		t.Errorf("status bucket TTL %v, want the default ForgetAfter", got)
	}
	// A bucket made by an older node, with no TTL, gets it at setup.
	if _, err := n.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: n.opts.nodesBucket(), Replicas: n.opts.Replicas, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if got := ttl(); got != 0 {
		t.Fatalf("TTL %v after its removal", got)
	}
	n.mu.Lock()
	n.ready = false
	n.mu.Unlock()
	if err := n.setup(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := ttl(); got != 7*24*time.Hour {
		t.Errorf("status bucket TTL %v after setup, want the default ForgetAfter", got)
	}
}

// TestConcurrentReportsShareEvents sends reports one by one from many
// goroutines at once, as the API and the report socket do: the batcher
// carries them in far fewer events than reports, each caller gets its own
// report's outcome, and the fleet converges.
func TestConcurrentReportsShareEvents(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	n := f.members[0]
	before := n.node.Status(ctx, false).Published
	const reports = 48
	msgs := make([][]byte, reports)
	for i := range msgs {
		msgs[i] = copyOf(t, i%len(texts), uint64(100+i))
	}
	outs := make([]campaign.ReportOutcome, reports)
	errs := make([]error, reports)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range reports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			outs[i], errs[i] = n.eng.Ingester.Report(ctx, msgs[i], store.KindSpam, fmt.Sprintf("user%d", i))
		}()
	}
	close(start)
	wg.Wait()
	ids := map[int]store.CampaignID{}
	for i, o := range outs {
		if errs[i] != nil || o.Replication != campaign.Replicated || o.Campaign == 0 {
			t.Fatalf("report %d: %+v %v", i, o, errs[i])
		}
		b := i % len(texts)
		if id, ok := ids[b]; ok && id != o.Campaign {
			t.Errorf("report %d (campaign text %d) in campaign %d, the others of its text in %d", i, b, o.Campaign, id)
		}
		ids[b] = o.Campaign
	}
	if len(ids) != len(texts) || ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
		t.Errorf("campaigns of the %d texts: %v", len(texts), ids)
	}
	events := n.node.Status(ctx, false).Published - before
	t.Logf("%d concurrent reports in %d events", reports, events)
	if events == 0 || events > reports/2 {
		t.Errorf("%d concurrent reports in %d events: not coalesced", reports, events)
	}
	f.requireEqualHashes("after concurrent reports")
	for i, o := range outs {
		if v := f.check(2, msgs[i]); v.Campaign != o.Campaign {
			t.Fatalf("report %d: campaign %d on mx0, a check of its message on mx2 finds %d", i, o.Campaign, v.Campaign)
		}
	}
}

// TestBatcherQueues: with NATS down, concurrent reports are all answered
// queued (sharing outbox events) and arrive once NATS is back; a report
// made through a node that was closed is queued too, and published by
// the node that opens the store next.
func TestBatcherQueues(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	f.cluster.shutdown()
	const reports = 12
	var wg sync.WaitGroup
	outs := make([]campaign.ReportOutcome, reports)
	errs := make([]error, reports)
	for i := range reports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = f.members[0].eng.Ingester.Report(ctx, copyOf(t, i%len(texts), uint64(200+i)), store.KindSpam, fmt.Sprintf("q%d", i))
		}()
	}
	wg.Wait()
	for i, o := range outs {
		if errs[i] != nil || o.Replication != campaign.Queued || o.Campaign != 0 {
			t.Fatalf("report %d with NATS down: %+v %v", i, o, errs[i])
		}
	}
	if s := f.members[0].node.Status(ctx, false); s.Outbox < 1 || s.Outbox > reports {
		t.Fatalf("outbox after %d queued reports: %d events", reports, s.Outbox)
	}

	// A node closed (as the daemon's drain does): its engine's reports
	// still go to the outbox.
	m := f.members[2]
	m.node.Close()
	o, err := m.eng.Ingester.Report(ctx, copyOf(t, 0, 300), store.KindSpam, "late")
	if err != nil || o.Replication != campaign.Queued {
		t.Fatalf("report through a closed node: %+v %v", o, err)
	}
	if _, n, err := m.st.OutboxList(ctx, 0); err != nil || n != 1 {
		t.Fatalf("outbox of the closed node: %d events, %v", n, err)
	}
	m.st.Close()
	for i := range 3 {
		f.cluster.start(i)
	}
	f.members[2] = f.startMember(2, m.dir)
	f.requireEqualHashes("NATS back")
	for i := range 3 {
		for b := range texts {
			if v := f.check(i, base(b)); v.Campaign == 0 {
				t.Fatalf("mx%d: the queued reports of text %d did not arrive: %+v", i, b, v)
			}
		}
	}
}

// TestCloseWithNATSDown: a node closes promptly with every server down,
// though its consumer is re-creating itself then (a request the library
// gives 10 s and does not cancel on Stop): the daemon's shutdown is not
// held up by the outage. The bound is the library's timeout, not a speed.
func TestCloseWithNATSDown(t *testing.T) {
	f := newTestFleet(t)
	f.report(0, copyOf(t, 0, 1), store.KindSpam, "a")
	f.converge()
	f.cluster.shutdown()
	deadline := time.Now().Add(10 * time.Second)
	for _, m := range f.members {
		for m.node.nc.IsConnected() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(2 * time.Second) // the consumers notice and start re-creating themselves
	for i, m := range f.members {
		start := time.Now()
		m.stop()
		f.members[i] = nil
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("mx%d: Close with NATS down took %v", i, d)
		}
	}
}

// TestStreamReplicas: a node's status lists the stream's copies, the
// leader first, all current in a healthy cluster; a server stopped shows
// as an offline copy (fleet status then says the stream has no spare).
func TestStreamReplicas(t *testing.T) {
	f := newTestFleet(t)
	f.report(0, copyOf(t, 0, 1), store.KindSpam, "a")
	f.converge()
	ctx := context.Background()
	// A node set up and applying shows no error, whatever its first
	// tries met while the cluster elected its leaders.
	for i, m := range f.members {
		if e := m.node.Status(ctx, false).Error; e != "" {
			t.Errorf("mx%d applies the stream but shows the error %q", i, e)
		}
	}
	reps := f.members[0].node.Status(ctx, false).Replicas
	if len(reps) != 3 || !reps[0].Leader {
		t.Fatalf("replicas %+v: want 3, the leader first", reps)
	}
	// A publish that got no answer (as on a host cut off while its
	// server led the stream, which still names itself leader for a
	// while): reports queue without trying, though queries answer, until
	// the outbox loop's publish of the queued event is acknowledged.
	m0 := f.members[0].node
	published := func() uint64 {
		m0.mu.Lock()
		defer m0.mu.Unlock()
		return m0.published
	}
	pBefore := published()
	m0.publishFailed()
	queuedRaw := copyOf(t, 2, 1)
	if o := f.report(0, queuedRaw, store.KindSpam, "c"); o.Replication != campaign.Queued {
		t.Errorf("report after a publish without answer: %+v, want queued", o)
	}
	// The outbox loop may publish the queued report at any moment, and
	// its acknowledgement ends the spell: only an answer before that is
	// wrong.
	if _, ok := m0.streamState(ctx); ok && published() == pBefore {
		t.Error("streamState answered while the last publish got no answer")
	}
	// A query that finds a leader does not end it while the report waits
	// in the outbox; only an acknowledged publish (the outbox loop's) does.
	if _, err := m0.queryStream(); err != nil {
		t.Fatal(err)
	}
	// published counts before it marks the publish acknowledged: with no
	// publish since the report, the spell must still hold.
	if !m0.streamUnreachable() && published() == pBefore {
		t.Error("a query's answer ended the spell of a publish without answer, with a report queued")
	}
	waitFor(t, "the queued report published by the outbox loop", func() bool {
		return !m0.streamUnreachable() && m0.Status(ctx, false).Outbox == 0
	})
	if o := f.report(0, copyOf(t, 2, 2), store.KindSpam, "c"); o.Replication != campaign.Replicated {
		t.Errorf("report once the outbox drained: %+v, want replicated", o)
	}
	f.converge()
	for i := range f.members {
		if v := f.check(i, queuedRaw); v.Campaign == 0 {
			t.Errorf("mx%d: the report queued after a publish without answer is missing: %+v", i, v)
		}
	}
	stopped := -1
	for i, r := range reps {
		if !r.Healthy() {
			t.Errorf("replica %+v of a healthy cluster", r)
		}
		if i > 0 && stopped < 0 {
			for j, s := range f.cluster.srvs {
				if s != nil && s.Name() == r.Server {
					stopped = j
				}
			}
		}
	}
	if stopped < 0 {
		t.Fatalf("no server is named after a replica of %+v", reps)
	}
	name := f.cluster.srvs[stopped].Name()
	f.cluster.srvs[stopped].Shutdown()
	f.cluster.srvs[stopped].WaitForShutdown()
	f.cluster.srvs[stopped] = nil
	asker := (stopped + 1) % 3
	deadline := time.Now().Add(30 * time.Second)
	for {
		reps = f.members[asker].node.Status(ctx, false).Replicas
		i := slices.IndexFunc(reps, func(r Replica) bool { return r.Server == name })
		if i >= 0 && reps[i].Offline && !reps[i].Healthy() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %s stopped 30 s ago: replicas %+v", name, reps)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s := f.members[asker].node.Status(ctx, false); s.StreamUnreachable {
		t.Errorf("mx%d: stream unreachable with 2 servers of 3 up", asker)
	}

	// A second server down: the asker's server alone has no quorum. The
	// asker stays connected, and says the stream does not answer; once
	// the servers are back, it answers again.
	other := (stopped + 2) % 3
	f.cluster.srvs[other].Shutdown()
	f.cluster.srvs[other].WaitForShutdown()
	f.cluster.srvs[other] = nil
	waitStatus := func(what string, ok func(Status) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s := f.members[asker].node.Status(ctx, false)
			if ok(s) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("mx%d: %s: not within 30 s: %+v", asker, what, s)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitStatus("connected, stream unreachable", func(s Status) bool { return s.Connected && s.Ready && s.StreamUnreachable })
	// Meanwhile a report is queued at once, without a publish that
	// would wait for its timeout again.
	if _, err := f.members[asker].node.publish(ctx, "probe", []byte("{}")); !errors.Is(err, errUnreachable) {
		t.Errorf("mx%d: publish to an unreachable stream: %v, want errUnreachable without trying", asker, err)
	}
	raw := copyOf(t, 1, 1)
	if o := f.report(asker, raw, store.KindSpam, "b"); o.Replication != campaign.Queued {
		t.Errorf("mx%d: report while the stream is unreachable: %+v, want queued", asker, o)
	}
	// The readiness answer does not wait for the stream either.
	rctx, cancel := context.WithCancel(ctx)
	cancel()
	if s := f.members[asker].node.Status(rctx, false); !s.StreamUnreachable {
		t.Errorf("mx%d: status with an ended context: %+v, want the last verdict (unreachable)", asker, s)
	}
	f.cluster.start(stopped)
	f.cluster.start(other)
	waitStatus("the stream answers again", func(s Status) bool { return !s.StreamUnreachable && len(s.Replicas) == 3 })
	// The queued report reaches every node.
	f.converge()
	for i := range f.members {
		if v := f.check(i, raw); v.Campaign == 0 {
			t.Errorf("mx%d: the report queued on mx%d while the stream was unreachable is missing: %+v", i, asker, v)
		}
	}
}

// TestClockOffset: a node whose clock runs ahead of the others' is named
// in every node's status with its offset and publishes no expiry
// decision (ErrClockOffset), while the others do; a node whose clock is
// behind is not taken for silent; once its clock is right again, the
// node decides expiry again.
func TestClockOffset(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	f.members[1].node.testSkew.Store(int64(-time.Hour))
	f.members[2].node.testSkew.Store(int64(2 * time.Hour))
	offsets := func(i int) map[string]Status {
		st, err := f.members[i].node.Peers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]Status{}
		for _, s := range st {
			m[s.Node] = s
		}
		return m
	}
	near := func(d, want time.Duration) bool { return (d - want).Abs() < 5*time.Second }
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		for i := range 3 {
			m := offsets(i)
			ok = ok && len(m) == 3 && near(m["mx0"].ClockOffset, 0) && near(m["mx1"].ClockOffset, -time.Hour) && near(m["mx2"].ClockOffset, 2*time.Hour)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offsets not seen in 20s: %+v", offsets(0))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range 3 {
		for _, s := range offsets(i) {
			if s.Silent {
				t.Errorf("mx%d's view: %s taken for silent (offset %s)", i, s.Node, s.ClockOffset)
			}
		}
	}
	// Once the status with the skew was read by the maintenance loop.
	for _, i := range []int{1, 2} {
		if err := f.members[i].node.Expire(ctx, f.clock.Now()); !errors.Is(err, ErrClockOffset) {
			t.Errorf("mx%d's expiry decision: %v, want ErrClockOffset", i, err)
		}
	}
	if w := f.members[2].node.ClockWarning(); !strings.Contains(w, "2h0m0s ahead of the median") {
		t.Errorf("mx2's clock warning: %q", w)
	}
	if w := f.members[0].node.ClockWarning(); w != "" {
		t.Errorf("mx0's clock warning: %q", w)
	}
	// Their reports are dated by the others' clocks: mx2's an hour and
	// mx1's two hours would be off otherwise.
	for _, i := range []int{1, 2} {
		out := f.report(i, copyOf(t, i, 40+uint64(i)), store.KindSpam, "dana")
		f.requireEqualHashes("a report from a clock off")
		c, err := f.members[0].st.Get(ctx, out.Campaign)
		if err != nil {
			t.Fatal(err)
		}
		if !near(c.FirstSeen.Sub(f.clock.Now()), 0) {
			t.Errorf("mx%d's report: first seen %s, want about %s", i, c.FirstSeen, f.clock.Now())
		}
	}
	// So are the hits mx2 counts: at its clock's time, filed in the
	// others' hour on every node.
	hitCamp := f.report(0, copyOf(t, 0, 60), store.KindSpam, "fred").Campaign
	at := f.clock.Now().Add(30 * time.Minute) // the middle of an hour, by the others' clocks
	f.members[2].node.RecordHit(hitCamp, "reject", at.Add(2*time.Hour))
	deadline = time.Now().Add(20 * time.Second)
	for {
		hs, err := f.members[0].st.Hours(ctx, hitCamp, f.clock.Now().Add(-24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		var msgs int64
		var hour time.Time
		for _, h := range hs {
			if h.Messages > 0 {
				msgs, hour = msgs+h.Messages, h.Hour
			}
		}
		if msgs == 1 {
			if want := at.Truncate(time.Hour); !hour.Equal(want) {
				t.Errorf("mx2's hit filed in the hour of %s, want %s", hour, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mx2's hit not counted on mx0 in 20s: %+v", hs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Its statuses dated an hour back, mx1 still publishes them: alive.
	if err := f.members[0].node.Forget(ctx, "mx1"); !errors.Is(err, ErrNodeAlive) {
		t.Errorf("forget mx1, whose clock is behind: %v, want ErrNodeAlive", err)
	}
	if err := f.members[0].node.Expire(ctx, f.clock.Now().Add(-time.Hour)); err != nil {
		t.Errorf("mx0's expiry decision: %v", err)
	}
	f.members[2].node.testSkew.Store(0)
	deadline = time.Now().Add(20 * time.Second)
	for f.members[2].node.Expire(ctx, f.clock.Now().Add(-time.Hour)) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("mx2's clock fixed: %v", f.members[2].node.Expire(ctx, f.clock.Now().Add(-time.Hour)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.requireEqualHashes("expiry decisions")
}

// TestSlowStatusNoClockOffset: a node whose statuses take long to build
// (the stream's queries wait while it has no leader) is not taken for a
// node whose clock is behind: its status is dated when it is put.
func TestSlowStatusNoClockOffset(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	f.members[1].node.testSlowStatus.Store(int64(time.Second))
	var last time.Time
	deadline := time.Now().Add(30 * time.Second)
	for slow := 0; slow < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("mx1 published %d slow statuses in 30s", slow)
		}
		st, err := f.members[0].node.Peers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.Node != "mx1" || !s.Time.After(last) {
				continue
			}
			if !last.IsZero() {
				slow++ // a status built after the delay began
			}
			last = s.Time
			if slow > 0 && s.ClockOffset.Abs() > 300*time.Millisecond {
				t.Fatalf("mx1's clock offset %s: a slow status read as a clock off", s.ClockOffset)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSettingsWarned: a node that signs with another lexicon is named by
// every node (SettingsWarning, for /readyz and the log) and in the
// statuses, until its settings agree again.
func TestSettingsWarned(t *testing.T) {
	f := newTestFleet(t)
	for i, lex := range []string{"aa", "aa", "bb"} {
		f.members[i].node.SetSettings(map[string]string{"lexicon": lex})
	}
	want := "settings differ between nodes: lexicon: aa (mx0, mx1), bb (mx2)"
	waitWarning := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; i < 3; {
			if f.members[i].node.SettingsWarning() == want {
				i++
				continue
			}
			if time.Now().After(deadline) {
				t.Fatalf("mx%d's warning: %q, want %q", i, f.members[i].node.SettingsWarning(), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitWarning(want)
	f.members[2].node.SetSettings(map[string]string{"lexicon": "aa"})
	waitWarning("")
}

// TestDivergence: a node whose store was changed behind the fleet's back
// (a campaign deleted in its store alone) holds another state after the
// same events. After the next event, it names itself the odd one out
// (DivergenceWarning), the others do not warn, and Compare names the
// divergence; rebuilt from an empty store, it agrees again.
func TestDivergence(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	a := f.report(0, copyOf(t, 0, 1), store.KindSpam, "alice")
	f.requireEqualHashes("first report")
	if err := f.members[2].st.Delete(ctx, a.Campaign); err != nil {
		t.Fatal(err)
	}
	f.report(1, copyOf(t, 1, 2), store.KindSpam, "bob")
	waitFor(t, "mx2 names itself the odd one out", func() bool {
		return strings.Contains(f.members[2].node.DivergenceWarning(), ": mx2 differs from mx0, mx1: ")
	})
	if !f.members[2].node.Diverged() {
		t.Error("mx2: Diverged false")
	}
	for _, i := range []int{0, 1} {
		if w := f.members[i].node.DivergenceWarning(); w != "" {
			t.Errorf("mx%d warns: %q", i, w)
		}
	}
	nodes, err := f.members[0].node.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := Compare(nodes); len(c.Diverged) != 1 || !slices.Equal(c.Diverged[0].OddOut(), []string{"mx2"}) {
		t.Errorf("Compare from mx0: %+v", c)
	}

	// Rebuilt from an empty store, it catches up and agrees.
	f.members[2].stop()
	f.members[2] = f.startMember(2, t.TempDir())
	f.report(0, copyOf(t, 2, 3), store.KindSpam, "carol")
	f.requireEqualHashes("after the rebuild")
	waitFor(t, "no node warns", func() bool {
		for _, m := range f.members {
			if m.node.Diverged() {
				return false
			}
		}
		return true
	})
}

// TestNameClash: a second process started with mx0's name (a copied
// configuration) is named by both processes (NameWarning, the status's
// NameClash) until it stops; the events of both still reach every node.
func TestNameClash(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(dir, storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	lex, mod := resources(t)
	eng, err := campaign.New(st, lex, mod, campaign.Options{Clock: f.clock.Now, CacheTTL: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := nodeOptions(f.cluster, 1, f.clock) // mx1's server,
	opts.Node = "mx0"                          // mx0's name and key
	opts.Signer = nodeOptions(f.cluster, 0, f.clock).Signer
	twin, err := Start(ctx, eng, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	wire(eng, twin)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			twin.Close()
			st.Close()
		}
	}
	defer stop()
	orig := f.members[0].node
	waitFor(t, "both processes named mx0 see the clash", func() bool {
		_, _ = orig.Peers(ctx)
		_, _ = twin.Peers(ctx)
		return strings.Contains(orig.NameWarning(), "another process publishes its status as node mx0") && twin.NameWarning() != ""
	})
	if !orig.Status(ctx, false).NameClash {
		t.Error("mx0's status does not say NameClash")
	}
	if w := f.members[1].node.NameWarning(); w != "" {
		t.Errorf("mx1 warns of a clash: %q", w)
	}
	// A report through the twin reaches every node.
	out, err := twin.engine().Ingester.Report(ctx, copyOf(t, 2, 50), store.KindSpam, "erin")
	if err != nil || out.Campaign == 0 {
		t.Fatalf("report through the twin: %+v %v", out, err)
	}
	f.requireEqualHashes("a report from the twin")
	stop()
	waitFor(t, "the clash forgotten once the twin stopped", func() bool { _, _ = orig.Peers(ctx); return orig.NameWarning() == "" })
}

// TestStreamSettingsChanged: a node configured with other replicas sets
// the stream's to its own when it starts, and says so in its log.
func TestStreamSettingsChanged(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	st, err := store.Open(t.TempDir(), storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lex, mod := resources(t)
	eng, err := campaign.New(st, lex, mod, campaign.Options{Clock: f.clock.Now, CacheTTL: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.LockedBuffer
	opts := nodeOptions(f.cluster, 2, f.clock)
	keys, _ := testKeys(t)
	opts.Node, opts.Signer, opts.Replicas = "mx4", keys[4], 1
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	odd, err := Start(ctx, eng, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	wire(eng, odd)
	defer odd.Close()
	deadline := time.Now().Add(20 * time.Second)
	for !odd.isReady() {
		if time.Now().After(deadline) {
			t.Fatal("mx4 not ready in 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "this node changes the stream's settings to its own") || !strings.Contains(logs.String(), "to_replicas=1") {
		t.Errorf("no warning of the change in mx4's log:\n%s", logs.String())
	}
	info, ok := f.members[0].node.streamState(ctx)
	if !ok || info.Config.Replicas != 1 {
		t.Errorf("stream replicas after mx4 started: %+v", info)
	}
}
