package store

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"
)

// Backup writes a full backup of the store to w (Badger's backup format:
// length-prefixed protobuf key-value lists) and returns the highest
// version it holds. The store stays usable meanwhile, and the backup is a
// consistent snapshot: everything is read in one transaction, at one read
// timestamp. (Badger's DB.Backup is not: its stream gives each of its
// goroutines a transaction of its own, so key ranges read by different
// goroutines can straddle a concurrent write; hence one goroutine here.)
func (b *Badger) Backup(ctx context.Context, w io.Writer) (uint64, error) {
	if b.isClosed() {
		return 0, ErrClosed
	}
	if !b.opts.ReadOnly {
		if err := b.flushHits(); err != nil {
			return 0, err
		}
	}
	stream := b.db.NewStream()
	stream.LogPrefix = "nddmilter backup"
	stream.NumGo = 1
	v, err := stream.Backup(w, 0)
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	return v, nil
}

// MaxBackupFrame bounds one frame of a backup file (a length-prefixed
// list of key-value pairs). Badger's streams write frames of a few MiB;
// a larger length means the file is not a backup (or is corrupt), and is
// refused before anything is allocated for it.
const MaxBackupFrame = 256 << 20

// ErrBadBackup marks a backup file that cannot be restored: not a backup
// (a compressed or unrelated file), truncated or corrupt.
var ErrBadBackup = errors.New("not a valid nddmilter backup")

// Restore loads a backup made by Backup into dir, which must not exist or
// be empty. The backup is loaded into a temporary directory next to dir
// (dir.tmp-*), each frame checked before Badger sees it, the result opened
// once to check its schema and verified; only then is it renamed to dir.
// A bad file (error wraps ErrBadBackup) or any other failure removes the
// temporary directory and leaves dir as it was, so a retry works. The
// returned VerifyResult tells the consistency of what was restored (a
// backup truncated exactly between two frames loads, but shows problems).
func Restore(ctx context.Context, dir string, r io.Reader, opts Options) (VerifyResult, error) {
	opts = opts.withDefaults()
	if opts.InMemory || opts.ReadOnly {
		return VerifyResult{}, errors.New("restore: needs a writable on-disk store")
	}
	dir = filepath.Clean(dir)
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return VerifyResult{}, fmt.Errorf("restore into %s: %w", dir, err)
	}
	if len(ents) > 0 {
		return VerifyResult{}, fmt.Errorf("restore into %s: directory is not empty", dir)
	}
	// Look at the header before creating anything.
	br := bufio.NewReaderSize(r, 1<<16)
	if err := checkBackupHeader(br); err != nil {
		return VerifyResult{}, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return VerifyResult{}, fmt.Errorf("restore: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return VerifyResult{}, fmt.Errorf("restore: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	if err := loadBackup(tmp, &frameChecker{r: br}, opts); err != nil {
		return VerifyResult{}, err
	}
	opts.Expiry = -1 // do not expire anything while checking
	opts.GCInterval = -1
	st, err := Open(tmp, opts)
	if err != nil {
		return VerifyResult{}, fmt.Errorf("restore: backup loaded, but: %w", err)
	}
	res, err := st.Verify(ctx, false)
	if cerr := st.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	// An empty dir (e.g. made by systemd's StateDirectory) is replaced.
	os.Remove(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	done = true
	return res, nil
}

// loadBackup loads r into a new Badger database in dir. Badger's Load
// panics on some malformed input; that becomes an error.
func loadBackup(dir string, r io.Reader, opts Options) (err error) {
	db, err := badger.Open(badgerOptions(dir, opts))
	if err != nil {
		return fmt.Errorf("restore: open badger in %s: %w", dir, err)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("restore: %w: load: %v", ErrBadBackup, p)
		}
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("restore: close: %w", cerr)
		}
	}()
	if err := db.Load(r, 256); err != nil {
		if !errors.Is(err, ErrBadBackup) {
			err = fmt.Errorf("%w: %w", ErrBadBackup, err)
		}
		return fmt.Errorf("restore: load backup: %w", err)
	}
	return nil
}

// checkBackupHeader refuses, with a reason, a file that cannot be a
// backup: empty, compressed, or whose first frame length is absurd.
func checkBackupHeader(br *bufio.Reader) error {
	head, err := br.Peek(8)
	switch {
	case len(head) == 0:
		return fmt.Errorf("restore: %w: the file is empty", ErrBadBackup)
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		return fmt.Errorf("restore: %w: the file is gzip-compressed (decompress it first: gunzip -c FILE | nddmilter store restore -)", ErrBadBackup)
	case len(head) >= 4 && string(head[:4]) == "\x28\xb5\x2f\xfd":
		return fmt.Errorf("restore: %w: the file is zstd-compressed (decompress it first: zstd -dc FILE | nddmilter store restore -)", ErrBadBackup)
	case len(head) >= 3 && string(head[:3]) == "BZh":
		return fmt.Errorf("restore: %w: the file is bzip2-compressed (decompress it first)", ErrBadBackup)
	case len(head) >= 6 && string(head[:6]) == "\xfd7zXZ":
		return fmt.Errorf("restore: %w: the file is xz-compressed (decompress it first)", ErrBadBackup)
	case len(head) < 8:
		return fmt.Errorf("restore: %w: the file is truncated (%d bytes)", ErrBadBackup, len(head))
	}
	if n := binary.LittleEndian.Uint64(head); n == 0 || n > MaxBackupFrame {
		return fmt.Errorf("restore: %w: the first frame claims %d bytes", ErrBadBackup, n)
	}
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

// frameChecker passes a backup stream through, checking each frame (its
// length bounded, its list decodable) before the reader sees it, so that
// Badger's Load never allocates for a garbage length.
type frameChecker struct {
	r     io.Reader
	buf   []byte // the checked frame not yet read
	frame int
	err   error
}

func (f *frameChecker) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.err = f.next()
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

// next reads and checks one frame into buf.
func (f *frameChecker) next() error {
	var hdr [8]byte
	if _, err := io.ReadFull(f.r, hdr[:]); err != nil {
		if err == io.EOF {
			if f.frame == 0 {
				return fmt.Errorf("%w: no data", ErrBadBackup)
			}
			return io.EOF
		}
		return fmt.Errorf("%w: frame %d: truncated length (%v)", ErrBadBackup, f.frame+1, err)
	}
	n := binary.LittleEndian.Uint64(hdr[:])
	if n > MaxBackupFrame {
		return fmt.Errorf("%w: frame %d claims %d bytes (at most %d)", ErrBadBackup, f.frame+1, n, MaxBackupFrame)
	}
	body := make([]byte, 8+int(n))
	copy(body, hdr[:])
	if _, err := io.ReadFull(f.r, body[8:]); err != nil {
		return fmt.Errorf("%w: frame %d truncated: %v", ErrBadBackup, f.frame+1, err)
	}
	var list pb.KVList
	if err := proto.Unmarshal(body[8:], &list); err != nil {
		return fmt.Errorf("%w: frame %d: %v", ErrBadBackup, f.frame+1, err)
	}
	f.frame++
	f.buf = body
	return nil
}

// CompactResult tells what Compact did.
type CompactResult struct {
	BytesBefore, BytesAfter int64
	GCRuns                  int // value-log files rewritten
}

// Compact flattens the LSM tree into one level (dropping deleted and
// overwritten entries) and garbage-collects the value log.
func (b *Badger) Compact(ctx context.Context) (CompactResult, error) {
	if err := b.writable(); err != nil {
		return CompactResult{}, err
	}
	if err := b.disk.check(); err != nil {
		return CompactResult{}, fmt.Errorf("compact: %w", err)
	}
	if err := b.flushHits(); err != nil {
		return CompactResult{}, err
	}
	var res CompactResult
	res.BytesBefore = b.diskUsage()
	if err := b.db.Flatten(2); err != nil {
		return res, fmt.Errorf("compact: flatten: %w", err)
	}
	res.GCRuns = b.runGC()
	res.BytesAfter = b.diskUsage()
	return res, nil
}

// VerifyResult counts what Verify found.
type VerifyResult struct {
	Campaigns, IndexKeys, KeyListEntries, Reporters, DayCounters int64

	BadRecords      int64 // campaign records that cannot be decoded
	DanglingIndex   int64 // index key → campaign that does not exist
	UnlistedIndex   int64 // index key → campaign that does not list it
	OrphanKeyList   int64 // key-list entry not backed by the index
	OrphanReporters int64 // reporter record of a missing campaign
	OrphanDays      int64 // day counter of a missing campaign
	ReporterIndex   int64 // reporters' index entries (by reporter) missing or without their reporter record
	CountMismatch   int64 // records whose key or reporter counts are wrong
	BadIndexEntries int64 // ranking index entries missing, stale or of a missing campaign
	CountersWrong   bool  // the store's counters differ from a recount of the records
	NoSchema        bool  // the schema version key is missing

	Repaired int64 // entries fixed with repair
}

// Problems is the number of inconsistencies found.
func (r VerifyResult) Problems() int64 {
	n := r.BadRecords + r.DanglingIndex + r.UnlistedIndex + r.OrphanKeyList +
		r.OrphanReporters + r.OrphanDays + r.CountMismatch + r.BadIndexEntries + r.ReporterIndex
	if r.NoSchema {
		n++
	}
	if r.CountersWrong {
		n++
	}
	return n
}

type verifyCounts struct {
	keys, spamRep, hamRep int64
	ix                    ixState // the record's index state
}

// verifyKeys checks the key lists (records in recs) and the key index
// (live: its entries when txn began, sorted by indexEntry.less): every
// chunk decodes and belongs to an existing campaign, no key is listed
// twice (by one campaign or by two), and the index holds exactly the
// listed keys. It counts the listed keys of each campaign in recs and
// returns the repairs of the lists (chunks rewritten without their
// orphan or repeated keys, or deleted); an index that differs from the
// lists is rebuilt by the repair.
func verifyKeys(ctx context.Context, txn *badger.Txn, t *keyTable, live []indexEntry, recs map[CampaignID]*verifyCounts, res *VerifyResult) ([]repairOp, error) {
	var (
		ops    []repairOp
		listed []indexEntry // of the keys kept
		hashes []uint64     // of the keys kept, to find those listed twice
	)
	res.IndexKeys = int64(len(live))
	// chunks calls f with each chunk of an existing campaign and its keys
	// (nil for an orphan chunk, which it counts and deletes).
	chunks := func(f func(ck []byte, id CampaignID, keys [][]byte) error) error {
		n := 0
		_, err := scanPrefix(txn, []byte{pfxKeyChunk}, true, 0, func(s, v []byte) error {
			ck := append([]byte{pfxKeyChunk}, s...)
			if len(s) != 16 {
				res.OrphanKeyList++
				ops = append(ops, repairOp{key: ck, del: true})
				return nil
			}
			id := CampaignID(binary.BigEndian.Uint64(s))
			keys, err := decodeKeyChunk(v)
			if recs[id] == nil || err != nil || id > maxSlotID {
				res.KeyListEntries += int64(len(keys))
				res.OrphanKeyList += max(int64(len(keys)), 1)
				ops = append(ops, repairOp{key: ck, del: true})
				return f(ck, id, nil)
			}
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			return f(ck, id, keys)
		})
		return err
	}
	err := chunks(func(_ []byte, id CampaignID, keys [][]byte) error {
		for _, k := range keys {
			hashes = append(hashes, t.hash(k))
		}
		return nil
	})
	if err != nil {
		return ops, err
	}
	// Keys whose hashes repeat may be listed twice: a second scan compares
	// them (the first listing, in campaign order, stays).
	slices.Sort(hashes)
	twice := make(map[uint64]struct{})
	for i := 1; i < len(hashes); i++ {
		if hashes[i] == hashes[i-1] {
			twice[hashes[i]] = struct{}{}
		}
	}
	hashes = nil
	ops = ops[:0]
	res.OrphanKeyList, res.KeyListEntries = 0, 0
	seen := make(map[string]struct{})
	err = chunks(func(ck []byte, id CampaignID, keys [][]byte) error {
		if keys == nil {
			return nil
		}
		vc := recs[id]
		kept := keys[:0:0]
		for _, k := range keys {
			res.KeyListEntries++
			h := t.hash(k)
			if _, maybe := twice[h]; maybe {
				if _, dup := seen[string(k)]; dup {
					res.OrphanKeyList++
					continue
				}
				seen[string(k)] = struct{}{}
			}
			kept = append(kept, k)
			vc.keys++
			listed = append(listed, t.entryOf(h, id))
		}
		switch {
		case len(kept) == 0:
			ops = append(ops, repairOp{key: ck, del: true})
		case len(kept) < len(keys):
			ops = append(ops, repairOp{key: ck, val: encodeKeyChunk(kept)})
		}
		return nil
	})
	if err != nil {
		return ops, err
	}
	// The index against the lists.
	slices.SortFunc(listed, indexEntry.compare)
	i, j := 0, 0
	for i < len(live) || j < len(listed) {
		switch {
		case j == len(listed) || i < len(live) && live[i].compare(listed[j]) < 0:
			res.DanglingIndex++
			i++
		case i == len(live) || live[i].compare(listed[j]) > 0:
			res.UnlistedIndex++
			j++
		default:
			i++
			j++
		}
	}
	return ops, nil
}

// indexEntry is a key index entry as verifyKeys compares them: the
// fingerprint's shard and in-shard bits, and the campaign.
type indexEntry struct {
	fp uint64
	id CampaignID
}

func (e indexEntry) compare(o indexEntry) int {
	if c := cmp.Compare(e.fp, o.fp); c != 0 {
		return c
	}
	return cmp.Compare(e.id, o.id)
}

// entryOf is the entry the index holds for a key of hash h listed by id.
func (t *keyTable) entryOf(h uint64, id CampaignID) indexEntry {
	i, _ := bits.Mul64(h, uint64(len(t.shards)))
	_, q := t.locate(h)
	return indexEntry{fp: i<<fpBits | q, id: id}
}

// snapshot returns the table's entries, sorted.
func (t *keyTable) snapshot() []indexEntry {
	out := make([]indexEntry, 0, t.len())
	t.entries(func(shard int, q uint64, id CampaignID) {
		out = append(out, indexEntry{fp: uint64(shard)<<fpBits | q, id: id})
	})
	slices.SortFunc(out, indexEntry.compare)
	return out
}

type repairOp struct {
	key, val []byte
	del      bool
}

// Verify walks every entry of the store and checks that every index key
// points at an existing campaign that lists it, that every listed key is
// indexed, that reporters and day counters belong to existing campaigns
// and that each record's key and reporter counts match. With repair it
// deletes dangling entries, lists unlisted index keys, deletes unreadable
// records and corrects counts. Repair is meant for a store no one else is
// writing to (the CLI holds the store's lock).
func (b *Badger) Verify(ctx context.Context, repair bool) (VerifyResult, error) {
	var (
		res    VerifyResult
		ops    []repairOp
		recs   = make(map[CampaignID]*verifyCounts)
		stored = make(map[CampaignID]verifyCounts)
	)
	if repair {
		if err := b.writable(); err != nil {
			return res, err
		}
	}
	if b.isClosed() {
		return res, ErrClosed
	}
	// The key index as it is when the read transaction starts: no key
	// list changes in between.
	b.keys.mu.Lock()
	table := b.keys.table()
	live := table.snapshot()
	vtxn := b.db.NewTransaction(false)
	b.keys.mu.Unlock()
	defer vtxn.Discard()
	err := func(txn *badger.Txn) error {
		if _, err := txn.Get(metaSchemaKey); errors.Is(err, badger.ErrKeyNotFound) {
			res.NoSchema = true
		}
		// Campaign records.
		_, err := scanPrefix(txn, []byte{pfxCampaign}, true, 0, func(s, v []byte) error {
			if len(s) != 8 {
				res.BadRecords++
				ops = append(ops, repairOp{key: append([]byte{pfxCampaign}, s...), del: true})
				return nil
			}
			id := CampaignID(binary.BigEndian.Uint64(s))
			r, err := decodeRecord(id, v)
			if err != nil {
				res.BadRecords++
				ops = append(ops, repairOp{key: campaignKey(id), del: true})
				return nil
			}
			res.Campaigns++
			recs[id] = &verifyCounts{ix: r.ix}
			stored[id] = verifyCounts{r.numKeys, r.SpamReporters, r.HamReporters, r.ix}
			return ctx.Err()
		})
		if err != nil {
			return err
		}
		// Key lists, then the index.
		keyOps, err := verifyKeys(ctx, txn, table, live, recs, &res)
		live = nil
		ops = append(ops, keyOps...)
		if err != nil {
			return err
		}
		// Reporters and day counters.
		_, err = scanPrefix(txn, []byte{pfxReporter}, false, 0, func(s, _ []byte) error {
			res.Reporters++
			var vc *verifyCounts
			if len(s) == 17 {
				vc = recs[CampaignID(binary.BigEndian.Uint64(s))]
			}
			if vc == nil {
				res.OrphanReporters++
				ops = append(ops, repairOp{key: append([]byte{pfxReporter}, s...), del: true})
				return nil
			}
			// Its entry in the reporters' index by reporter.
			rk := reporterCampKey(binary.BigEndian.Uint64(s[9:]), CampaignID(binary.BigEndian.Uint64(s)), Kind(s[8]))
			if _, err := txn.Get(rk); errors.Is(err, badger.ErrKeyNotFound) {
				res.ReporterIndex++
				ops = append(ops, repairOp{key: rk, val: []byte{}})
			} else if err != nil {
				return err
			}
			if Kind(s[8]) == KindSpam {
				vc.spamRep++
			} else {
				vc.hamRep++
			}
			return nil
		})
		if err != nil {
			return err
		}
		// The reporters' index by reporter: each entry backed by its
		// reporter record.
		_, err = scanPrefix(txn, []byte{pfxReporterCamp}, false, 0, func(s, _ []byte) error {
			ok := len(s) == 17 && recs[CampaignID(binary.BigEndian.Uint64(s[8:]))] != nil
			if ok {
				_, gerr := txn.Get(reporterKey(CampaignID(binary.BigEndian.Uint64(s[8:])), Kind(s[16]), binary.BigEndian.Uint64(s)))
				if gerr != nil && !errors.Is(gerr, badger.ErrKeyNotFound) {
					return gerr
				}
				ok = gerr == nil
			}
			if !ok {
				res.ReporterIndex++
				ops = append(ops, repairOp{key: append([]byte{pfxReporterCamp}, s...), del: true})
			}
			return nil
		})
		if err != nil {
			return err
		}
		_, err = scanPrefix(txn, []byte{pfxDay}, false, 0, func(s, _ []byte) error {
			res.DayCounters++
			if len(s) != 12 || recs[CampaignID(binary.BigEndian.Uint64(s))] == nil {
				res.OrphanDays++
				ops = append(ops, repairOp{key: append([]byte{pfxDay}, s...), del: true})
			}
			return nil
		})
		if err != nil {
			return err
		}
		ixOps, bad, err := verifyIndexes(ctx, txn, recs)
		res.BadIndexEntries = bad
		ops = append(ops, ixOps...)
		if err != nil {
			return err
		}
		want := counters{}
		for _, vc := range recs {
			want.addState(vc.ix, 1)
		}
		have, err := readBase(txn)
		if err != nil {
			return err
		}
		d, err := pendingDeltas(txn)
		if err != nil {
			return err
		}
		have.add(d.c)
		if have != want {
			res.CountersWrong = true
			// Repair: the recount becomes the base, the deltas go.
			ops = append(ops, repairOp{key: metaCountsKey, val: want.encode(nil)})
			_, err = scanPrefix(txn, []byte{pfxDelta}, false, 0, func(s, _ []byte) error {
				ops = append(ops, repairOp{key: append([]byte{pfxDelta}, s...), del: true})
				return nil
			})
		}
		return err
	}(vtxn)
	if err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	var fixCounts []CampaignID
	for id, vc := range recs {
		if *vc != stored[id] {
			res.CountMismatch++
			fixCounts = append(fixCounts, id)
		}
	}
	if !repair || res.Problems() == 0 {
		return res, nil
	}
	// Repair, holding the key index: its table is rebuilt from the
	// repaired lists.
	b.keys.mu.Lock()
	defer b.keys.mu.Unlock()
	if res.NoSchema {
		if err := writeSchema(b.db, SchemaVersion); err != nil {
			return res, err
		}
		res.Repaired++
	}
	n, err := b.updateEach(ctx, len(ops), 1, func(w *wtx, i int) error {
		if ops[i].del {
			return w.del(ops[i].key)
		}
		return w.set(ops[i].key, ops[i].val)
	})
	res.Repaired += int64(n)
	if err != nil {
		return res, fmt.Errorf("verify: repair: %w", err)
	}
	for _, id := range fixCounts {
		vc := recs[id]
		err := b.update(ctx, func(w *wtx) error {
			r, err := getRecord(w.txn, id)
			if err != nil {
				return err
			}
			r.numKeys, r.SpamReporters, r.HamReporters = vc.keys, vc.spamRep, vc.hamRep
			return putRecord(w, r)
		})
		if err != nil {
			return res, fmt.Errorf("verify: repair counts of campaign %d: %w", id, err)
		}
		res.Repaired++
	}
	t, err := b.buildKeyTable(table.k0, table.k1)
	if err != nil {
		return res, fmt.Errorf("verify: repair: %w", err)
	}
	b.keys.tbl.Store(t)
	res.Repaired += res.DanglingIndex + res.UnlistedIndex
	return res, nil
}
