package campaign

import (
	"encoding/hex"
	"fmt"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

func TestRecordCache(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(id store.CampaignID) *cachedRecord { return &cachedRecord{rec: &store.Campaign{ID: id}} }
	c := newRecordCache(2, time.Second)
	c.put(1, rec(1), t0)
	c.put(2, rec(2), t0)
	if c.get(1, t0) == nil { // 1 becomes most recent
		t.Fatal("miss on 1")
	}
	c.put(3, rec(3), t0) // evicts 2, the least recently used
	tests := []struct {
		id   store.CampaignID
		at   time.Time
		want bool
	}{
		{2, t0, false},
		{1, t0.Add(500 * time.Millisecond), true},
		{3, t0.Add(time.Second), true},
		{3, t0.Add(1001 * time.Millisecond), false}, // expired (and dropped)
		{3, t0, false},
		{1, t0.Add(-time.Second), false}, // clock went back: not trusted
	}
	for i, tt := range tests {
		if got := c.get(tt.id, tt.at) != nil; got != tt.want {
			t.Errorf("%d: get(%d) hit=%v, want %v", i, tt.id, got, tt.want)
		}
	}
	c.put(4, rec(4), t0)
	c.remove(4)
	if c.get(4, t0) != nil {
		t.Error("removed entry still cached")
	}
	c.put(5, rec(5), t0)
	c.purge()
	if c.get(5, t0) != nil || c.ll.Len() != 0 || len(c.items) != 0 {
		t.Error("purge left entries")
	}
}

func TestBandEstimate(t *testing.T) {
	keys := make([][]byte, 32)
	withBits := &pipeline.Message{BandKeys: keys}
	withBits.Sketch.Bits = make([]uint64, 6) // 384 bits, 12 per band
	tests := []struct {
		s        *pipeline.Message
		shared   int
		min, max float64
	}{
		{withBits, 32, 1, 1},
		{withBits, 16, 0.98, 0.99},
		{withBits, 24, 0.99, 1},
		{withBits, 15, -1, -1},
		{withBits, 0, -1, -1},
		{&pipeline.Message{BandKeys: keys}, 32, -1, -1}, // no bits (min-hash only)
		{&pipeline.Message{}, 0, -1, -1},
	}
	for i, tt := range tests {
		got := bandEstimate(tt.s, tt.shared)
		if got < tt.min-1e-9 || got > tt.max+1e-9 {
			t.Errorf("%d: bandEstimate(shared %d) = %v, want [%v, %v]", i, tt.shared, got, tt.min, tt.max)
		}
	}
}

// The record cache serves repeated copies of a campaign: the first check
// reads the record, the next ones hit the cache.
func TestEngineCacheStats(t *testing.T) {
	f := newFixture(t, Options{})
	for j := range 3 {
		f.report(t, copyOf(t, 0, uint64(j), spamgen.Combo), store.KindSpam, fmt.Sprint("r", j))
	}
	before := f.eng.Checker.CacheStats()
	for i := range 4 {
		v, err := f.eng.Checker.Check(f.ctx, copyOf(t, 0, uint64(100+i), spamgen.Typos))
		if err != nil {
			t.Fatal(err)
		}
		if v.Campaign == 0 {
			t.Fatalf("copy %d matched no campaign: %s", i, v.Rule)
		}
		for _, ev := range v.Evidence {
			if _, err := hex.DecodeString(ev.Key); err != nil || ev.Key == "" {
				t.Errorf("evidence %+v: key is not hex", ev)
			}
		}
	}
	st := f.eng.Checker.CacheStats()
	hits, misses := st.Hits-before.Hits, st.Misses-before.Misses
	if misses < 1 || hits < 3 {
		t.Errorf("cache: %d hits, %d misses over 4 copies; want ≥ 3 hits, ≥ 1 miss", hits, misses)
	}
	if r := st.HitRate(); r <= 0 || r > 1 {
		t.Errorf("hit rate %v", r)
	}
	off := newFixture(t, Options{CacheTTL: -1})
	if (off.eng.Checker.CacheStats() != CacheStats{}) {
		t.Errorf("disabled cache has stats %+v", off.eng.Checker.CacheStats())
	}
}
