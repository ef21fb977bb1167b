package fleet

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

func sampleEvent(v int) *event {
	return &event{ID: "mx0-01", V: v, Type: evReport, Node: "mx0", Time: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC),
		Reports: []eventReport{
			{Evidence: []byte{1, 2, 3, 0xff}, Kind: store.KindSpam, Reporter: "alice"},
			{Kind: store.KindHam, Reporter: "bob"}, // no evidence: skipped on every node
			{Evidence: bytes.Repeat([]byte{7}, 300), Kind: store.KindSpam},
		}}
}

// TestEventVersionsDecodeAlike: a report event decodes to the same event
// from JSON (version 2) and from its binary envelope (version 3), and
// the envelope is smaller.
func TestEventVersionsDecodeAlike(t *testing.T) {
	j, b := mustEncode(t, sampleEvent(jsonVersion)), mustEncode(t, sampleEvent(3))
	if j[0] != '{' || b[0] != 3 {
		t.Fatalf("first bytes %q and %d", j[0], b[0])
	}
	if len(b) >= len(j) {
		t.Errorf("envelope %d bytes, JSON %d", len(b), len(j))
	}
	fromJSON, err := decodeEvent(j)
	if err != nil {
		t.Fatal(err)
	}
	fromBinary, err := decodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON.V = 3
	if !reflect.DeepEqual(fromJSON, fromBinary) {
		t.Fatalf("JSON %+v\nbinary %+v", fromJSON, fromBinary)
	}
	if fromBinary.Reports[1].Evidence != nil {
		t.Error("no evidence decodes to nil, as from JSON")
	}
}

// TestEventEnvelopeGolden pins the version 3 envelope: every node of a
// fleet must read what the others publish.
func TestEventEnvelopeGolden(t *testing.T) {
	e := &event{ID: "g", V: 3, Type: evReport, Node: "mx1", Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Reports: []eventReport{{Evidence: []byte("EV"), Kind: store.KindSpam, Reporter: "u"}}}
	const want = "03" + "59" + // version, header length 89
		"7b226964223a2267222c2276223a332c2274223a227265706f7274222c226e223a226d7831222c226174223a22323032362d30312d30325430333a30343a30355a222c2272223a5b7b226b223a312c2275223a2275227d5d7d" +
		"02" + "4556" // evidence length and bytes
	got := hex.EncodeToString(mustEncode(t, e))
	if got != want {
		t.Fatalf("envelope changed:\n got %s\nwant %s", got, want)
	}
	d, err := hex.DecodeString(want)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeEvent(d)
	if err != nil || !reflect.DeepEqual(back, e) {
		t.Fatalf("decoded %+v, %v", back, err)
	}
}

func TestDecodeEnvelope(t *testing.T) {
	good := mustEncode(t, sampleEvent(3))
	hdr := mustEncode(t, &event{ID: "x", V: 2, Type: evReport})[1:] // a version 2 event's JSON, less its '{'
	tests := []struct {
		name    string
		data    []byte
		wantV   int   // a newer version: decoded to that alone
		wantErr error // else a malformed envelope
	}{
		{"newer version", newerEnvelope(eventVersion+1, 0xff, 0xff), eventVersion + 1, nil},
		{"newest possible", newerEnvelope(maxBinaryVersion), maxBinaryVersion, nil},
		{"newer version byte without its head", []byte{eventVersion + 1, 0xff, 0xff}, 0, errMalformed},
		{"a word", []byte("hello"), 0, errMalformed},
		{"newer head naming another version", append(newerEnvelope(eventVersion + 2)[:0:0], append([]byte{eventVersion + 1}, newerEnvelope(eventVersion + 2)[1:]...)...), 0, errMalformed},
		{"version 2 has no envelope", append([]byte{2}, good[1:]...), 0, errMalformed},
		{"no header length", []byte{3}, 0, errMalformed},
		{"header past the end", []byte{3, 0x7f, '{', '}'}, 0, errMalformed},
		{"huge length", append([]byte{3}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), 0, errMalformed},
		{"truncated evidence", good[:len(good)-1], 0, errMalformed},
		{"evidence missing", good[:len(good)-301], 0, errMalformed},
		{"bytes after the last report", append(bytes.Clone(good), 0), 0, errMalformed},
		{"header of another version", append([]byte{3, byte(len(hdr) + 1), '{'}, hdr...), 0, errMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := decodeEvent(tt.data)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %+v, %v; want %v", e, err, tt.wantErr)
				}
				return
			}
			if err != nil || e.V != tt.wantV {
				t.Fatalf("got %+v, %v; want version %d", e, err, tt.wantV)
			}
		})
	}
	if _, err := (&event{V: maxBinaryVersion + 1}).encode(); err == nil {
		t.Error("a version beyond the envelope's byte encoded")
	}
}

// newerEnvelope is the head of an envelope of version v (what any later
// version keeps), followed by rest.
func newerEnvelope(v int, rest ...byte) []byte {
	head := fmt.Sprintf(`{"v":%d,"t":"future"}`, v)
	b := append([]byte{byte(v), byte(len(head))}, head...)
	return append(b, rest...)
}

// TestReportVersionGate: report events are published as version 3 once
// every live node's status says it applies version 3, and as version 2
// while a live node does not say so (a build before version 3, during an
// upgrade); the nodes converge either way.
func TestReportVersionGate(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	n := f.members[0].node
	waitVersion := func(want int64, meanwhile func()) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for n.reportV.Load() != want {
			if time.Now().After(deadline) {
				t.Fatalf("report events still of version %d, want %d", n.reportV.Load(), want)
			}
			if meanwhile != nil {
				meanwhile()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// lastReport is the first byte of the stream's last report event.
	lastReport := func() byte {
		t.Helper()
		st, err := n.js.Stream(ctx, n.opts.Stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.LastSeq; seq > 0; seq-- {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				t.Fatal(err)
			}
			if e, err := decodeEvent(m.Data); err == nil && e.Type == evReport {
				return m.Data[0]
			}
		}
		t.Fatal("no report event in the stream")
		return 0
	}

	waitVersion(eventVersion, nil)
	f.report(0, copyOf(t, 0, 1), store.KindSpam, "alice")
	if b := lastReport(); b != eventVersion {
		t.Errorf("a report of a fleet of one build: first byte %q, want version %d", b, eventVersion)
	}

	// A live node of an older build: its status has no events field.
	kv, err := n.js.KeyValue(ctx, n.opts.nodesBucket())
	if err != nil {
		t.Fatal(err)
	}
	putOld := func() {
		if _, err := kv.Put(ctx, "old", []byte(fmt.Sprintf(`{"node":"old","connected":true,"ready":true,"time":%q}`,
			time.Now().UTC().Format(time.RFC3339Nano)))); err != nil {
			t.Fatal(err)
		}
	}
	putOld()
	waitVersion(jsonVersion, putOld)
	f.report(0, copyOf(t, 1, 2), store.KindSpam, "bob")
	if b := lastReport(); b != '{' {
		t.Errorf("a report while an older build is live: first byte %q, want JSON", b)
	}
	f.requireEqualHashes("version 3 and version 2 report events")

	// Once the old node is silent (stopped, upgraded under another
	// name), version 3 again.
	if err := kv.Purge(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	waitVersion(eventVersion, nil)
}

// BenchmarkDecodeEvent decodes a report event of 200 reports of 2,500
// bytes of evidence (about a full event of the throughput bench) as
// JSON (version 2) and in its binary envelope (version 3).
func BenchmarkDecodeEvent(b *testing.B) {
	for _, v := range []int{jsonVersion, 3} {
		e := &event{ID: "mx0-01", V: v, Type: evReport, Node: "mx0", Time: time.Now().UTC()}
		for i := range 200 {
			e.Reports = append(e.Reports, eventReport{Evidence: bytes.Repeat([]byte{byte(i)}, 2500), Kind: store.KindSpam, Reporter: "user"})
		}
		data := mustEncode(b, e)
		b.Run(fmt.Sprintf("v%d", v), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := decodeEvent(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestReporterIDsHashed: the stream carries reporters as the hash the
// store keeps (version 4), never their ids, and a reporter named by id in
// an older node's event and by hash in a newer one's is one reporter.
func TestReporterIDsHashed(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	n := f.members[0].node
	deadline := time.Now().Add(20 * time.Second)
	for n.ReportVersion() != eventVersion {
		if time.Now().After(deadline) {
			t.Fatalf("report events of version %d", n.ReportVersion())
		}
		time.Sleep(50 * time.Millisecond)
	}
	const who = "alice@example.org"
	a := f.report(0, copyOf(t, 0, 1), store.KindSpam, who)
	f.converge()
	st, err := n.js.Stream(ctx, n.opts.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(m.Data, []byte(who)) || bytes.Contains(m.Data, []byte("alice")) {
			t.Fatalf("event %d carries the reporter's id: %q", seq, m.Data)
		}
	}
	// The same reporter by id (an event of version 3, a node not yet
	// upgraded) joins as the same reporter on every node.
	old := &event{ID: newEventID("mx1"), V: 3, Type: evReport, Node: "mx0", Time: f.clock.Now()}
	evs, err := n.engine().Ingester.Evidence(ctx, []campaign.ReportRequest{{Raw: copyOf(t, 0, 2), Kind: store.KindSpam}})
	if err != nil {
		t.Fatal(err)
	}
	old.Reports = []eventReport{{Evidence: evs[0], Kind: store.KindSpam, Reporter: who}}
	if _, err := n.publish(ctx, old.ID, mustEncode(t, old)); err != nil {
		t.Fatal(err)
	}
	f.requireEqualHashes("a reporter by id and by hash")
	for i, m := range f.members {
		rs, err := m.st.Reporters(ctx, a.Campaign, 0)
		if err != nil || len(rs) != 1 || rs[0].Hash != store.ReporterHash(who) {
			t.Fatalf("mx%d: reporters of campaign %d: %+v %v", i, a.Campaign, rs, err)
		}
	}
}
