package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Defaults of Options.
const (
	DefaultExpiry           = 30 * 24 * time.Hour
	DefaultExpiryInterval   = time.Hour
	DefaultGCInterval       = 10 * time.Minute
	DefaultHitFlushInterval = time.Second
	DefaultMaxSketches      = 8
	DefaultMaxMergedFrom    = 256
	// MaxTermsLen is the longest term set a campaign keeps (ReportInput.Terms).
	MaxTermsLen = 8 << 10
	// MaxKeyLen is the longest index key accepted; longer keys are an error
	// in Report and are ignored by Lookup.
	MaxKeyLen = 1024
	// MaxReportKeys is the most keys one report may carry.
	MaxReportKeys = 4096
)

// Badger tuning (see docs/STORE.md): values are small (a campaign record is
// ~100–1,000 bytes, an index entry 8 bytes), so everything lives in the LSM
// tree and the value log is only the write-ahead log.
const (
	memTableSize     = 32 << 20 // Badger default 64 MiB
	numMemtables     = 3        // default 5
	blockCacheSize   = 0        // default 256 MiB; uncompressed tables are read through mmap and the page cache
	valueLogFileSize = 64 << 20 // default 1 GiB
	numCompactors    = 2        // default 4; this runs beside a mail server
)

// Write budgets per transaction, below Badger's limits for the memtable
// size above (15% of it, 4.8 MiB, and 4.8 MiB/96 ≈ 52,000 entries). One
// report (with its merges) stays within txnBudget*; bigger merges are
// drained first in several transactions. ReportBatch packs many reports
// into one transaction (one commit, one fsync) up to batchBudget*: a
// batch of 1,000 typical reports (~25,000 entries, ~1.2 MB) is one commit.
const (
	txnBudgetEntries   = 10000
	txnBudgetBytes     = 1 << 20
	batchBudgetEntries = 40000
	batchBudgetBytes   = 3 << 20
)

// Options configure the Badger store. Zero values select defaults.
type Options struct {
	// Expiry is how long a campaign lives without hits or reports; a
	// background loop calls Expire(now-Expiry) every ExpiryInterval.
	// Default 30 days; negative disables the loop.
	Expiry time.Duration
	// ExpiryInterval is the period of the expiry loop. Default 1 hour.
	ExpiryInterval time.Duration
	// GCInterval is the period of the value-log garbage collection.
	// Default 10 minutes; negative disables it.
	GCInterval time.Duration
	// HitFlushInterval is how long RecordHit counts are buffered in memory
	// before being written in one transaction. Default 1 second.
	HitFlushInterval time.Duration
	// MaxSketches is how many similarity sketches a campaign keeps. Default 8.
	MaxSketches int
	// MaxHamSenders bounds the ham table (senders.go): how many sender
	// domains of accepted messages are counted. Default
	// DefaultMaxHamSenders.
	MaxHamSenders int
	// MaxHamLists bounds the list table (senders.go): how many mailing
	// lists of accepted messages are counted. Default DefaultMaxHamLists.
	MaxHamLists int
	// MaxCampaignSenders bounds the sender domains a campaign keeps.
	// Default DefaultMaxCampaignSenders.
	MaxCampaignSenders int
	// ReadOnly opens the store read-only (no background loops; writes fail
	// with ErrReadOnly). Another process may not hold the store open
	// read-write at the same time. A store left by a crash is first
	// recovered (its write-ahead log replayed) by a short read-write open.
	ReadOnly bool
	// InMemory keeps everything in memory (tests only); dir is ignored.
	InMemory bool
	// NoSyncWrites turns off fsync on every commit. By default (false)
	// every acknowledged report is on disk and survives a crash.
	NoSyncWrites bool
	// Logger receives Badger's warnings and errors and the store's own
	// messages. Default slog.Default().
	Logger *slog.Logger
	// MinFreeBytes is the free space the store's filesystem must keep:
	// below it writes fail with ErrDiskFull (reads go on) until space
	// returns, Open opens the store read-only (also without room to
	// replay the write-ahead logs it finds), and Close leaves the
	// memtables in the write-ahead log instead of flushing them. Default
	// DefaultMinFreeBytes (256 MiB); negative turns the guard (and the
	// write-ahead log's preallocation) off.
	MinFreeBytes int64
	// HourRetention is how long the hourly series of campaigns and the
	// hourly totals are kept. Default 7 days; at least 25 hours (the day
	// ranking's window).
	HourRetention time.Duration
	// Now is the clock of the hourly series and rankings. Default
	// time.Now; tests inject one.
	Now func() time.Time
	// FreeSpace measures the free bytes of the filesystem holding a
	// directory. Default: statfs (blocks available to unprivileged
	// users). Tests inject a function here.
	FreeSpace func(dir string) (int64, error)
}

func (o Options) withDefaults() Options {
	if o.Expiry == 0 {
		o.Expiry = DefaultExpiry
	}
	if o.ExpiryInterval <= 0 {
		o.ExpiryInterval = DefaultExpiryInterval
	}
	if o.GCInterval == 0 {
		o.GCInterval = DefaultGCInterval
	}
	if o.HitFlushInterval <= 0 {
		o.HitFlushInterval = DefaultHitFlushInterval
	}
	if o.MaxSketches <= 0 {
		o.MaxSketches = DefaultMaxSketches
	}
	if o.MaxHamLists <= 0 {
		o.MaxHamLists = DefaultMaxHamLists
	}
	if o.MaxHamSenders <= 0 {
		o.MaxHamSenders = DefaultMaxHamSenders
	}
	if o.MaxCampaignSenders <= 0 {
		o.MaxCampaignSenders = DefaultMaxCampaignSenders
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.HourRetention == 0 {
		o.HourRetention = DefaultHourRetention
	}
	o.HourRetention = max(o.HourRetention, RankDayHours*time.Hour)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = DefaultMinFreeBytes
	}
	return o
}

// ErrReadOnly is returned by writes on a store opened read-only.
var ErrReadOnly = errors.New("store is open read-only")

// ErrClosed is returned by calls on a closed store.
var ErrClosed = errors.New("store is closed")

// ErrLocked is wrapped by the error of Open when another process holds the
// store's directory lock (Badger allows one read-write process at a time):
// most likely a running daemon.
var ErrLocked = errors.New("store is locked by another process")

// isLockError tells whether err is Badger's failure to take the directory
// lock. Badger formats the flock error into its message instead of
// wrapping it, so the message is all there is to recognize.
func isLockError(err error) bool {
	return errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) ||
		strings.Contains(err.Error(), "Cannot acquire directory lock")
}

// lockHolder names the process that holds the store, from the pid Badger
// writes into its LOCK file: " (pid N)", or "" when unknown.
func lockHolder(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "LOCK"))
	if err != nil {
		return ""
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return ""
	}
	return fmt.Sprintf(" (pid %d, most likely a running nddmilter serve)", pid)
}

// Badger is the Badger-backed Store. It is safe for concurrent use.
type Badger struct {
	dir  string
	db   *badger.DB
	opts Options
	log  *slog.Logger

	seqMu sync.Mutex
	seq   *badger.Sequence

	hitMu  sync.Mutex
	hits   map[CampaignID]*pendingHit
	checks map[uint32]*HourTotal // RecordCheck's, by hour
	ham    *hamTable             // sender domains of accepted messages (senders.go)
	lists  *hamTable             // mailing lists of accepted messages (senders.go)
	// senders are the campaigns' sender domains counted since the last
	// flush (RecordSender), under hitMu.
	senders map[CampaignID]map[string]int64
	// grayHeld are the campaigns' copies held back as graymail counted
	// since the last flush (senders.go).
	grayHeld map[CampaignID]int64

	// deltaKeys names the counter deltas (counts.go); foldMu serializes
	// their folding, hourlyMu the hourly re-ranking and pruning.
	deltaKeys  deltaKeys
	foldMu     sync.Mutex
	hourlyMu   sync.Mutex
	lastHourly uint32

	closeOnce sync.Once
	closed    chan struct{}
	keys      keyIndex        // of the signature keys (keyindex.go)
	bgCtx     context.Context // cancelled by Close: stops background work
	bgCancel  context.CancelFunc
	wg        sync.WaitGroup

	// disk refuses writes when the filesystem runs low (nil: in memory
	// or turned off); roErr, when set, is why a store asked to be
	// writable was opened read-only.
	disk  *diskGuard
	roErr error
}

var _ Store = (*Badger)(nil)

// badgerOptions returns the tuned Badger options for dir.
func badgerOptions(dir string, opts Options) badger.Options {
	bo := badger.DefaultOptions(dir).
		WithLogger(slogAdapter{opts.Logger}).
		WithMetricsEnabled(false).
		WithSyncWrites(!opts.NoSyncWrites).
		WithReadOnly(opts.ReadOnly).
		WithInMemory(opts.InMemory).
		WithMemTableSize(memTableSize).
		WithNumMemtables(numMemtables).
		WithBlockCacheSize(blockCacheSize).
		WithValueLogFileSize(valueLogFileSize).
		WithNumCompactors(numCompactors).
		WithNumGoroutines(2).
		WithCompression(options.None)
	if opts.InMemory {
		bo = bo.WithDir("").WithValueDir("")
	}
	return bo
}

// Open opens (creating if needed) the store in dir. It checks the schema
// version and starts the background loops (hit flushing, expiry, value-log
// GC) unless opts.ReadOnly.
func Open(dir string, opts Options) (*Badger, error) {
	opts = opts.withDefaults()
	disk := newDiskGuard(dir, opts)
	var roErr error
	if !opts.ReadOnly && disk != nil {
		if _, err := os.Stat(dir); err == nil {
			err := disk.check()
			if free, ok := disk.freeNow(); err == nil && ok {
				// A read-write open replays the write-ahead logs left by
				// a crash or a Close on a full disk and flushes them.
				if need := walFlushNeed(dir); free < need {
					err = fmt.Errorf("%w (%s: %d bytes free, replaying the write-ahead log needs %d)", ErrDiskFull, dir, free, need)
				}
			}
			if err != nil {
				// Opening read-write could already fault on a full disk
				// (Badger writes new log files through memory maps):
				// serve what is there read-only, refuse writes.
				roErr = fmt.Errorf("%w; opened read-only: restart once space is freed: %w", err, ErrReadOnly)
				opts.Logger.Warn("store: disk nearly full at start: opening read-only; reports are refused until a restart with free space, mail checks go on", "err", err)
				opts.ReadOnly = true
			}
		}
	}
	if opts.ReadOnly && !opts.InMemory {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("no store to open read-only: %w", err)
		}
		// Write-ahead logs left by a crash or by a Close on a full disk
		// are replayed in memory by the read-only open once trimmed to
		// their entries: no space needed.
		if err := trimWALs(dir, opts.Logger); err != nil {
			opts.Logger.Warn("store: write-ahead logs not trimmed for the read-only open", "dir", dir, "err", err)
		}
	}
	db, err := badger.Open(badgerOptions(dir, opts))
	if err != nil && opts.ReadOnly && (errors.Is(err, badger.ErrTruncateNeeded) ||
		strings.Contains(err.Error(), badger.ErrTruncateNeeded.Error())) { // badger's y.Wrapf does not wrap
		if derr := disk.check(); derr != nil {
			// Recovery writes: it needs the space.
			return nil, fmt.Errorf("store %s was not closed cleanly and its recovery needs free disk space: %w", dir, derr)
		}
		// The store was not closed cleanly (crash, kill -9): its
		// write-ahead log must be replayed and trimmed, which a read-only
		// open cannot do. Recover it with a short read-write open (as
		// the daemon would on start), then open it read-only.
		opts.Logger.Warn("store: recovering a store that was not closed cleanly", "dir", dir)
		rw := opts
		rw.ReadOnly = false
		if rdb, rerr := badger.Open(badgerOptions(dir, rw)); rerr == nil {
			if cerr := rdb.Close(); cerr != nil {
				return nil, fmt.Errorf("recover store %s: %w", dir, cerr)
			}
			db, err = badger.Open(badgerOptions(dir, opts))
		}
	}
	if err != nil {
		if isLockError(err) {
			return nil, fmt.Errorf("store %s: %w%s: stop it first, or give this process another store directory",
				dir, ErrLocked, lockHolder(dir))
		}
		return nil, fmt.Errorf("open badger in %s: %w", dir, err)
	}
	if err := checkSchema(db, opts.ReadOnly, opts.Logger); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	b := &Badger{
		dir:      dir,
		db:       db,
		opts:     opts,
		log:      opts.Logger,
		hits:     make(map[CampaignID]*pendingHit),
		checks:   make(map[uint32]*HourTotal),
		ham:      newHamTable(opts.MaxHamSenders),
		lists:    newHamTable(opts.MaxHamLists),
		senders:  make(map[CampaignID]map[string]int64),
		grayHeld: make(map[CampaignID]int64),
		closed:   make(chan struct{}),
		disk:     disk,
		roErr:    roErr,
	}
	b.deltaKeys.nonce = uint64(time.Now().UnixNano())
	if err := b.loadHamTable(); err != nil {
		b.log.Warn("store: ham senders not loaded; counting them afresh", "err", err)
	}
	if err := b.loadCounts(pfxHamList, b.lists, validListID); err != nil {
		b.log.Warn("store: ham lists not loaded; counting them afresh", "err", err)
	}
	if err := b.openKeyIndex(); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	b.bgCtx, b.bgCancel = context.WithCancel(context.Background())
	if !opts.ReadOnly {
		disk.startWAL()
		b.startLoops()
	}
	return b, nil
}

// Close flushes buffered hits, stops the background loops and closes the
// database. It is safe to call more than once.
//
// Closing writes: Badger flushes its memtables to new table files
// through memory maps, and a page of such a file that gets no disk block
// kills the process with SIGBUS. So when the store's filesystem has less
// free space than that flush may need (closeRoom), Close writes nothing:
// it syncs the write-ahead logs, which hold every acknowledged write and
// are replayed by the next Open (read-only too), leaves the database to
// the end of the process (its directory lock too: this process cannot
// open the store again), and returns an error wrapping ErrDiskFull.
func (b *Badger) Close() error {
	var err error
	b.closeOnce.Do(func() {
		close(b.closed)
		b.bgCancel()
		b.wg.Wait()
		if !b.opts.ReadOnly {
			if rerr := b.closeRoom(); rerr != nil {
				err = rerr
				if serr := syncWALs(b.dir); serr != nil {
					err = errors.Join(err, serr)
				}
				b.log.Warn("store: disk full at close: memtables not flushed; "+
					"the write-ahead log holds every acknowledged write and is replayed at the next start "+
					"(buffered hit counts are dropped)", "dir", b.dir, "err", rerr)
				return
			}
			if ferr := b.flushHits(); ferr != nil {
				err = errors.Join(err, ferr)
			}
			if ferr := b.foldCounters(context.Background()); ferr != nil {
				err = errors.Join(err, ferr)
			}
		}
		b.seqMu.Lock()
		if b.seq != nil {
			if rerr := b.seq.Release(); rerr != nil {
				err = errors.Join(err, fmt.Errorf("release id sequence: %w", rerr))
			}
			b.seq = nil
		}
		b.seqMu.Unlock()
		if !b.opts.ReadOnly && err == nil {
			// The store's last write: the key index of this state, for
			// the next Open.
			if cerr := b.writeCheckpoint(); cerr != nil {
				b.log.Warn("store: key index checkpoint not written; the next start rebuilds the index", "err", cerr)
			}
		}
		if cerr := b.db.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close badger: %w", cerr))
		}
	})
	return err
}

// closeSlack is free space Close keeps beyond the write-ahead logs'
// size: the last writes (hits, counters, the id sequence), the tables'
// indexes and filters, the manifest, filesystem metadata.
const closeSlack = 4 << 20

// closeRoom returns nil when the store's filesystem has room for Close's
// writes: the memtables flushed as tables (walFlushNeed), and the
// reserve below which the disk guard refuses writes
// (store.min_free_bytes: compactions the flush may start write tables
// too). Otherwise an error wrapping ErrDiskFull. Unknown free space (no
// guard, statfs failing) allows the close.
func (b *Badger) closeRoom() error {
	if b.opts.InMemory {
		return nil
	}
	free, ok := b.disk.freeNow()
	if !ok {
		return nil
	}
	need := max(b.disk.min, walFlushNeed(b.dir))
	if free >= need {
		return nil
	}
	return fmt.Errorf("%w (%s: %d bytes free, a clean close needs %d): memtables left in the write-ahead log for the next start",
		ErrDiskFull, b.dir, free, need)
}

func (b *Badger) now() time.Time { return b.opts.Now() }

func (b *Badger) isClosed() bool {
	select {
	case <-b.closed:
		return true
	default:
		return false
	}
}

func (b *Badger) writable() error {
	if b.isClosed() {
		return ErrClosed
	}
	if b.opts.ReadOnly {
		return b.readOnlyErr()
	}
	return nil
}

// readOnlyErr is the error of a write on a read-only store: ErrReadOnly,
// also ErrDiskFull when a full disk made it read-only.
func (b *Badger) readOnlyErr() error {
	if b.roErr != nil {
		return b.roErr
	}
	return ErrReadOnly
}

// DiskState returns the free bytes of the store's filesystem (-1:
// unknown or in memory), whether writes are refused for lack of space,
// and how many were refused since Open.
func (b *Badger) DiskState() (free int64, full bool, refused int64) {
	free, full, refused = b.disk.state()
	return free, full || b.roErr != nil, refused
}

// idLease is how many campaign ids the Badger sequence leases at a time.
// Each lease is a synced commit of its own, so a small lease costs bulk
// ingestion an fsync every few campaigns; a crash skips at most
// idLease-1 ids (of 2^64).
const idLease = 4096

// nextID returns a new campaign id. IDs come from a Badger sequence leased
// idLease at a time: a crash loses at most the unused rest of a lease, ids
// are never reused.
func (b *Badger) nextID() (CampaignID, error) {
	b.seqMu.Lock()
	defer b.seqMu.Unlock()
	if b.seq == nil {
		seq, err := b.db.GetSequence([]byte{pfxSeq}, idLease)
		if err != nil {
			return 0, fmt.Errorf("campaign id sequence: %w", err)
		}
		b.seq = seq
	}
	for {
		n, err := b.seq.Next()
		if err != nil {
			return 0, fmt.Errorf("next campaign id: %w", err)
		}
		if n != 0 {
			return CampaignID(n), nil
		}
	}
}

func (b *Badger) startLoops() {
	b.loop("hit flush", b.opts.HitFlushInterval, func() {
		if err := b.flushHits(); err != nil {
			b.log.Warn("store: flushing hit counters", "err", err)
		}
		if err := b.foldCounters(b.bgCtx); err != nil && b.bgCtx.Err() == nil {
			b.log.Warn("store: folding counters", "err", err)
		}
		if err := b.hourly(b.bgCtx); err != nil && b.bgCtx.Err() == nil {
			b.log.Warn("store: hourly rankings", "err", err)
		}
	})
	if b.opts.Expiry > 0 {
		b.loop("expiry", b.opts.ExpiryInterval, func() {
			n, err := b.Expire(b.bgCtx, time.Now().Add(-b.opts.Expiry))
			if err != nil && b.bgCtx.Err() == nil {
				b.log.Warn("store: expiring campaigns", "err", err)
			} else if n > 0 {
				b.log.Info("store: expired campaigns", "count", n)
			}
		})
	}
	if b.opts.GCInterval > 0 && !b.opts.InMemory {
		b.loop("value-log gc", b.opts.GCInterval, func() { b.runGC() })
	}
}

func (b *Badger) loop(name string, every time.Duration, f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-b.closed:
				return
			case <-t.C:
				f()
			}
		}
	}()
}

// runGC rewrites value-log files until Badger finds nothing worth
// rewriting.
func (b *Badger) runGC() int {
	n := 0
	for !b.isClosed() && b.disk.check() == nil {
		err := b.db.RunValueLogGC(0.5)
		if err != nil {
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				b.log.Warn("store: value-log gc", "err", err)
			}
			break
		}
		n++
	}
	return n
}

// diskUsage returns the bytes allocated on disk by the store's files
// (preallocated, sparse log files count only the blocks they use).
func (b *Badger) diskUsage() int64 {
	if b.opts.InMemory {
		return 0
	}
	var n int64
	_ = filepath.WalkDir(b.dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// slogAdapter passes Badger's warnings and errors to slog; its info and
// debug chatter goes to slog's debug level.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Errorf(f string, v ...any) {
	a.l.Error("badger: " + trimNL(fmt.Sprintf(f, v...)))
}
func (a slogAdapter) Warningf(f string, v ...any) {
	msg := trimNL(fmt.Sprintf(f, v...))
	if strings.Contains(msg, "Unable to fill tables") {
		// A compaction that found nothing to do, typically while
		// Flatten runs: harmless.
		a.l.Debug("badger: " + msg)
		return
	}
	a.l.Warn("badger: " + msg)
}
func (a slogAdapter) Infof(f string, v ...any) {
	a.l.Debug("badger: " + trimNL(fmt.Sprintf(f, v...)))
}
func (a slogAdapter) Debugf(f string, v ...any) {
	a.l.Debug("badger: " + trimNL(fmt.Sprintf(f, v...)))
}

func trimNL(s string) string {
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	return s
}
