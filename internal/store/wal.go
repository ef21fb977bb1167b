package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Badger's write-ahead log (the .mem files of its memtables) as Badger
// v4 writes and replays it (memtable.go, value.go: logFile.iterate): a
// 20-byte header (an encryption key id, 0 without encryption, and an
// IV), then entries: meta and user-meta bytes, the key length, value
// length and expiry as uvarints, the key, the value and a big-endian
// CRC-32C of all that. Entries of a transaction carry walBitTxn and are
// followed by an entry with walBitFinTxn whose value is the commit
// timestamp in decimal. A file is created sparse at twice the memtable
// size and written through a memory map; after a crash it keeps that
// size, its log followed by zeros.
const (
	walExt        = ".mem"
	walHeaderSize = 20
	walBitTxn     = 1 << 6
	walBitFinTxn  = 1 << 7
	walMaxKeyLen  = 1 << 16
)

var walCRC = crc32.MakeTable(crc32.Castagnoli)

// errWALEncrypted says a log's key id is set: not a store of this
// program (it never enables Badger's encryption).
var errWALEncrypted = errors.New("write-ahead log is encrypted")

// walValidEnd returns the end of the last complete entry or transaction
// of the Badger write-ahead log in r (size bytes): where Badger's replay
// stops, and the size its read-write recovery truncates the file to.
func walValidEnd(r io.ReaderAt, size int64) (int64, error) {
	if size < walHeaderSize {
		return 0, fmt.Errorf("write-ahead log of %d bytes, shorter than its header", size)
	}
	var hdr [walHeaderSize]byte
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return 0, fmt.Errorf("read write-ahead log header: %w", err)
	}
	if binary.BigEndian.Uint64(hdr[:8]) != 0 {
		return 0, errWALEncrypted
	}
	br := bufio.NewReaderSize(io.NewSectionReader(r, walHeaderSize, size-walHeaderSize), 1<<16)
	off, valid := int64(walHeaderSize), int64(walHeaderSize)
	var lastCommit uint64
	var buf []byte
	for {
		n, meta, key, val, ok := walEntry(br, size-off, &buf)
		if !ok || len(key) == 0 {
			return valid, nil
		}
		off += n
		switch {
		case meta&walBitTxn != 0:
			ts := walKeyTs(key)
			if lastCommit == 0 {
				lastCommit = ts
			}
			if lastCommit != ts {
				return valid, nil
			}
		case meta&walBitFinTxn != 0:
			ts, err := strconv.ParseUint(string(val), 10, 64)
			if err != nil || ts != lastCommit {
				return valid, nil
			}
			lastCommit = 0
			valid = off
		default:
			if lastCommit != 0 {
				return valid, nil
			}
			valid = off
		}
	}
}

// walEntry reads one entry of at most left bytes: its length, meta byte,
// key and value (in *buf, valid until the next call), and false when no
// whole entry with a matching checksum is there.
func walEntry(br *bufio.Reader, left int64, buf *[]byte) (n int64, meta byte, key, val []byte, ok bool) {
	h := crc32.New(walCRC)
	var head [2 + 3*binary.MaxVarintLen64]byte
	hl := 0
	for i := 0; i < 2; i++ {
		c, err := br.ReadByte()
		if err != nil {
			return 0, 0, nil, nil, false
		}
		head[hl] = c
		hl++
	}
	var lens [3]uint64
	for i := range lens {
		start := hl
		for {
			c, err := br.ReadByte()
			if err != nil || hl-start >= binary.MaxVarintLen64 {
				return 0, 0, nil, nil, false
			}
			head[hl] = c
			hl++
			if c < 0x80 {
				break
			}
		}
		v, m := binary.Uvarint(head[start:hl])
		if m <= 0 {
			return 0, 0, nil, nil, false
		}
		lens[i] = v
	}
	klen, vlen := lens[0], lens[1]
	if klen > walMaxKeyLen || vlen > uint64(left) || int64(hl)+int64(klen)+int64(vlen)+4 > left {
		return 0, 0, nil, nil, false
	}
	need := int(klen + vlen + 4)
	if cap(*buf) < need {
		*buf = make([]byte, need)
	}
	b := (*buf)[:need]
	if _, err := io.ReadFull(br, b); err != nil {
		return 0, 0, nil, nil, false
	}
	h.Write(head[:hl])
	h.Write(b[:klen+vlen])
	if h.Sum32() != binary.BigEndian.Uint32(b[klen+vlen:]) {
		return 0, 0, nil, nil, false
	}
	return int64(hl) + int64(need), head[0], b[:klen], b[klen : klen+vlen], true
}

// walKeyTs is the version of a Badger key (its last 8 bytes, inverted),
// 0 when the key is too short to have one (Badger's y.ParseTs).
func walKeyTs(key []byte) uint64 {
	if len(key) <= 8 {
		return 0
	}
	return math.MaxUint64 - binary.BigEndian.Uint64(key[len(key)-8:])
}

// zeroFrom reports whether every byte of f from off to size is zero,
// reading its data regions only (seekData): a pread of a hole allocates
// nothing, where a read fault of a memory map does on a tmpfs.
func zeroFrom(f *os.File, off, size int64) (bool, error) {
	buf := make([]byte, 1<<16)
	for off < size {
		data, end, more := seekData(f, off, size)
		if !more {
			return true, nil // only a hole is left
		}
		for p := data; p < end; {
			n := int(min(int64(len(buf)), end-p))
			if _, err := f.ReadAt(buf[:n], p); err != nil {
				return false, fmt.Errorf("read %s: %w", f.Name(), err)
			}
			for _, c := range buf[:n] {
				if c != 0 {
					return false, nil
				}
			}
			p += int64(n)
		}
		off = end
	}
	return true, nil
}

// trimWALs prepares a store left with write-ahead logs (by a crash, or
// by a Close that could not flush on a full disk) for a read-only open:
// Badger's read-only open refuses a log that is longer than its valid
// entries (ErrTruncateNeeded), and reading the zeros beyond them through
// its memory map faults with SIGBUS on a full tmpfs. Each log whose
// bytes after its last complete transaction are all zeros is truncated
// there (a log with no entry is removed), as Badger's own recovery would
// do, but without a read-write open that must write new files. A log
// with anything else after its valid end (a transaction torn by a crash)
// is left alone, for that recovery. It holds the directory's lock while
// it works; when another process holds it, it does nothing.
func trimWALs(dir string, log *slog.Logger) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open store directory: %w", err)
	}
	defer d.Close()
	unlock, ok := lockDir(d)
	if !ok {
		return nil // in use: Badger's open says by whom
	}
	defer unlock()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("list store directory: %w", err)
	}
	changed := false
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), walExt) {
			continue
		}
		c, err := trimWAL(filepath.Join(dir, e.Name()), log)
		if err != nil {
			return err
		}
		changed = changed || c
	}
	if changed {
		if err := d.Sync(); err != nil {
			return fmt.Errorf("sync store directory: %w", err)
		}
	}
	return nil
}

// trimWAL trims one log (trimWALs) and reports whether it changed it.
func trimWAL(path string, log *slog.Logger) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Errorf("open write-ahead log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat write-ahead log: %w", err)
	}
	size := fi.Size()
	if size < walHeaderSize {
		return false, nil // Badger's replay deals with it
	}
	end, err := walValidEnd(f, size)
	if err != nil {
		if errors.Is(err, errWALEncrypted) {
			return false, nil
		}
		return false, fmt.Errorf("%s: %w", path, err)
	}
	if end == size {
		return false, nil
	}
	zero, err := zeroFrom(f, end, size)
	if err != nil || !zero {
		if err == nil {
			log.Warn("store: a write-ahead log ends with a torn transaction; a read-write open recovers it", "file", path, "valid_bytes", end)
		}
		return false, err
	}
	if end == walHeaderSize {
		log.Info("store: removing an empty write-ahead log", "file", path)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("remove empty write-ahead log: %w", err)
		}
		return true, nil
	}
	log.Info("store: trimming a write-ahead log to its entries for a read-only open", "file", path, "bytes", end)
	if err := f.Truncate(end); err != nil {
		return false, fmt.Errorf("truncate write-ahead log %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return false, fmt.Errorf("sync write-ahead log %s: %w", path, err)
	}
	return true, nil
}

// walFlushNeed returns the free space flushing the memtables of the
// store's write-ahead logs takes: their entries written as tables (a
// table holds about what its log holds, with an index and a filter),
// plus closeSlack; 0 without logs.
func walFlushNeed(dir string) int64 {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+walExt))
	if err != nil || len(paths) == 0 {
		return 0
	}
	var n int64
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if fi, err := f.Stat(); err == nil {
			end, err := walValidEnd(f, fi.Size())
			if err != nil {
				end = fi.Size()
			}
			n += end
		}
		f.Close()
	}
	return n + n/4 + closeSlack
}

// walPreallocBytes is how much of a write-ahead log is preallocated:
// Badger starts a new memtable (and log) once its log reaches the
// memtable size, so a log holds at most that plus one transaction (at
// most 15% of the memtable size: Badger's batch limit). The rest of the
// file (created at twice the memtable size) stays sparse.
const walPreallocBytes = memTableSize + memTableSize/4

// walPrealloc preallocates Badger's write-ahead logs as Badger starts
// them (%05d.mem, each id one more than the last), so that writing into
// their memory maps never needs a new disk block.
type walPrealloc struct {
	dir  string
	log  *slog.Logger
	next int  // the id of the next log to preallocate
	off  bool // the filesystem cannot
}

// newWALPrealloc starts at the newest log of dir (Badger's active one
// after a read-write open).
func newWALPrealloc(dir string, log *slog.Logger) *walPrealloc {
	p := &walPrealloc{dir: dir, log: log}
	paths, _ := filepath.Glob(filepath.Join(dir, "*"+walExt))
	for _, path := range paths {
		if id, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(path), walExt)); err == nil && id > p.next {
			p.next = id
		}
	}
	return p
}

// run preallocates the logs started since the last run (the next one,
// or the one after it: a write rotates Badger's memtable at most once).
// An error (ENOSPC) leaves the log to the next run.
func (p *walPrealloc) run() error {
	if p == nil || p.off {
		return nil
	}
	for {
		id := p.next
		f, err := os.OpenFile(filepath.Join(p.dir, fmt.Sprintf("%05d%s", id, walExt)), os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			id++
			f, err = os.OpenFile(filepath.Join(p.dir, fmt.Sprintf("%05d%s", id, walExt)), os.O_RDWR, 0)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("open write-ahead log: %w", err)
		}
		err = preallocate(f, walPreallocBytes)
		f.Close()
		switch {
		case errors.Is(err, errUnsupported):
			p.off = true
			p.log.Info("store: this filesystem cannot preallocate the write-ahead log", "dir", p.dir)
			return nil
		case err != nil:
			return fmt.Errorf("preallocate write-ahead log %05d%s: %w", id, walExt, err)
		}
		p.next = id + 1
	}
}

// syncWALs fsyncs the store's write-ahead logs (their pages written
// through Badger's memory maps), for a Close that leaves them to the
// next start's replay.
func syncWALs(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list store directory: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), walExt) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("sync %s: %w", f.Name(), err))
		}
		f.Close()
	}
	return errors.Join(errs...)
}
