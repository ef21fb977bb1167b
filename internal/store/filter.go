package store

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/dgraph-io/badger/v4"
)

// The index filter is an in-memory Bloom filter of the store's index keys:
// most keys looked up are absent (every key of a ham, most keys of any
// message), and the filter answers those with a few hashes instead of a
// Badger Get (a search through the memtables and every level's tables).
//
// It never gives a false negative:
//   - until it is built, Lookup asks Badger for every key;
//   - it is built in the background by one scan of the index prefix in a
//     read transaction;
//   - setIndex adds a key to the filter (and keeps it for the one being
//     built) before the write commits, and a write transaction that adds keys
//     holds gate shared from its first key until its commit is over; a
//     build takes gate exclusively to start, so every key is either in a
//     commit finished before the build's scan began (the scan sees it) or
//     added to the filter being built.
//
// Deleted keys stay in the filter (a Bloom filter cannot forget): they
// cost a Get each when looked up, as without the filter. Lookup counts
// the keys the filter let through that Badger did not have; when they
// exceed a few times the designed rate (deletions, expiry), the filter is
// rebuilt.
//
// A growing store does not rescan its index each time it outgrows the
// filter: the filter is a stack of layers (a scalable Bloom filter), and
// when the newest layer holds the keys it was sized for, a layer twice as
// large takes the new keys. All layers share one number of hash
// functions, so a key is hashed once and its bit positions tested in
// each. Past filterMaxLayers layers (16 times the keys of the first
// before its own growth) a rebuild compacts them into one: a scan per 16
// times growth instead of per doubling.
//
// Memory: each layer is sized at filterFPRate, about 14.4 bits per key
// of its capacity; a built filter is sized for twice the keys present (at
// least filterMinCapacity): 3.6 MB per million keys in the store, up to
// twice that in a growing store, plus as much again (and a copy of the
// keys written meanwhile) while a rebuild runs. The false-positive rate
// is at most filterFPRate per full layer.
type indexFilter struct {
	gate sync.RWMutex // see above; writers hold it shared

	mu       sync.RWMutex
	layers   []*bloom.BloomFilter // empty until built: lookups go to Badger; adds go to the last
	building bool                 // a build runs: adds are kept in pending too
	pending  [][]byte             // keys added during the build, for the new filter
	capacity uint                 // keys the last layer was sized for
	filled   uint                 // keys in the last layer (of the scan, then added)

	tested, falsePos atomic.Uint64 // since cur was built
	minSamples       uint64        // filterRebuildSamples (tests lower it)
	minCapacity      uint          // filterMinCapacity (tests lower it)
	rebuild          chan struct{} // asks the filter loop for a rebuild
	// built counts finished builds (tests wait on it).
	built atomic.Int64
}

const (
	// filterFPRate is the designed false-positive rate.
	filterFPRate = 0.001
	// filterMinCapacity is the smallest capacity a filter is sized for.
	filterMinCapacity = 1 << 16
	// filterRebuildSamples is how many filtered keys Lookup must have
	// tested before the observed false-positive rate is trusted, and
	// filterRebuildFactor how far above filterFPRate it may go.
	filterRebuildSamples = 1 << 16
	filterRebuildFactor  = 8
	// filterMaxLayers is how many layers a growing filter may have
	// before a rebuild compacts them.
	filterMaxLayers = 4
)

// filterHashes is the number of hash functions of every layer: the
// optimum at filterFPRate, which does not depend on the capacity.
var _, filterHashes = bloom.EstimateParameters(filterMinCapacity, filterFPRate)

// newFilterLayer returns an empty layer for capacity keys.
func newFilterLayer(capacity uint) *bloom.BloomFilter {
	m, _ := bloom.EstimateParameters(capacity, filterFPRate)
	return bloom.New(m, filterHashes)
}

func newIndexFilter() *indexFilter {
	return &indexFilter{rebuild: make(chan struct{}, 1), minSamples: filterRebuildSamples, minCapacity: filterMinCapacity}
}

// startIndexFilter builds the index filter in the background and rebuilds
// it when asked, until the store closes.
func (b *Badger) startIndexFilter() {
	b.filter = newIndexFilter()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			if err := b.buildIndexFilter(); err != nil && !b.isClosed() {
				b.log.Warn("store: building the index filter (lookups read the store meanwhile)", "err", err)
			}
			select {
			case <-b.closed:
				return
			case <-b.filter.rebuild:
			}
		}
	}()
}

// buildIndexFilter builds a filter sized for the index keys the store
// counts by one scan of them and puts it in place. The build owns the new
// filter alone (lookups are not held up by it): keys added meanwhile are
// kept aside and added to it before it replaces the current one.
func (b *Badger) buildIndexFilter() error {
	f := b.filter
	// The store's counters size the filter without a scan of its own;
	// they are kept by every write.
	var n int
	if c, err := b.counters(); err == nil {
		n = int(max(c.keys, 0))
	} else if n, err = b.scanIndexKeys(nil); err != nil {
		return err
	}
	capacity := max(2*uint(n), f.minCapacity)
	next := newFilterLayer(capacity)
	f.gate.Lock() // wait for the write transactions adding keys to finish
	f.mu.Lock()
	f.building, f.pending = true, nil
	f.mu.Unlock()
	f.gate.Unlock()
	scanned, err := b.scanIndexKeys(func(k []byte) { next.Add(k) })
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range f.pending {
		next.Add(k)
	}
	filled := uint(scanned + len(f.pending))
	f.building, f.pending = false, nil
	if err != nil {
		return err
	}
	f.layers, f.capacity, f.filled = []*bloom.BloomFilter{next}, capacity, filled
	f.tested.Store(0)
	f.falsePos.Store(0)
	f.built.Add(1)
	return nil
}

// scanIndexKeys counts the index keys in one read transaction and passes
// each (the signature key, valid during the call) to add when add is not
// nil. It stops when the store closes.
func (b *Badger) scanIndexKeys(add func(k []byte)) (int, error) {
	n := 0
	err := b.view(func(txn *badger.Txn) error {
		pfx := []byte{pfxIndex}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: pfx})
		defer it.Close()
		for it.Seek(pfx); it.ValidForPrefix(pfx); it.Next() {
			n++
			if add != nil {
				add(it.Item().Key()[1:])
			}
			if n%4096 == 0 && b.isClosed() {
				return ErrClosed
			}
		}
		return nil
	})
	return n, err
}

// mayContain tells, for each key, whether it may be in the index; nil
// when the filter is not built yet (every key may be).
func (f *indexFilter) mayContain(keys [][]byte) []bool {
	if f == nil {
		return nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if len(f.layers) == 0 {
		return nil
	}
	maybe := make([]bool, len(keys))
	if len(f.layers) == 1 {
		for i, k := range keys {
			maybe[i] = f.layers[0].Test(k)
		}
		return maybe
	}
	for i, k := range keys {
		locs := bloom.Locations(k, filterHashes)
		for _, l := range f.layers {
			if l.TestLocations(locs) {
				maybe[i] = true
				break
			}
		}
	}
	return maybe
}

// observe counts keys the filter let through (tested) and those of them
// the store did not have (falsePos), and asks for a rebuild when the
// observed rate is well above the designed one.
func (f *indexFilter) observe(tested, falsePos int) {
	if f == nil || tested == 0 {
		return
	}
	t := f.tested.Add(uint64(tested))
	fp := f.falsePos.Add(uint64(falsePos))
	if t >= f.minSamples && float64(fp) > filterRebuildFactor*filterFPRate*float64(t) {
		f.tested.Store(0) // one request per stretch of samples
		f.falsePos.Store(0)
		f.askRebuild()
	}
}

func (f *indexFilter) askRebuild() {
	select {
	case f.rebuild <- struct{}{}:
	default:
	}
}

// add records index key k, before the write that sets it commits.
func (f *indexFilter) add(k []byte) {
	if f == nil {
		return
	}
	f.mu.Lock()
	if len(f.layers) > 0 {
		if f.filled >= f.capacity && len(f.layers) < filterMaxLayers {
			// The last layer is full: a larger one takes the new keys.
			f.capacity *= 2
			f.layers = append(f.layers, newFilterLayer(f.capacity))
			f.filled = 0
		}
		f.layers[len(f.layers)-1].Add(k)
		f.filled++
		if len(f.layers) == filterMaxLayers && f.filled == f.capacity/2 {
			f.askRebuild() // the last layer will be full: compact them
		}
	}
	if f.building {
		f.pending = append(f.pending, bytes.Clone(k))
	}
	f.mu.Unlock()
}

// filterWriter is what a write transaction holds of the index filter.
type filterWriter struct {
	f    *indexFilter
	held bool // gate held shared
}

// add adds k to the filter, entering the gate on the transaction's first
// key.
func (w *filterWriter) add(k []byte) {
	if w.f == nil {
		return
	}
	if !w.held {
		w.f.gate.RLock()
		w.held = true
	}
	w.f.add(k)
}

// done leaves the gate once the transaction's commit (or discard) is over.
func (w *filterWriter) done() {
	if w.held {
		w.f.gate.RUnlock()
		w.held = false
	}
}

// WaitIndexFilter waits until the index filter built at Open is in place,
// or ctx is done. Lookups are correct before that (they read the store);
// benchmarks wait so that they measure the steady state, not the build,
// which scans every index key once.
func (b *Badger) WaitIndexFilter(ctx context.Context) error {
	if b.filter == nil {
		return nil
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for b.filter.built.Load() == 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the index filter: %w", ctx.Err())
		case <-b.closed:
			return ErrClosed
		case <-t.C:
		}
	}
	return nil
}
