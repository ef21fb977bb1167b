package fleet

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// testKeyCount is how many node keys the tests make (mx0 … mx4).
const testKeyCount = 5

var (
	testKeysOnce sync.Once
	testKeyPairs []nkeys.KeyPair
	testNodeList []NodeKey
)

// testKeys are the nkeys of the test nodes mx0 … mx4 and the fleet's list
// of them (every one stores snapshots).
func testKeys(t testing.TB) ([]nkeys.KeyPair, []NodeKey) {
	t.Helper()
	testKeysOnce.Do(func() {
		for i := range testKeyCount {
			kp, err := nkeys.CreateUser()
			if err != nil {
				panic(err)
			}
			pub, _ := kp.PublicKey()
			testKeyPairs = append(testKeyPairs, kp)
			testNodeList = append(testNodeList, NodeKey{Name: fmt.Sprintf("mx%d", i), Key: pub, Snapshots: true})
		}
	})
	return testKeyPairs, testNodeList
}

// rawPublisher publishes messages to a test fleet's stream as any client
// of the NATS servers could.
type rawPublisher struct {
	t       *testing.T
	js      jetstream.JetStream
	subject string
}

func newRawPublisher(t *testing.T, url string) *rawPublisher {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &rawPublisher{t: t, js: js, subject: Options{}.withDefaults().subject()}
}

// publish publishes data with header h (nil: none) and returns its
// stream sequence.
func (p *rawPublisher) publish(h nats.Header, data []byte) uint64 {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := p.js.PublishMsg(ctx, &nats.Msg{Subject: p.subject, Header: h, Data: data})
	if err != nil {
		p.t.Fatal(err)
	}
	return ack.Sequence
}

// signedAs signs data as node with key kp (which may not be node's).
func signedAs(t testing.TB, node string, kp nkeys.KeyPair, subject, id string, data []byte) nats.Header {
	t.Helper()
	s, err := newSigner(node, kp)
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.header(subject, id, data)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestForgedEvents: a client of the NATS servers, or a node publishing in
// another's name, cannot change any node's state: unsigned events, events
// signed by a key that is not the fleet's, by another node's key, with a
// signature that does not match, and unreadable events are skipped on
// every node alike, counted by reason, and the stream goes on.
func TestForgedEvents(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	a := f.report(0, copyOf(t, 0, 1), store.KindSpam, "alice")
	f.converge()
	keys, _ := testKeys(t)
	stranger, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	p := newRawPublisher(t, f.cluster.url(1))
	subj := p.subject
	encode := func(e *event) []byte { return mustEncode(t, e) }
	now := f.clock.Now()
	allow := func(node string) *event {
		return &event{ID: newEventID(node), V: jsonVersion, Type: evState, Node: node, Time: now, Campaign: a.Campaign, State: store.StateAllowed}
	}
	expire := &event{ID: newEventID("mx0"), V: jsonVersion, Type: evExpire, Node: "mx0", Time: now, Cutoff: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	newer := []byte(`{"v":99}`)

	type forged struct {
		name, reason string
		h            nats.Header
		data         []byte
	}
	var cases []forged
	add := func(name, reason string, h nats.Header, data []byte) {
		cases = append(cases, forged{name, reason, h, data})
	}
	ev := allow("mx0")
	add("unsigned state", RejectUnsigned, nil, encode(ev))
	add("unsigned expire in 2100", RejectUnsigned, nil, encode(expire))
	add("unsigned newer version", RejectUnsigned, nil, newer)
	add("unsigned garbage", RejectUnsigned, nil, []byte("hello"))
	ev = allow("mx0")
	add("a stranger's key", RejectUnknownKey, signedAs(t, "mx0", stranger, subj, ev.ID, encode(ev)), encode(ev))
	ev = allow("mx0")
	add("mx1's key naming mx0 in the header", RejectWrongNode, signedAs(t, "mx0", keys[1], subj, ev.ID, encode(ev)), encode(ev))
	ev = allow("mx0")
	add("mx1's key, mx0 in the event", RejectWrongNode, signedAs(t, "mx1", keys[1], subj, ev.ID, encode(ev)), encode(ev))
	ev = allow("mx0")
	h := signedAs(t, "mx0", keys[0], subj, ev.ID, encode(ev))
	ev.Campaign++ // the payload changed after signing
	add("payload changed", RejectBadSignature, h, encode(ev))
	ev = allow("mx0")
	h = signedAs(t, "mx0", keys[0], subj, ev.ID, encode(ev))
	h.Set(hdrSig, base64.RawURLEncoding.EncodeToString([]byte("not a signature")))
	add("signature garbled", RejectBadSignature, h, encode(ev))
	ev = allow("mx0")
	h = signedAs(t, "mx0", keys[0], "OTHER.events", ev.ID, encode(ev))
	add("signed for another subject", RejectBadSignature, h, encode(ev))
	add("a node's key signs garbage", RejectMalformed, signedAs(t, "mx2", keys[2], subj, "x", []byte("hello")), []byte("hello"))

	want := map[string]uint64{}
	var last uint64
	for _, c := range cases {
		h := c.h
		if h != nil && h.Get(nats.MsgIdHdr) == "" {
			h.Set(nats.MsgIdHdr, "x")
		}
		last = p.publish(h, c.data)
		want[c.reason]++
	}
	// The stream goes on after them: a real report applies everywhere.
	b := f.report(2, copyOf(t, 1, 2), store.KindSpam, "bob")
	if b.Campaign == 0 || b.Replication != "replicated" {
		t.Fatalf("report after the forged events: %+v", b)
	}
	f.requireEqualHashes("forged events")
	for i, m := range f.members {
		s := m.node.Status(ctx, false)
		if s.Applied <= last || s.Error != "" {
			t.Fatalf("mx%d stopped at the forged events: %+v", i, s)
		}
		for r, n := range want {
			if s.Rejected[r] != n {
				t.Errorf("mx%d rejected %v, want %v", i, s.Rejected, want)
				break
			}
		}
		c, err := m.st.Get(ctx, a.Campaign)
		if err != nil || c.State != store.StateActive {
			t.Errorf("mx%d: campaign %d after forged events: %+v %v", i, a.Campaign, c, err)
		}
	}
}

// TestStartNeedsSigner: a node without a signing key, or whose key the
// fleet's list does not give for its name, does not start.
func TestStartNeedsSigner(t *testing.T) {
	keys, nodes := testKeys(t)
	st, err := store.Open("", store.Options{InMemory: true, Expiry: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"no signer", Options{Node: "mx0", Nodes: nodes}},
		{"not listed", Options{Node: "mx0", Signer: keys[0]}},
		{"another node's key", Options{Node: "mx0", Signer: keys[1], Nodes: nodes}},
		{"a public key", Options{Node: "mx0", Signer: publicOnly(t, keys[0]), Nodes: nodes}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Start(context.Background(), nil, st, tc.o); err == nil {
				t.Fatal("started")
			}
		})
	}
}

func publicOnly(t *testing.T, kp nkeys.KeyPair) nkeys.KeyPair {
	pub, _ := kp.PublicKey()
	p, err := nkeys.FromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSnapshotSigned: a new node restores a snapshot only when a node of
// fleet.nodes that stores snapshots signed it: not one stored by another
// client, nor one whose content changed under a valid signature, nor one
// signed by a node without snapshots: true.
func TestSnapshotSigned(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	f.report(0, copyOf(t, 0, 1), store.KindSpam, "alice")
	f.converge()
	if _, _, err := f.members[0].node.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	opts := nodeOptions(f.cluster, 2, f.clock)
	if ok, err := Bootstrap(ctx, t.TempDir(), storeOptions(), opts); err != nil || !ok {
		t.Fatalf("bootstrap from a signed snapshot: %v %v", ok, err)
	}
	// Signed by a node that does not store snapshots (in this list).
	notSnap := slices.Clone(opts.Nodes)
	notSnap[0].Snapshots = false
	o := opts
	o.Nodes = notSnap
	if _, err := Bootstrap(ctx, t.TempDir(), storeOptions(), o); !errors.Is(err, ErrSnapshotUntrusted) {
		t.Errorf("bootstrap from a snapshot of a node without snapshots: %v", err)
	}

	js := newRawPublisher(t, f.cluster.url(1)).js
	obs, err := js.ObjectStore(ctx, opts.withDefaults().snapshotBucket())
	if err != nil {
		t.Fatal(err)
	}
	info, err := obs.GetInfo(ctx, snapshotName)
	if err != nil {
		t.Fatal(err)
	}
	good, err := obs.GetBytes(ctx, snapshotName)
	if err != nil {
		t.Fatal(err)
	}
	// Another content under the signed metadata.
	other := append(slices.Clone(good), 0)
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: snapshotName, Metadata: info.Metadata}, bytes.NewReader(other)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if ok, err := Bootstrap(ctx, dir, storeOptions(), opts); !errors.Is(err, ErrSnapshotUntrusted) || ok {
		t.Errorf("bootstrap from a changed snapshot: %v %v", ok, err)
	}
	// Unsigned.
	if _, err := obs.PutBytes(ctx, snapshotName, good); err != nil {
		t.Fatal(err)
	}
	if ok, err := Bootstrap(ctx, t.TempDir(), storeOptions(), opts); !errors.Is(err, ErrSnapshotUntrusted) || ok {
		t.Errorf("bootstrap from an unsigned snapshot: %v %v", ok, err)
	}
}

// TestUnreadStatus: a node whose status cannot be read is listed, with
// why, instead of being left out; the fleet is then not called converged.
func TestUnreadStatus(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	f.report(0, copyOf(t, 0, 1), store.KindSpam, "alice")
	f.converge()
	n := f.members[0].node
	kv, err := n.js.KeyValue(ctx, n.opts.nodesBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "mx9", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	nodes, err := n.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(nodes, func(s Status) bool { return s.Node == "mx9" })
	if i < 0 || nodes[i].Unread == "" {
		t.Fatalf("the unreadable status is not listed: %+v", nodes)
	}
	if c := Compare(nodes); c.Converged || !strings.Contains(c.Summary(), "the status of mx9 could not be read") {
		t.Errorf("comparison: %+v %q", c, c.Summary())
	}
}

// TestQueuedReportProtects: reports queued while NATS is down protect
// the host that took them at once (a provisional verdict), without
// touching its store (its state hash is unchanged); once the stream
// orders them they are campaigns like any other, on every node.
func TestQueuedReportProtects(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	f.report(0, copyOf(t, 0, 1), store.KindSpam, "alice")
	f.converge()
	m := f.members[1]
	before, err := m.st.StateHash(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.cluster.shutdown()
	for i, who := range []string{"quinn", "rita"} {
		if o := f.report(1, copyOf(t, 2, uint64(5+i)), store.KindSpam, who); o.Replication != campaign.Queued {
			t.Fatalf("report with NATS down: %+v", o)
		}
	}
	v := f.check(1, base(2))
	if !v.Provisional || v.Action == action.Accept || v.Campaign != 0 {
		t.Fatalf("check on the host that queued the reports: %+v", v)
	}
	if v := f.check(0, base(2)); v.Provisional || v.Campaign != 0 {
		t.Fatalf("check on another host: %+v", v)
	}
	if h, err := m.st.StateHash(ctx); err != nil || h != before {
		t.Fatalf("state hash changed by provisional reports: %s → %s %v", before, h, err)
	}
	for i := range 3 {
		f.cluster.start(i)
	}
	f.requireEqualHashes("NATS back")
	for i := range 3 {
		if v := f.check(i, base(2)); v.Provisional || v.Campaign == 0 || v.Action == action.Accept {
			t.Fatalf("mx%d after the queued reports were applied: %+v", i, v)
		}
	}
	if n := m.node.prov.len(); n != 0 {
		t.Errorf("%d events still provisional once applied", n)
	}
}
