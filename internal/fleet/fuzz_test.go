package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// offlineNode is a node with no NATS connection: enough to apply events
// to its store, as consume does.
func offlineNode(t testing.TB, now func() time.Time) *Node {
	t.Helper()
	st, err := store.Open("", store.Options{InMemory: true, Expiry: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lex, mod := resources(t)
	eng, err := campaign.New(st, lex, mod, campaign.Options{Clock: now, CacheTTL: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, nodes := testKeys(t)
	tr, err := newTrust(nodes, UnsignedWindow{})
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{
		trust:     tr,
		rejected:  make(map[string]uint64),
		opts:      Options{}.withDefaults(),
		st:        st,
		log:       slog.New(slog.DiscardHandler),
		waiters:   make(map[string]chan applyResult),
		appliedCh: make(chan struct{}),
		hits:      make(map[hitKey]*hitAgg),
	}
	n.eng.Store(eng)
	return n
}

// signedMsg is data at seq as the stream delivers it, signed by node
// (mx0 … mx4) with its test key.
func signedMsg(t testing.TB, seq uint64, node int, data []byte) incoming {
	t.Helper()
	keys, _ := testKeys(t)
	subject := Options{}.withDefaults().subject()
	id := fmt.Sprint("msg-", seq)
	return incoming{seq: seq, subject: subject, header: signedAs(t, fmt.Sprint("mx", node), keys[node], subject, id, data),
		stored: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), data: data}
}

func mustEncode(t testing.TB, e *event) []byte {
	t.Helper()
	b, err := e.encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzApplyEvent applies an arbitrary event between two valid ones on two
// nodes: a malformed, hostile or unknown event never panics, is applied
// or skipped the same way on both (equal state hashes), and the stream
// goes on after it unless it is of a newer version, which stops both.
func FuzzApplyEvent(f *testing.F) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	first := &event{ID: "a", Type: evReport, Node: "mx0", Time: at,
		Reports: []eventReport{{Raw: base(0), Kind: store.KindSpam, Reporter: "alice"}}}
	last := &event{ID: "z", Type: evReport, Node: "mx1", Time: at.Add(time.Minute),
		Reports: []eventReport{{Raw: base(1), Kind: store.KindSpam, Reporter: "bob"}}}
	for _, e := range []*event{
		{ID: "s", Type: evState, Campaign: 1, State: store.StateAllowed, Time: at},
		{ID: "s", Type: evState, Campaign: 1, State: 200, Time: at},
		{ID: "d", Type: evDelete, Campaign: 1, Time: at},
		{ID: "d", Type: evDelete, Campaign: 1 << 62, Time: at},
		{ID: "x", Type: evExpire, Cutoff: at.Add(time.Hour), Time: at},
		{ID: "x", Type: evExpire, Time: at},
		{ID: "h", Type: evHits, Time: at, Hits: []store.HitDelta{{Campaign: 1, Action: "reject", Hour: at, Last: at, N: 3}}},
		{ID: "h", Type: evHits, Time: at, Hits: []store.HitDelta{{Campaign: 1, Action: "tag", Hour: at, Last: at, N: -1 << 62}, {Campaign: 0, N: 1 << 62}}},
		{ID: "r", Type: evReport, Time: at, Reports: []eventReport{{Raw: copyOf(f, 0, 3), Kind: store.KindHam, Reporter: "carol"}}},
		{ID: "r", Type: evReport, Time: at, Reports: []eventReport{{Evidence: []byte("not evidence"), Kind: store.KindSpam}, {Kind: 9}, {}}},
		{ID: "v", V: eventVersion + 1, Type: evReport, Time: at},
		{ID: "u", Type: "unknown", Time: at},
	} {
		e.Node = "mx1" // the fuzzed event is signed as mx1's
		f.Add(mustEncode(f, e))
	}
	// Version 3 envelopes of real evidence, whole and cut short.
	evs, err := offlineNode(f, time.Now).engine().Ingester.Evidence(context.Background(),
		[]campaign.ReportRequest{{Raw: copyOf(f, 2, 4), Kind: store.KindSpam}, {Raw: base(0), Kind: store.KindHam}})
	if err != nil {
		f.Fatal(err)
	}
	env := mustEncode(f, &event{ID: "b", V: 3, Type: evReport, Node: "mx1", Time: at, Reports: []eventReport{
		{Evidence: evs[0], Kind: store.KindSpam, Reporter: "dave"}, {Evidence: evs[1], Kind: store.KindHam, Reporter: "erin"}}})
	f.Add(env)
	f.Add(env[:len(env)/2])
	f.Add(env[:len(env)-1])
	for _, s := range []string{"", "{", "null", "[]", `{"n":"mx1","t":"report","r":[{"e":"AAAA","k":1}]}`, `{"n":"mx1","t":"hits","h":[{"c":1,"n":1}],"at":"0001-01-01T00:00:00Z"}`, `{"n":"mx1","v":-5,"t":"state","c":1,"s":1}`, `{"v":99}`, "hello"} {
		f.Add([]byte(s))
	}
	firstData, lastData := mustEncode(f, first), mustEncode(f, last)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		now := func() time.Time { return at }
		var hashes [2]string
		var stopped [2]bool
		for i := range hashes {
			n := offlineNode(t, now)
			for seq, d := range [][]byte{firstData, data, lastData} {
				err := n.applyMsg(signedMsg(t, uint64(seq+1), seq%2, d))
				if errors.Is(err, ErrNewerEvent) && seq == 1 {
					stopped[i] = true
					break
				}
				if err != nil {
					t.Fatalf("node %d: event %d: %v", i, seq+1, err)
				}
			}
			want := uint64(3)
			if stopped[i] {
				want = 1
			}
			if n.applied != want {
				t.Fatalf("node %d applied up to %d, want %d", i, n.applied, want)
			}
			h, err := n.st.StateHash(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			hashes[i] = h
		}
		if hashes[0] != hashes[1] || stopped[0] != stopped[1] {
			t.Fatalf("two nodes applying the same events differ: %v %v", hashes, stopped)
		}
	})
}
