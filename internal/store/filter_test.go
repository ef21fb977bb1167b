package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// waitBuilt waits until the index filter has been built n times.
func waitBuilt(t testing.TB, s *Badger, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.filter.built.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("index filter built %d times, want %d", s.filter.built.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func spamInput(keys [][]byte) ReportInput {
	return ReportInput{Time: time.Now(), Kind: KindSpam, Keys: keys, Create: true, Index: true}
}

// TestIndexFilterNoFalseNegatives: writers report campaigns while
// readers look up every key already committed and rebuilds of the filter
// are asked for all along; no committed key is ever missed.
func TestIndexFilterNoFalseNegatives(t *testing.T) {
	s := openTest(t, "", Options{InMemory: true, Expiry: -1})
	ctx := context.Background()
	// Keys present before the first build are found by its scan.
	for i := range 50 {
		if _, err := s.Report(ctx, spamInput(keys(fmt.Sprintf("pre-%d-a", i), fmt.Sprintf("pre-%d-b", i)))); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu        sync.Mutex
		committed [][]byte
	)
	committed = append(committed, keys("pre-0-a", "pre-49-b")...)
	const writers, perWriter = 4, 150
	stop := make(chan struct{})
	var readers, ws sync.WaitGroup
	errc := make(chan error, 16)
	for w := range writers {
		ws.Add(1)
		go func() {
			defer ws.Done()
			for i := range perWriter {
				ks := keys(fmt.Sprintf("w%d-%d-a", w, i), fmt.Sprintf("w%d-%d-b", w, i))
				if _, err := s.Report(ctx, spamInput(ks)); err != nil {
					errc <- err
					return
				}
				// Found at once by the writer…
				hits, err := s.Lookup(ctx, ks)
				if err != nil || len(hits) != len(ks) {
					errc <- fmt.Errorf("writer %d: lookup right after the commit: %d hits of %d (%v)", w, len(hits), len(ks), err)
					return
				}
				mu.Lock()
				committed = append(committed, ks...)
				mu.Unlock()
				if i%10 == 0 {
					s.filter.askRebuild()
				}
			}
		}()
	}
	for r := range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				k := committed[(n*7919+r)%len(committed)]
				mu.Unlock()
				hits, err := s.Lookup(ctx, [][]byte{k, []byte("absent-" + fmt.Sprint(n))})
				if err != nil || len(hits) != 1 {
					errc <- fmt.Errorf("reader %d: committed key %q: %d hits (%v)", r, k, len(hits), err)
					return
				}
			}
		}()
	}
	ws.Wait()
	close(stop)
	readers.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if s.filter.built.Load() < 2 {
		t.Errorf("the filter was built %d times: the test did not exercise rebuilds", s.filter.built.Load())
	}
	// Every key, after all, with the filter in place.
	waitBuilt(t, s, 1)
	hits, err := s.Lookup(ctx, committed)
	if err != nil || len(hits) != len(committed) {
		t.Errorf("final lookup: %d hits of %d (%v)", len(hits), len(committed), err)
	}
}

// TestIndexFilterAbsentKeys: with the filter built, absent keys are
// answered without the store, and present ones still found.
func TestIndexFilterAbsentKeys(t *testing.T) {
	s := openTest(t, "", Options{InMemory: true, Expiry: -1})
	ctx := context.Background()
	if _, err := s.Report(ctx, spamInput(keys("k1", "k2"))); err != nil {
		t.Fatal(err)
	}
	waitBuilt(t, s, 1)
	before := s.filter.tested.Load()
	var absent [][]byte
	for i := range 1000 {
		absent = append(absent, []byte(fmt.Sprintf("absent-%d", i)))
	}
	hits, err := s.Lookup(ctx, absent)
	if err != nil || len(hits) != 0 {
		t.Fatalf("absent keys: %v hits (%v)", hits, err)
	}
	if n := s.filter.tested.Load() - before; n > 20 {
		t.Errorf("%d of 1000 absent keys went to the store", n)
	}
	hits, err = s.Lookup(ctx, append(absent[:10:10], []byte("k2")))
	if err != nil || len(hits) != 1 || string(hits[0].Key) != "k2" {
		t.Errorf("present key: %v (%v)", hits, err)
	}
}

// TestIndexFilterRebuildAfterDelete: keys of deleted campaigns stay in
// the filter until lookups of them show it stale; then it is rebuilt
// without them.
func TestIndexFilterRebuildAfterDelete(t *testing.T) {
	s := openTest(t, "", Options{InMemory: true, Expiry: -1})
	ctx := context.Background()
	s.filter.minSamples = 100
	var gone [][]byte
	var ids []CampaignID
	for i := range 20 {
		ks := keys(fmt.Sprintf("d%d-a", i), fmt.Sprintf("d%d-b", i), fmt.Sprintf("d%d-c", i))
		res, err := s.Report(ctx, spamInput(ks))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Campaign)
		gone = append(gone, ks...)
	}
	waitBuilt(t, s, 1)
	for _, id := range ids {
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if hits, err := s.Lookup(ctx, gone); err != nil || len(hits) != 0 {
			t.Fatalf("deleted keys: %v (%v)", hits, err)
		}
	}
	waitBuilt(t, s, 2)
	s.filter.mu.RLock()
	defer s.filter.mu.RUnlock()
	for _, k := range gone {
		if s.filter.layers[0].Test(k) {
			t.Errorf("deleted key %q still in the rebuilt filter", k)
		}
	}
}

// TestRecord: Record is Get without the keys.
func TestRecord(t *testing.T) {
	s := openTest(t, "", Options{InMemory: true, Expiry: -1})
	ctx := context.Background()
	res, err := s.Report(ctx, ReportInput{Time: time.Now(), Kind: KindSpam, Keys: keys("r1", "r2"), Create: true, Index: true, Subject: "s"})
	if err != nil {
		t.Fatal(err)
	}
	full, err := s.Get(ctx, res.Campaign)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Record(ctx, res.Campaign)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Keys) != 2 || rec.Keys != nil {
		t.Errorf("Get has %d keys, Record %d; want 2 and none", len(full.Keys), len(rec.Keys))
	}
	full.Keys = nil
	if fmt.Sprint(*full) != fmt.Sprint(*rec) {
		t.Errorf("Record %+v, want %+v", *rec, *full)
	}
	if _, err := s.Record(ctx, res.Campaign+1000); err == nil {
		t.Error("Record of an unknown campaign: no error")
	}
}

// TestIndexFilterGrowsInLayers: a store that outgrows its filter gets a
// larger layer without a rescan, finds every key through the layers, and
// is compacted into one layer by a rebuild past filterMaxLayers.
func TestIndexFilterGrowsInLayers(t *testing.T) {
	s := openTest(t, "", Options{InMemory: true, Expiry: -1})
	ctx := context.Background()
	waitBuilt(t, s, 1)
	s.filter.mu.Lock()
	s.filter.minCapacity = 8
	s.filter.mu.Unlock()
	s.filter.askRebuild()
	waitBuilt(t, s, 2) // one empty layer for 8 keys
	layers := func() int {
		s.filter.mu.RLock()
		defer s.filter.mu.RUnlock()
		return len(s.filter.layers)
	}
	var all [][]byte
	report := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			ks := keys(fmt.Sprintf("g%d-a", i), fmt.Sprintf("g%d-b", i))
			if _, err := s.Report(ctx, spamInput(ks)); err != nil {
				t.Fatal(err)
			}
			all = append(all, ks...)
		}
	}
	found := func() {
		t.Helper()
		hits, err := s.Lookup(ctx, all)
		if err != nil || len(hits) != len(all) {
			t.Fatalf("lookup of %d keys: %d hits (%v)", len(all), len(hits), err)
		}
		for i, ok := range s.filter.mayContain(all) {
			if !ok {
				t.Fatalf("key %q ruled out by the filter", all[i])
			}
		}
	}
	report(0, 20) // 40 keys: layers of 8, 16 and 32
	found()
	if n, b := layers(), s.filter.built.Load(); n != 3 || b != 2 {
		t.Fatalf("after 40 keys: %d layers, %d builds; want 3 layers and no rebuild", n, b)
	}
	report(20, 80) // 160 keys: the 4th layer (64) half full asks for a compaction
	waitBuilt(t, s, 3)
	found()
	if n := layers(); n >= filterMaxLayers {
		t.Errorf("after the compaction: %d layers", n)
	}
}
