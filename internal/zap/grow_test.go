package zap

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/store"
)

// growing is the engine's campaigns, where the copies of the ledger
// match only at tag while weak (a campaign at the trigger for an exact
// copy, not yet for randomized ones), and extra reporters are added to
// every campaign (it grew).
type growing struct {
	engCampaigns
	weak  atomic.Bool
	extra atomic.Int64
}

func (g *growing) List(ctx context.Context, q store.Query) ([]store.Campaign, error) {
	cs, err := g.engCampaigns.List(ctx, q)
	for i := range cs {
		cs[i].SpamReporters += g.extra.Load()
	}
	return cs, err
}

func (g *growing) Get(ctx context.Context, id store.CampaignID) (*store.Campaign, error) {
	c, err := g.engCampaigns.Get(ctx, id)
	if c != nil {
		c.SpamReporters += g.extra.Load()
	}
	return c, err
}

func (g *growing) MatchEvidence(ctx context.Context, ev, signs []byte) (campaign.Verdict, error) {
	v, err := g.engCampaigns.MatchEvidence(ctx, ev, signs)
	if g.weak.Load() {
		v.Action = min(v.Action, action.Tag)
	}
	return v, err
}

// Copies that matched the campaign below the trigger when it escalated
// are moved once it grows and they match at it: the ledger is matched
// whole again, at most every RematchInterval.
func TestRematchWhenTheCampaignGrows(t *testing.T) {
	ctx := context.Background()
	eng := engine(t)
	c := &clock{t: time.Now()}
	l, err := ledger.Open("", ledger.Options{InMemory: true, Clock: c.now, FlushInterval: time.Hour, EvictInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 8 {
		record(t, eng, l, spamCopy(i), fmt.Sprintf("u%d@example.org", i), c.now())
	}
	l.Flush()
	g := &growing{engCampaigns: engCampaigns{eng}}
	g.weak.Store(true)
	fm := &fakeMover{}
	p, err := New(l, g, fm, Options{Clock: c.now, Rate: 1e6, RematchInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{"r1", "r2", "r3", "r4", "r5"} {
		if _, err := eng.Ingester.Report(ctx, spamCopy(20+i), store.KindSpam, u); err != nil {
			t.Fatal(err)
		}
	}
	step := func(d time.Duration) int {
		c.add(d)
		if err := p.Scan(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Work(ctx); err != nil {
			t.Fatal(err)
		}
		m, _ := fm.counts()
		return m
	}
	if m := step(time.Second); m != 0 || !p.triggeredAny() {
		t.Fatalf("escalation with the copies at tag: %d moves, triggered %v", m, p.triggeredAny())
	}
	// More reports: the copies match at the trigger now.
	g.weak.Store(false)
	g.extra.Store(3)
	if m := step(time.Second); m != 0 {
		t.Fatalf("%d moves within RematchInterval of the last match of the whole ledger", m)
	}
	if m := step(time.Minute); m != 8 {
		t.Fatalf("%d moves after the campaign grew, want 8", m)
	}
	if m := step(time.Minute); m != 8 {
		t.Fatalf("%d moves once nothing changed, want 8 (never twice)", m)
	}
}

// triggeredAny reports whether some campaign is triggered.
func (p *Purger) triggeredAny() bool {
	marks, _ := p.l.Marks()
	for _, m := range marks {
		if !m.Triggered.IsZero() {
			return true
		}
	}
	return false
}
