package campaign

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// recordCache is a small LRU cache of decoded campaign records with a TTL,
// so that the milter does not decode the same record for every copy of a
// campaign.
type recordCache struct {
	mu    sync.Mutex
	size  int
	ttl   time.Duration
	ll    *list.List // front = most recent
	items map[store.CampaignID]*list.Element

	hits, misses atomic.Int64
}

// CacheStats counts the lookups of the engine's cache of decoded campaign
// records since the engine started.
type CacheStats struct {
	Hits   int64 // records served from the cache
	Misses int64 // records read and decoded from the store
}

// HitRate is Hits / (Hits + Misses), 0 before any lookup.
func (s CacheStats) HitRate() float64 {
	if s.Hits+s.Misses == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Hits+s.Misses)
}

type cacheEntry struct {
	id  store.CampaignID
	rec *cachedRecord
	at  time.Time
}

func newRecordCache(size int, ttl time.Duration) *recordCache {
	return &recordCache{size: size, ttl: ttl, ll: list.New(), items: make(map[store.CampaignID]*list.Element)}
}

func (c *recordCache) get(id store.CampaignID, now time.Time) *cachedRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[id]
	if !ok {
		c.misses.Add(1)
		return nil
	}
	ent := el.Value.(*cacheEntry)
	if now.Sub(ent.at) > c.ttl || now.Before(ent.at) {
		c.ll.Remove(el)
		delete(c.items, id)
		c.misses.Add(1)
		return nil
	}
	c.ll.MoveToFront(el)
	c.hits.Add(1)
	return ent.rec
}

func (c *recordCache) put(id store.CampaignID, rec *cachedRecord, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[id]; ok {
		el.Value = &cacheEntry{id: id, rec: rec, at: now}
		c.ll.MoveToFront(el)
		return
	}
	c.items[id] = c.ll.PushFront(&cacheEntry{id: id, rec: rec, at: now})
	for c.ll.Len() > c.size {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).id)
	}
}

func (c *recordCache) remove(id store.CampaignID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[id]; ok {
		c.ll.Remove(el)
		delete(c.items, id)
	}
}

func (c *recordCache) purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	clear(c.items)
}
