package store

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrDiskFull is returned by writes while the store's filesystem has less
// free space than Options.MinFreeBytes. Reads (and so mail checks) go on;
// writes resume by themselves once space is freed.
var ErrDiskFull = errors.New("store: disk nearly full, write refused (reports are not recorded; mail checks go on): free space on the store's filesystem, or lower store.min_free_bytes")

// DefaultMinFreeBytes is the default free-space reserve of the store's
// filesystem (Options.MinFreeBytes). Badger writes its write-ahead log and
// new tables through memory maps of files created sparse at full size
// (the log at twice the memtable size, 64 MiB here, of which the guard
// preallocates what Badger can use; tables at their size, a memtable
// flush is up to 32 MiB; compactions write their new tables before
// deleting the old ones). A page of such a file that cannot get a disk
// block when it is first written kills the process with SIGBUS, so
// writes (and Close's flush) must stop while that much is still free.
const DefaultMinFreeBytes = 256 << 20

// diskCheckInterval is how long state (the metrics) trusts a free-space
// measurement; a write measures every time.
const diskCheckInterval = time.Second

// diskGuard refuses writes when the store's filesystem runs low, and
// preallocates Badger's write-ahead logs (wal) once the store is open
// read-write: another process may fill the disk between a measurement
// and Badger's write into its log's memory map, and a preallocated log
// needs no new block there.
type diskGuard struct {
	dir  string
	min  int64
	free func(dir string) (int64, error)
	log  *slog.Logger

	mu      sync.Mutex
	checked time.Time
	last    int64 // free bytes at the last measurement; -1 unknown
	warned  bool  // a measurement failure was logged
	wal     *walPrealloc

	full    atomic.Bool
	refused atomic.Int64
}

func newDiskGuard(dir string, opts Options) *diskGuard {
	if opts.InMemory || opts.MinFreeBytes < 0 {
		return nil
	}
	free := opts.FreeSpace
	if free == nil {
		free = freeSpace
	}
	return &diskGuard{dir: dir, min: opts.MinFreeBytes, free: free, log: opts.Logger, last: -1}
}

// check returns an error wrapping ErrDiskFull when a write must be
// refused: less free space than the reserve, or the write-ahead log
// Badger just started could not be preallocated. A nil guard allows
// everything.
func (g *diskGuard) check() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.measure(time.Now())
	var why error
	if g.last >= 0 && g.last < g.min {
		why = fmt.Errorf("%w (%s: %d bytes free, store.min_free_bytes %d)", ErrDiskFull, g.dir, g.last, g.min)
	} else if err := g.wal.run(); err != nil {
		why = fmt.Errorf("%w (%s: %d bytes free): %w", ErrDiskFull, g.dir, g.last, err)
	}
	full := why != nil
	if was := g.full.Swap(full); was != full {
		if full {
			g.log.Error("store: disk nearly full, refusing writes until space is freed (mail checks go on)",
				"dir", g.dir, "free_bytes", g.last, "min_free_bytes", g.min, "err", why)
		} else {
			g.log.Info("store: disk space back, writes resume", "dir", g.dir, "free_bytes", g.last)
		}
	}
	if full {
		g.refused.Add(1)
	}
	return why
}

// startWAL turns on the preallocation of the write-ahead logs of a store
// just opened read-write: the newest log and every later one.
func (g *diskGuard) startWAL() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.wal = newWALPrealloc(g.dir, g.log)
	if err := g.wal.run(); err != nil {
		g.log.Warn("store: write-ahead log not preallocated", "dir", g.dir, "err", err)
	}
}

// freeNow measures the free space now (ok false: unknown, or no guard).
func (g *diskGuard) freeNow() (free int64, ok bool) {
	if g == nil {
		return 0, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.measure(time.Now())
	return g.last, g.last >= 0
}

func (g *diskGuard) measure(now time.Time) {
	g.checked = now
	f, err := g.free(g.dir)
	if err != nil {
		// Unknown: allow writes (the guard must not stop a store whose
		// filesystem cannot say), and say so once.
		if !g.warned {
			g.warned = true
			g.log.Warn("store: cannot measure free disk space; the disk-full guard is off", "dir", g.dir, "err", err)
		}
		g.last = -1
		return
	}
	g.last = f
}

// state returns the last measured free bytes (-1 unknown), whether writes
// are refused, and how many were refused so far.
func (g *diskGuard) state() (free int64, full bool, refused int64) {
	if g == nil {
		return -1, false, 0
	}
	g.mu.Lock()
	if time.Since(g.checked) >= diskCheckInterval {
		g.measure(time.Now())
	}
	free = g.last
	g.mu.Unlock()
	full = free >= 0 && free < g.min
	return free, full || g.full.Load(), g.refused.Load()
}
