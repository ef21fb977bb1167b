package fleet

import (
	"context"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// maxHitsPerEvent bounds the deltas of one hits event.
const maxHitsPerEvent = 2000

type hitKey struct {
	id     store.CampaignID
	action string
	hour   int64 // unix hour
}

type hitAgg struct {
	n    int64
	last time.Time
}

// RecordHit counts a matched message for the next hits event. It
// implements campaign.HitCounter; it never blocks on the network.
// A host whose clock is off from the others' dates it by theirs
// (clock.go).
func (n *Node) RecordHit(id store.CampaignID, action string, at time.Time) {
	at = n.fleetTime(at)
	k := hitKey{id: id, action: action, hour: at.Unix() / 3600}
	n.mu.Lock()
	defer n.mu.Unlock()
	a := n.hits[k]
	if a == nil {
		a = &hitAgg{}
		n.hits[k] = a
	}
	a.n++
	if at.After(a.last) {
		a.last = at
	}
}

// hitsLoop publishes the aggregated hit counts every HitsEvery.
func (n *Node) hitsLoop() {
	defer n.wg.Done()
	for n.sleep(n.opts.HitsEvery) {
		n.flushHits(n.ctx)
	}
}

// flushHits publishes the counted hits; counts that could not be
// published are kept for the next round.
func (n *Node) flushHits(ctx context.Context) {
	n.mu.Lock()
	pending := n.hits
	if len(pending) == 0 {
		n.mu.Unlock()
		return
	}
	n.hits = make(map[hitKey]*hitAgg, len(pending))
	n.mu.Unlock()
	deltas := make([]store.HitDelta, 0, len(pending))
	for k, a := range pending {
		deltas = append(deltas, store.HitDelta{
			Campaign: k.id, Action: k.action, Hour: time.Unix(k.hour*3600, 0).UTC(), Last: a.last.UTC(), N: a.n,
		})
	}
	for len(deltas) > 0 {
		m := min(len(deltas), maxHitsPerEvent)
		ev := n.newEvent(evHits)
		ev.Hits = deltas[:m]
		data, err := ev.encode()
		if err == nil {
			_, err = n.publish(ctx, ev.ID, data)
		}
		if err != nil {
			n.keepHits(deltas)
			return
		}
		deltas = deltas[m:]
	}
}

// keepHits puts unpublished deltas back.
func (n *Node) keepHits(deltas []store.HitDelta) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, d := range deltas {
		k := hitKey{id: d.Campaign, action: d.Action, hour: d.Hour.Unix() / 3600}
		a := n.hits[k]
		if a == nil {
			a = &hitAgg{}
			n.hits[k] = a
		}
		a.n += d.N
		if d.Last.After(a.last) {
			a.last = d.Last
		}
	}
}
