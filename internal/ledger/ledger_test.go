package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func open(t *testing.T, dir string, o Options) *Ledger {
	t.Helper()
	if dir == "" {
		o.InMemory = true
	}
	o.FlushInterval = time.Hour // tests flush themselves
	o.EvictInterval = time.Hour
	l, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func delivery(i int, at time.Time) Delivery {
	return Delivery{Time: at, QueueID: fmt.Sprintf("Q%d", i), MessageID: fmt.Sprintf("m%d@example.org", i),
		Rcpts: []string{fmt.Sprintf("u%d@example.org", i)}, RcptCount: 1, Evidence: []byte(fmt.Sprintf("evidence-%d", i))}
}

func all(t *testing.T, l *Ledger) []Entry {
	t.Helper()
	var out []Entry
	err := l.Scan(context.Background(), Key{}, func(e Entry) (bool, error) {
		e.Evidence = append([]byte(nil), e.Evidence...)
		out = append(out, e)
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRecordPersistsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	t0 := time.Now()
	for i := range 10 {
		l.Record(delivery(i, t0.Add(time.Duration(i)*time.Second)))
	}
	// Close writes what is queued: nothing is lost on a graceful restart.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, Options{})
	got := all(t, l)
	if len(got) != 10 {
		t.Fatalf("%d entries after a restart, want 10", len(got))
	}
	for i, e := range got {
		want := delivery(i, t0.Add(time.Duration(i)*time.Second))
		if e.MessageID != want.MessageID || e.QueueID != want.QueueID || string(e.Evidence) != string(want.Evidence) ||
			e.Rcpts[0] != want.Rcpts[0] || !e.Time.Equal(want.Time) || e.Unpurgeable != "" {
			t.Errorf("entry %d = %+v, want %+v", i, e, want)
		}
	}
	if s := l.Stats(); s.Entries != 10 || s.Bytes <= 0 {
		t.Errorf("stats after a restart %+v", s)
	}
}

func TestEvictWindowAndBytes(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	l := open(t, "", Options{Window: time.Hour, MaxBytes: 1 << 30, Clock: c.now})
	for i := range 20 {
		l.Record(delivery(i, c.now().Add(time.Duration(i)*time.Minute)))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	c.add(time.Hour + 5*time.Minute + 30*time.Second) // entries 0..5 are out of the window
	n, err := l.Evict()
	if err != nil || n != 6 {
		t.Fatalf("Evict = %d, %v; want 6", n, err)
	}
	got := all(t, l)
	if len(got) != 14 || got[0].QueueID != "Q6" {
		t.Fatalf("after the window: %d entries, first %s", len(got), got[0].QueueID)
	}
	if keys, _ := l.SameMessageID("m0@example.org"); len(keys) != 0 {
		t.Errorf("the index of an evicted entry is left: %v", keys)
	}
	// The byte bound: the oldest go first until the rest fit.
	per := l.Stats().Bytes / 14
	l.opts.MaxBytes = per * 4
	if _, err := l.Evict(); err != nil {
		t.Fatal(err)
	}
	got = all(t, l)
	if len(got) > 4 || got[len(got)-1].QueueID != "Q19" {
		t.Fatalf("after the byte bound: %d entries, last %s", len(got), got[len(got)-1].QueueID)
	}
	if s := l.Stats(); s.Bytes > per*4 || s.Entries != int64(len(got)) || s.Evicted != int64(20-len(got)) {
		t.Errorf("stats %+v (bound %d)", s, per*4)
	}
}

func TestHostileDeliveries(t *testing.T) {
	l := open(t, "", Options{MaxRcpts: 5, MaxEvidence: 100})
	at := time.Unix(1_700_000_000, 0)
	many := make([]string, 10000)
	for i := range many {
		many[i] = fmt.Sprintf("r%d@example.org", i)
	}
	many[1] = strings.Repeat("x", MaxRcptLen+1) + "@example.org"
	cases := []struct {
		name        string
		d           Delivery
		unpurgeable string
		rcpts       int
	}{
		{"no Message-ID", Delivery{MessageID: "", Rcpts: []string{"a@b"}, Evidence: []byte("e")}, NoMessageID, 1},
		{"spaces", Delivery{MessageID: "a b@c", Rcpts: []string{"a@b"}, Evidence: []byte("e")}, BadMessageID, 1},
		{"brackets", Delivery{MessageID: "a>b@c", Rcpts: []string{"a@b"}, Evidence: []byte("e")}, BadMessageID, 1},
		{"control", Delivery{MessageID: "a\x00b@c", Rcpts: []string{"a@b"}, Evidence: []byte("e")}, BadMessageID, 1},
		{"too long", Delivery{MessageID: strings.Repeat("a", MaxMessageID+1), Rcpts: []string{"a@b"}, Evidence: []byte("e")}, BadMessageID, 1},
		{"many recipients", Delivery{MessageID: "ok@c", Rcpts: many, RcptCount: len(many), Evidence: []byte("e")}, "", 5},
	}
	for i, c := range cases {
		c.d.Time = at.Add(time.Duration(i) * time.Second)
		c.d.QueueID = c.name
		l.Record(c.d)
	}
	l.Record(Delivery{MessageID: "big@c", Evidence: make([]byte, 101)}) // evidence over the bound
	l.Record(Delivery{MessageID: "none@c"})                             // no evidence
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	got := all(t, l)
	if len(got) != len(cases) {
		t.Fatalf("%d entries, want %d", len(got), len(cases))
	}
	for i, c := range cases {
		e := got[i]
		if e.QueueID != c.name || e.Unpurgeable != c.unpurgeable || len(e.Rcpts) != c.rcpts {
			t.Errorf("%s: unpurgeable %q, %d recipients; want %q, %d", c.name, e.Unpurgeable, len(e.Rcpts), c.unpurgeable, c.rcpts)
		}
		if len(e.MessageID) > MaxMessageID {
			t.Errorf("%s: Message-ID of %d bytes kept", c.name, len(e.MessageID))
		}
	}
	last := got[len(got)-1]
	if last.RcptCount != len(many) || last.Rcpts[1] != "r2@example.org" {
		t.Errorf("many recipients: count %d, kept %v", last.RcptCount, last.Rcpts)
	}
	if s := l.Stats(); s.Dropped != 2 {
		t.Errorf("dropped %d, want 2", s.Dropped)
	}
}

func TestDuplicateMessageIDs(t *testing.T) {
	l := open(t, "", Options{})
	at := time.Unix(1_700_000_000, 0)
	for i := range 3 {
		d := delivery(i, at.Add(time.Duration(i)*time.Second))
		d.MessageID = "same@example.org"
		l.Record(d)
	}
	l.Record(delivery(9, at))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	keys, err := l.SameMessageID("same@example.org")
	if err != nil || len(keys) != 3 {
		t.Fatalf("SameMessageID = %v, %v; want 3 keys", keys, err)
	}
	for i, k := range keys {
		e, err := l.Get(k)
		if err != nil || e.QueueID != fmt.Sprintf("Q%d", i) {
			t.Errorf("key %d: %+v, %v", i, e, err)
		}
	}
}

func TestRecordQueueFullDrops(t *testing.T) {
	l := open(t, "", Options{QueueLen: 2})
	for i := range 5 {
		l.Record(delivery(i, time.Now()))
	}
	if s := l.Stats(); s.Dropped != 3 || s.Queued != 2 {
		t.Errorf("stats %+v; want 3 dropped, 2 queued", s)
	}
}

func TestUndecodableEntrySkipped(t *testing.T) {
	if _, err := decodeEntry(Key{}, []byte{entryVersion, 0, 0xff}); !errors.Is(err, errEntry) {
		t.Errorf("truncated entry: %v", err)
	}
	if _, err := decodeEntry(Key{}, []byte{9, 0}); !errors.Is(err, errEntry) {
		t.Errorf("other version: %v", err)
	}
	e := Entry{Delivery: delivery(1, time.Unix(5, 0))}
	b := e.encode(nil, 10)
	for i := range len(b) {
		decodeEntry(Key{}, b[:i]) // never panics
	}
	if _, err := decodeEntry(Key{}, append(b, 0)); !errors.Is(err, errEntry) {
		t.Errorf("trailing byte: %v", err)
	}
}

func BenchmarkRecord(b *testing.B) {
	l, err := Open("", Options{InMemory: true, QueueLen: 1 << 20, FlushInterval: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ev := make([]byte, 1500)
	rcpts := []string{"alice@example.org", "bob@example.org"}
	at := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		l.Record(Delivery{Time: at, QueueID: "4Xyz12AbC", MessageID: "20240101.abcdef@mail.example.org",
			Rcpts: rcpts, RcptCount: 2, Evidence: ev})
	}
}

// An entry keeps its message's signs; an entry of version 1, written
// before signs were kept, is read with none.
func TestEntrySigns(t *testing.T) {
	d := delivery(1, time.Unix(5, 0))
	d.Signs = []byte(`{"reply":true}`)
	b := (&Entry{Delivery: d}).encode(nil, 10)
	got, err := decodeEntry(Key{}, b)
	if err != nil || string(got.Signs) != `{"reply":true}` || string(got.Evidence) != string(d.Evidence) {
		t.Fatalf("decoded %q, %q, %v", got.Signs, got.Evidence, err)
	}
	d.Signs = nil
	v1 := (&Entry{Delivery: d}).encode(nil, 10)
	v1[0], v1 = 1, v1[:len(v1)-1] // no signs' length
	got, err = decodeEntry(Key{}, v1)
	if err != nil || len(got.Signs) != 0 || string(got.Evidence) != string(d.Evidence) {
		t.Errorf("version 1: %q, %q, %v", got.Signs, got.Evidence, err)
	}
}
