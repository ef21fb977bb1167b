package campaign

import (
	"slices"
	"testing"

	"github.com/nddmilter/nddmilter/internal/store"
)

// TestPoolReporters: a message matching two campaigns of one spam run
// (kept apart by the merge rule) is decided on the distinct reporters of
// both, each counted once, only when both are active and near-duplicates
// on their own sketches.
func TestPoolReporters(t *testing.T) {
	tests := []struct {
		name    string
		allowed bool // an administrator allowed the first campaign
		far     bool // the first campaign also keeps another text's sketch
		want    int64
		pooled  bool
	}{
		{name: "near-duplicates: pooled, the shared reporter once", want: 3, pooled: true},
		{name: "one allowed: not pooled", allowed: true, want: 2},
		{name: "not near-duplicates on their own sketches: not pooled", far: true, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			msg := copyOf(t, 0, 1)
			m, err := f.sign(msg)
			if err != nil || !m.HasSketch() || len(m.IMatchKeys) == 0 || len(m.BandKeys) == 0 {
				t.Fatalf("setup: sign: %v", err)
			}
			put := func(target store.CampaignID, keys [][]byte, sketch []byte, who string) store.CampaignID {
				t.Helper()
				r, err := f.st.Report(f.ctx, store.ReportInput{
					Time: f.clock.Now(), Kind: store.KindSpam, Reporter: who, Keys: keys, Sketch: sketch,
					Create: true, Index: true, Vetted: true, Target: target,
				})
				if err != nil {
					t.Fatal(err)
				}
				return r.Campaign
			}
			// Two campaigns with the same sketch: one found through band
			// keys (r1, r2), one through I-Match (r2, r3).
			a := put(0, m.BandKeys, m.SketchBytes, "r1")
			put(a, nil, nil, "r2")
			bKeys := m.IMatchKeys
			if tt.allowed {
				// The message begins as b (its lead key): the allowed
				// campaign does not prevail (exempt.go), and b's decision
				// shows whose reporters it counted.
				bKeys = append(slices.Clone(bKeys), m.ShortKeys...)
			}
			b := put(0, bKeys, m.SketchBytes, "r2")
			put(b, nil, nil, "r3")
			if a == b || a == 0 || b == 0 {
				t.Fatalf("setup: campaigns %d, %d", a, b)
			}
			if tt.far {
				o, err := f.sign(copyOf(t, 1, 1))
				if err != nil {
					t.Fatal(err)
				}
				put(a, nil, o.SketchBytes, "r1")
			}
			if tt.allowed {
				if err := f.eng.Ingester.SetState(f.ctx, a, store.StateAllowed); err != nil {
					t.Fatal(err)
				}
			}
			v := f.evaluate(t, msg)
			if v.Decision == nil || v.Campaign != b {
				t.Fatalf("verdict: campaign %d (want %d): %+v", v.Campaign, b, v)
			}
			if v.Decision.SpamReporters != tt.want {
				t.Errorf("spam reporters %d, want %d: %s", v.Decision.SpamReporters, tt.want, v.Rule)
			}
			if got := slices.Equal(v.Decision.PooledWith, []store.CampaignID{a}); got != tt.pooled {
				t.Errorf("pooled with %v, want pooled=%v: %s", v.Decision.PooledWith, tt.pooled, v.Rule)
			}
			t.Log(v.Rule)
		})
	}
}
