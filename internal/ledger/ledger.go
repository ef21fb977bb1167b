package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Options configure a Ledger. Zero values select the defaults.
type Options struct {
	// Window is how long an entry is kept. Default DefaultWindow (48 h).
	Window time.Duration
	// MaxBytes bounds the entries' bytes (keys and values); the oldest
	// entries go first when it is reached. Default DefaultMaxBytes.
	MaxBytes int64
	// MaxRcpts bounds the recipients kept per entry. Default 100.
	MaxRcpts int
	// MaxEvidence bounds an entry's evidence and signs; larger ones are not
	// recorded (counted as dropped). Default 64 KiB.
	MaxEvidence int
	// QueueLen bounds the deliveries waiting to be written; beyond it
	// Record drops (and counts). Default 4096.
	QueueLen int
	// FlushInterval is how long a delivery may wait to be written.
	// Default 200 ms.
	FlushInterval time.Duration
	// EvictInterval is how often the bounds are applied. Default 1 min.
	EvictInterval time.Duration
	// JobRetention is how long finished jobs are kept (what they moved
	// can be moved back that long). Default 30 days.
	JobRetention time.Duration
	// InMemory keeps nothing on disk (tests).
	InMemory bool
	// Clock is the time source. Default time.Now.
	Clock func() time.Time
	// Logger receives Badger's and the ledger's messages.
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultWindow   = 48 * time.Hour
	DefaultMaxBytes = 256 << 20
)

func (o Options) withDefaults() Options {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxRcpts <= 0 {
		o.MaxRcpts = DefaultMaxRcpts
	}
	if o.MaxEvidence <= 0 {
		o.MaxEvidence = 64 << 10
	}
	if o.QueueLen <= 0 {
		o.QueueLen = 4096
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 200 * time.Millisecond
	}
	if o.EvictInterval <= 0 {
		o.EvictInterval = time.Minute
	}
	if o.JobRetention <= 0 {
		o.JobRetention = 30 * 24 * time.Hour
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// ErrClosed is returned by the methods of a closed Ledger.
var ErrClosed = errors.New("ledger: closed")

// ErrLocked is wrapped by the error of Open when another process has the
// ledger open (Badger allows one process at a time): most likely the
// running daemon.
var ErrLocked = errors.New("ledger is locked by another process")

// isLockError tells whether err is Badger's failure to take the directory
// lock (Badger formats the flock error into its message).
func isLockError(err error) bool {
	return errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) ||
		strings.Contains(err.Error(), "Cannot acquire directory lock")
}

// Ledger is the delivery ledger. It is safe for concurrent use.
type Ledger struct {
	db   *badger.DB
	opts Options
	log  *slog.Logger

	queue   chan pending
	flushMu sync.Mutex // one writer of batches at a time
	seq     atomic.Uint64

	bytes   atomic.Int64 // entries' bytes (keys, values, index keys)
	entries atomic.Int64
	dropped atomic.Int64
	evicted atomic.Int64

	jobMu sync.Mutex // job state changes are read-modify-write

	stop   chan struct{}
	done   sync.WaitGroup
	closed atomic.Bool
}

type pending struct {
	key   Key
	value []byte
	id    string
}

// Open opens (creating) the ledger in dir and starts its writer and
// eviction loops.
func Open(dir string, o Options) (*Ledger, error) {
	o = o.withDefaults()
	bo := badger.DefaultOptions(dir).
		WithLogger(slogAdapter{o.Logger}).
		WithMetricsEnabled(false).
		WithSyncWrites(true).
		WithInMemory(o.InMemory).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(8 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2).
		WithNumGoroutines(1).
		WithCompression(options.None)
	if o.InMemory {
		bo = bo.WithDir("").WithValueDir("")
	}
	db, err := badger.Open(bo)
	if err != nil {
		if isLockError(err) {
			return nil, fmt.Errorf("open ledger %s: %w (%v)", dir, ErrLocked, err)
		}
		return nil, fmt.Errorf("open ledger %s: %w", dir, err)
	}
	l := &Ledger{db: db, opts: o, log: o.Logger, queue: make(chan pending, o.QueueLen), stop: make(chan struct{})}
	if err := l.count(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open ledger %s: %w", dir, err)
	}
	l.done.Add(1)
	go l.loop()
	return l, nil
}

// count sums the entries' bytes and finds the last sequence number.
func (l *Ledger) count() error {
	return l.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.PrefetchValues = false
		for _, p := range []byte{'e', 'x'} {
			io.Prefix = []byte{p}
			it := txn.NewIterator(io)
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				l.bytes.Add(int64(len(item.Key())) + item.ValueSize())
				if p == 'e' {
					l.entries.Add(1)
				}
			}
			it.Close()
		}
		return nil
	})
}

// Record queues a delivery to be written; it never waits. The ledger
// owns d's slices afterwards. A delivery that the queue has no room for,
// or whose evidence is larger than Options.MaxEvidence or empty, is
// dropped and counted.
func (l *Ledger) Record(d Delivery) {
	if l.closed.Load() || len(d.Evidence) == 0 || len(d.Evidence)+len(d.Signs) > l.opts.MaxEvidence {
		l.dropped.Add(1)
		return
	}
	if d.Time.IsZero() {
		d.Time = l.opts.Clock()
	}
	e := Entry{Delivery: d, Unpurgeable: CheckMessageID(d.MessageID)}
	if e.Unpurgeable != "" {
		e.MessageID = clip(e.MessageID, MaxMessageID)
	}
	p := pending{key: makeKey(d.Time, l.seq.Add(1)), id: e.MessageID}
	size := 64 + len(d.QueueID) + len(d.MessageID) + len(d.Evidence) + len(d.Signs)
	for _, r := range d.Rcpts[:min(len(d.Rcpts), l.opts.MaxRcpts)] {
		size += len(r) + 2
	}
	p.value = e.encode(make([]byte, 0, size), l.opts.MaxRcpts)
	select {
	case l.queue <- p:
	default:
		l.dropped.Add(1)
	}
}

func (l *Ledger) loop() {
	defer l.done.Done()
	flush := time.NewTicker(l.opts.FlushInterval)
	defer flush.Stop()
	evict := time.NewTicker(l.opts.EvictInterval)
	defer evict.Stop()
	for {
		select {
		case <-l.stop:
			if err := l.Flush(); err != nil {
				l.log.Error("ledger: write", "err", err)
			}
			return
		case <-flush.C:
			if err := l.Flush(); err != nil {
				l.log.Error("ledger: write", "err", err)
			}
		case <-evict.C:
			if _, err := l.Evict(); err != nil {
				l.log.Error("ledger: evict", "err", err)
			}
			if _, err := l.pruneJobs(); err != nil {
				l.log.Error("ledger: prune jobs", "err", err)
			}
		}
	}
}

// Flush writes the deliveries queued so far.
func (l *Ledger) Flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	var batch []pending
	for {
		select {
		case p := <-l.queue:
			batch = append(batch, p)
			continue
		default:
		}
		break
	}
	if len(batch) == 0 {
		return nil
	}
	wb := l.db.NewWriteBatch()
	defer wb.Cancel()
	var added int64
	for _, p := range batch {
		k := entryKey(p.key)
		if err := wb.Set(k, p.value); err != nil {
			return fmt.Errorf("ledger: write entry: %w", err)
		}
		added += int64(len(k) + len(p.value))
		if p.id != "" {
			x := indexKey(p.id, p.key)
			if err := wb.Set(x, nil); err != nil {
				return fmt.Errorf("ledger: write index: %w", err)
			}
			added += int64(len(x))
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("ledger: write %d entries: %w", len(batch), err)
	}
	l.bytes.Add(added)
	l.entries.Add(int64(len(batch)))
	return nil
}

func entryKey(k Key) []byte { return append([]byte{'e'}, k[:]...) }

func indexKey(id string, k Key) []byte {
	h := idHash(id)
	b := make([]byte, 0, 25)
	b = append(b, 'x')
	b = append(b, h[:]...)
	return append(b, k[:]...)
}

// Stats are the ledger's counts.
type Stats struct {
	Entries int64 // entries kept
	Bytes   int64 // their bytes, keys and index included
	Dropped int64 // deliveries not recorded (queue full, evidence too large or none, closed)
	Evicted int64 // entries removed by the window or the byte bound
	Queued  int   // deliveries waiting to be written
}

// Stats returns the ledger's counts.
func (l *Ledger) Stats() Stats {
	return Stats{Entries: l.entries.Load(), Bytes: l.bytes.Load(), Dropped: l.dropped.Load(),
		Evicted: l.evicted.Load(), Queued: len(l.queue)}
}

// Close writes what is queued and closes the database.
func (l *Ledger) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(l.stop)
	l.done.Wait()
	if err := l.db.Close(); err != nil {
		return fmt.Errorf("close ledger: %w", err)
	}
	return nil
}

// Scan calls fn with the entries from key after (exclusive; the zero Key
// starts at the first) in time order, until fn returns false or an error.
// The entry's slices are valid during the call only.
func (l *Ledger) Scan(ctx context.Context, after Key, fn func(Entry) (bool, error)) error {
	if l.closed.Load() {
		return ErrClosed
	}
	return l.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.Prefix = []byte{'e'}
		it := txn.NewIterator(io)
		defer it.Close()
		start := entryKey(after)
		for it.Seek(start); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			if string(item.Key()) == string(start) {
				continue
			}
			var k Key
			copy(k[:], item.Key()[1:])
			var e Entry
			err := item.Value(func(v []byte) error {
				var err error
				e, err = decodeEntry(k, v)
				if err != nil {
					return err
				}
				ok, err := fn(e)
				if err == nil && !ok {
					return errStop
				}
				return err
			})
			if errors.Is(err, errStop) {
				return nil
			}
			if errors.Is(err, errEntry) {
				l.log.Warn("ledger: undecodable entry skipped", "key", k.String(), "err", err)
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

var errStop = errors.New("stop")

// Get returns the entry of key (its slices are its own).
func (l *Ledger) Get(key Key) (Entry, error) {
	var e Entry
	err := l.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(entryKey(key))
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		e, err = decodeEntry(key, v)
		return err
	})
	if err != nil {
		return e, fmt.Errorf("ledger entry %s: %w", key, err)
	}
	return e, nil
}

// SameMessageID returns the keys of the entries recorded with Message-ID
// id (duplicates included), in time order.
func (l *Ledger) SameMessageID(id string) ([]Key, error) {
	var keys []Key
	err := l.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.PrefetchValues = false
		h := idHash(id)
		io.Prefix = append([]byte{'x'}, h[:]...)
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var k Key
			copy(k[:], it.Item().Key()[9:])
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: entries of a Message-ID: %w", err)
	}
	return keys, nil
}

// Evict removes the entries older than the window, then the oldest until
// the entries' bytes are within MaxBytes, and returns how many it removed.
func (l *Ledger) Evict() (int, error) {
	if l.closed.Load() {
		return 0, ErrClosed
	}
	cutoff := makeKey(l.opts.Clock().Add(-l.opts.Window), 0)
	var dels [][]byte
	var freed int64
	err := l.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.Prefix = []byte{'e'}
		io.PrefetchValues = false
		it := txn.NewIterator(io)
		defer it.Close()
		over := l.bytes.Load() - l.opts.MaxBytes
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.KeyCopy(nil)
			if string(k[1:]) >= string(cutoff[:]) && freed >= over {
				break
			}
			var key Key
			copy(key[:], k[1:])
			size := int64(len(k)) + item.ValueSize()
			err := item.Value(func(v []byte) error {
				e, err := decodeEntry(key, v)
				if err == nil && e.MessageID != "" {
					x := indexKey(e.MessageID, key)
					dels = append(dels, x)
					size += int64(len(x))
				}
				return nil
			})
			if err != nil {
				return err
			}
			dels = append(dels, k)
			freed += size
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("ledger: evict: %w", err)
	}
	if len(dels) == 0 {
		return 0, nil
	}
	wb := l.db.NewWriteBatch()
	defer wb.Cancel()
	n := 0
	for _, k := range dels {
		if k[0] == 'e' {
			n++
		}
		if err := wb.Delete(k); err != nil {
			return 0, fmt.Errorf("ledger: evict: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return 0, fmt.Errorf("ledger: evict: %w", err)
	}
	l.bytes.Add(-freed)
	l.entries.Add(-int64(n))
	l.evicted.Add(int64(n))
	return n, nil
}

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Errorf(f string, v ...any) { a.l.Error("ledger: badger: " + trim(f, v)) }
func (a slogAdapter) Warningf(f string, v ...any) {
	a.l.Warn("ledger: badger: " + trim(f, v))
}
func (a slogAdapter) Infof(f string, v ...any)  { a.l.Debug("ledger: badger: " + trim(f, v)) }
func (a slogAdapter) Debugf(f string, v ...any) { a.l.Debug("ledger: badger: " + trim(f, v)) }

func trim(f string, v []any) string { return strings.TrimRight(fmt.Sprintf(f, v...), "\n") }
