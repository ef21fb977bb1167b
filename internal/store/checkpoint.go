package store

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
)

// The key index checkpoint: the table of the key index (keytable.go) as
// a clean Close leaves it, in the file keyindex.ckpt beside Badger's, so
// that the next Open loads it instead of scanning every key list.
//
// It is written last: Close first writes a random token into the store
// ('m' "keyckpt"), then the file with that token and the store's
// highest Badger version (every commit raises it). Open uses the file
// only when both still match, so the store has not changed since — a
// crash after later writes, a repair, anything — and when its checksum
// and every length are right; else it rebuilds the table from the key
// lists. The file is written to a temporary name, synced and renamed.
//
// Layout (little-endian): magic, format version (u32), the fingerprint
// secret (16 bytes), the token (16), the Badger version (u64), the shard
// count (u32), then per shard its bits (u8), entries (u32) and slots
// (three u32 each); a CRC-32C of all that ends the file.

const (
	checkpointFile    = "keyindex.ckpt"
	checkpointMagic   = "nddmilter key index\n"
	checkpointVersion = 1
)

var metaCheckpointKey = []byte{pfxMeta, 'k', 'e', 'y', 'c', 'k', 'p', 't'}

// errNoCheckpoint says that the store has no checkpoint file.
var errNoCheckpoint = errors.New("no key index checkpoint")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// writeCheckpoint writes the key index checkpoint of the store as it is
// now; no write may follow before Close.
func (b *Badger) writeCheckpoint() error {
	if b.opts.InMemory || b.opts.ReadOnly {
		return nil
	}
	path := filepath.Join(b.dir, checkpointFile)
	// No key list changes while the token, the version and the table are
	// taken (a write that commits later makes the checkpoint stale, and
	// unused).
	b.keys.mu.Lock()
	defer b.keys.mu.Unlock()
	t := b.keys.table()
	if b.keys.broken.Load() || t == nil {
		os.Remove(path)
		return errors.New("the key index may differ from the key lists")
	}
	size := int64(64)
	for i := range t.shards {
		size += 5 + int64(len(t.shards[i].slots))*12
	}
	if free, ok := b.disk.freeNow(); ok && free-size < b.disk.min {
		os.Remove(path)
		return fmt.Errorf("%w: %d bytes free, the checkpoint needs %d above the reserve", ErrDiskFull, free, size)
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return err
	}
	if err := b.db.Update(func(txn *badger.Txn) error { return txn.Set(metaCheckpointKey, token) }); err != nil {
		return fmt.Errorf("write the checkpoint token: %w", err)
	}
	version := b.db.MaxVersion()
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	crc := crc32.New(crcTable)
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
	head := append([]byte(checkpointMagic), make([]byte, 0, 48)...)
	head = binary.LittleEndian.AppendUint32(head, checkpointVersion)
	head = binary.LittleEndian.AppendUint64(head, t.k0)
	head = binary.LittleEndian.AppendUint64(head, t.k1)
	head = append(head, token...)
	head = binary.LittleEndian.AppendUint64(head, version)
	head = binary.LittleEndian.AppendUint32(head, uint32(len(t.shards)))
	w.Write(head)
	var buf [12]byte
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		w.WriteByte(s.bits)
		binary.LittleEndian.PutUint32(buf[:4], uint32(s.n))
		w.Write(buf[:4])
		for _, e := range s.slots {
			binary.LittleEndian.PutUint32(buf[0:], e.a)
			binary.LittleEndian.PutUint32(buf[4:], e.b)
			binary.LittleEndian.PutUint32(buf[8:], e.c)
			w.Write(buf[:])
		}
		s.mu.RUnlock()
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(b.dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// loadCheckpoint returns the key index of the store's checkpoint when it
// is the store's present state and intact (errNoCheckpoint: there is
// none).
func (b *Badger) loadCheckpoint(k0, k1 uint64) (*keyTable, error) {
	f, err := os.Open(filepath.Join(b.dir, checkpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoCheckpoint
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var token []byte
	err = b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(metaCheckpointKey)
		if err != nil {
			return err
		}
		token, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, errors.New("the store has no checkpoint token")
	}
	if err != nil {
		return nil, err
	}
	crc := crc32.New(crcTable)
	r := &checkedReader{r: bufio.NewReaderSize(f, 1<<20), crc: crc}
	head := make([]byte, len(checkpointMagic)+4+16+16+8+4)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, fmt.Errorf("checkpoint header: %w", err)
	}
	if string(head[:len(checkpointMagic)]) != checkpointMagic {
		return nil, errors.New("not a key index checkpoint")
	}
	h := head[len(checkpointMagic):]
	if v := binary.LittleEndian.Uint32(h); v != checkpointVersion {
		return nil, fmt.Errorf("checkpoint format %d, want %d", v, checkpointVersion)
	}
	if binary.LittleEndian.Uint64(h[4:]) != k0 || binary.LittleEndian.Uint64(h[12:]) != k1 {
		return nil, errors.New("the checkpoint is of another store (seed)")
	}
	if !bytes.Equal(h[20:36], token) || binary.LittleEndian.Uint64(h[36:]) != b.db.MaxVersion() {
		return nil, errors.New("the store changed since the checkpoint")
	}
	shards := binary.LittleEndian.Uint32(h[44:])
	if shards < 1 || shards > maxShards {
		return nil, fmt.Errorf("checkpoint: %d shards", shards)
	}
	t := &keyTable{k0: k0, k1: k1, shards: make([]tableShard, shards)}
	t.releaseWhenUnreachable()
	buf := make([]byte, 12*4096)
	var a slotArena
	defer a.finish()
	for i := range t.shards {
		var sh [5]byte
		if _, err := io.ReadFull(r, sh[:]); err != nil {
			return nil, fmt.Errorf("checkpoint shard %d: %w", i, err)
		}
		s := &t.shards[i]
		s.bits, s.n = sh[0], int(binary.LittleEndian.Uint32(sh[1:]))
		if s.bits < minShardBits || s.bits > 34 || s.n > 1<<s.bits {
			return nil, fmt.Errorf("checkpoint shard %d: %d bits, %d entries", i, s.bits, s.n)
		}
		s.slots, s.mapped = a.alloc(1 << s.bits)
		for j := 0; j < len(s.slots); {
			m := min(len(buf)/12, len(s.slots)-j)
			if _, err := io.ReadFull(r, buf[:12*m]); err != nil {
				return nil, fmt.Errorf("checkpoint shard %d: %w", i, err)
			}
			for k := range m {
				e := buf[12*k:]
				s.slots[j+k] = slot{binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:]), binary.LittleEndian.Uint32(e[8:])}
			}
			j += m
		}
	}
	sum := crc.Sum32()
	var tail [4]byte
	if _, err := io.ReadFull(r.r, tail[:]); err != nil {
		return nil, fmt.Errorf("checkpoint checksum: %w", err)
	}
	if binary.LittleEndian.Uint32(tail[:]) != sum {
		return nil, errors.New("checkpoint checksum mismatch")
	}
	if n, _ := r.r.Read(tail[:1]); n != 0 {
		return nil, errors.New("checkpoint: bytes after the checksum")
	}
	// The entries must agree with the counts: a shard whose count is off
	// would grow at the wrong time, and a wrong slot could hide others.
	for i := range t.shards {
		s := &t.shards[i]
		n := 0
		for _, e := range s.slots {
			if !e.empty() {
				n++
			}
		}
		if n != s.n {
			return nil, fmt.Errorf("checkpoint shard %d: %d entries, counted %d", i, s.n, n)
		}
	}
	return t, nil
}

// checkedReader passes r through while hashing what it reads.
type checkedReader struct {
	r   *bufio.Reader
	crc hash.Hash32
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.crc.Write(p[:n])
	return n, err
}
