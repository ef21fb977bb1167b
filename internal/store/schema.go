package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// SchemaVersion is the version of the key schema this code writes. See
// docs/design/store.md for the layout.
const SchemaVersion = 5

// Key prefixes (one byte). IDs are 8 bytes big-endian so that a campaign's
// entries are contiguous and ordered.
const (
	pfxMeta     = 'm' // 'm' + name → meta value ("schema" → uint32 BE)
	pfxSeq      = 'n' // badger.Sequence of campaign ids
	pfxIndex    = 'k' // schema 3: 'k' + sigkey → campaign id (8 bytes BE) (migrateV4; hashed by StateHash)
	pfxCampaign = 'c' // 'c' + id → campaign record (recordV1)
	pfxKeyList  = 'x' // schema 2: 'x' + id + sigkey → empty: the keys of a campaign (migrateV3)
	pfxKeyChunk = 'X' // 'X' + id + chunk (uint64 BE) → keys of a campaign (keylist.go)
	pfxReporter = 'r' // 'r' + id + kind + reporter hash (8) → first, last (2×8 bytes BE unix ns)
	pfxDay      = 'd' // 'd' + id + day (uint32 BE days since 1970-01-01 UTC) → uvarints messages, spam, ham
	// pfxReporterCamp is the reporters' index by reporter: one entry per
	// 'r' entry, written and deleted with it (reporterhistory.go).
	pfxReporterCamp = 'u' // 'u' + reporter hash (8) + id + kind → empty
)

var metaSchemaKey = []byte{pfxMeta, 's', 'c', 'h', 'e', 'm', 'a'}

// migrations[v] upgrades a store from schema v to v+1.
var migrations = map[uint32]func(*badger.DB, *slog.Logger) error{
	1: migrateV2, // ranking indexes and counters (migrate.go)
	2: migrateV3, // key lists in chunks (keylist.go)
	3: migrateV4, // the key index in memory (keyindex.go)
	4: migrateV5, // the reporters' index by reporter (reporterhistory.go)
}

// checkSchema validates (or, on a new empty store, writes) the schema
// version.
func checkSchema(db *badger.DB, readOnly bool, log *slog.Logger) error {
	var (
		ver   uint32
		found bool
		empty = true
	)
	err := db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(metaSchemaKey)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			found = true
			v, err := it.ValueCopy(nil)
			if err != nil {
				return err
			}
			if len(v) != 4 {
				return fmt.Errorf("malformed schema version (%d bytes)", len(v))
			}
			ver = binary.BigEndian.Uint32(v)
		}
		iter := txn.NewIterator(badger.IteratorOptions{})
		defer iter.Close()
		iter.Rewind()
		empty = !iter.Valid()
		return nil
	})
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case !found && empty:
		if readOnly {
			return errors.New("store is empty (never written)")
		}
		return writeSchema(db, SchemaVersion)
	case !found:
		return errors.New("not an nddmilter store (no schema version key)")
	case ver > SchemaVersion:
		return fmt.Errorf("store schema v%d is newer than this nddmilter (v%d); upgrade nddmilter", ver, SchemaVersion)
	case ver < SchemaVersion:
		if readOnly {
			return fmt.Errorf("store schema v%d is older than this nddmilter (v%d); open it read-write once to migrate it", ver, SchemaVersion)
		}
		for v := ver; v < SchemaVersion; v++ {
			m, ok := migrations[v]
			if !ok {
				return fmt.Errorf("store schema v%d is older than this nddmilter (v%d) and cannot be migrated; restore it with the nddmilter that wrote it, or start a new store", ver, SchemaVersion)
			}
			if err := m(db, log); err != nil {
				return fmt.Errorf("migrate store schema v%d → v%d: %w", v, v+1, err)
			}
			if err := writeSchema(db, v+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeSchema(db *badger.DB, v uint32) error {
	err := db.Update(func(txn *badger.Txn) error {
		return txn.Set(metaSchemaKey, binary.BigEndian.AppendUint32(nil, v))
	})
	if err != nil {
		return fmt.Errorf("write schema version: %w", err)
	}
	return nil
}

// --- keys ---

func idKey(pfx byte, id CampaignID) []byte {
	k := make([]byte, 9, 9+32)
	k[0] = pfx
	binary.BigEndian.PutUint64(k[1:], uint64(id))
	return k
}

func campaignKey(id CampaignID) []byte { return idKey(pfxCampaign, id) }

func keyListKey(id CampaignID, sig []byte) []byte {
	return append(idKey(pfxKeyList, id), sig...)
}

func reporterKey(id CampaignID, kind Kind, h uint64) []byte {
	k := append(idKey(pfxReporter, id), byte(kind))
	return binary.BigEndian.AppendUint64(k, h)
}

// reporterCampKey is the 'u' entry of 'r' entry reporterKey(id, kind, h).
func reporterCampKey(h uint64, id CampaignID, kind Kind) []byte {
	k := make([]byte, 0, 18)
	k = append(k, pfxReporterCamp)
	k = binary.BigEndian.AppendUint64(k, h)
	k = binary.BigEndian.AppendUint64(k, uint64(id))
	return append(k, byte(kind))
}

func dayNumber(t time.Time) uint32 {
	d := t.Unix() / 86400
	if t.Unix() < 0 {
		d = 0
	}
	if d > math.MaxUint32 {
		d = math.MaxUint32
	}
	return uint32(d)
}

func dayKey(id CampaignID, day uint32) []byte {
	return binary.BigEndian.AppendUint32(idKey(pfxDay, id), day)
}

func idFromValue(v []byte) (CampaignID, bool) {
	if len(v) != 8 {
		return 0, false
	}
	return CampaignID(binary.BigEndian.Uint64(v)), true
}

func idValue(id CampaignID) []byte { return binary.BigEndian.AppendUint64(nil, uint64(id)) }

// --- campaign record ---

// record is a campaign as stored: the Campaign without its Keys (they live
// under 'x') but with their number.
type record struct {
	Campaign
	numKeys int64
	// ix is what the ranking indexes and counters hold for the record
	// (set by decodeRecord and putRecord; zero for a new record).
	ix ixState
}

const recordV1 = 1

// Tags of the record's optional trailing sections (after the merged-from
// ids); unknown tags are skipped.
const (
	secSampleText = 1 // the sample text
	secTerms      = 2 // the term sets: a count, then each set's bytes
)

func putVarTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return binary.AppendVarint(b, 0)
	}
	return binary.AppendVarint(b, t.UnixNano())
}

func putBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// encode renders the record in the compact binary format v1:
// version, state, first/last seen (varint unix ns), uvarint counters
// (messages, spam/ham reports, spam/ham reporters, keys), actions
// (count, then name, count), subject, from, sketches, merged-from ids,
// then optional tagged sections (sample text, term sets) present when not
// empty.
func (r *record) encode() []byte {
	b := make([]byte, 0, 96+len(r.SampleSubject)+len(r.SampleFrom)+len(r.SampleText)+len(r.Sketches)*40+len(r.Terms)*512)
	b = append(b, recordV1, byte(r.State))
	b = putVarTime(b, r.FirstSeen)
	b = putVarTime(b, r.LastSeen)
	for _, n := range []int64{r.Messages, r.SpamReports, r.HamReports, r.SpamReporters, r.HamReporters, r.numKeys} {
		if n < 0 {
			n = 0
		}
		b = binary.AppendUvarint(b, uint64(n))
	}
	names := make([]string, 0, len(r.Actions))
	for a := range r.Actions {
		names = append(names, a)
	}
	sort.Strings(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, a := range names {
		b = putBytes(b, []byte(a))
		b = binary.AppendUvarint(b, uint64(max(r.Actions[a], 0)))
	}
	b = putBytes(b, []byte(r.SampleSubject))
	b = putBytes(b, []byte(r.SampleFrom))
	b = binary.AppendUvarint(b, uint64(len(r.Sketches)))
	for _, s := range r.Sketches {
		b = putBytes(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(r.MergedFrom)))
	for _, id := range r.MergedFrom {
		b = binary.AppendUvarint(b, uint64(id))
	}
	// Optional trailing sections, each a tag and its bytes: a record
	// written before a section existed decodes without it, and a reader
	// skips the tags it does not know.
	if r.SampleText != "" {
		b = binary.AppendUvarint(b, secSampleText)
		b = putBytes(b, []byte(r.SampleText))
	}
	if len(r.Terms) > 0 {
		t := binary.AppendUvarint(nil, uint64(len(r.Terms)))
		for _, x := range r.Terms {
			t = putBytes(t, x)
		}
		b = binary.AppendUvarint(b, secTerms)
		b = putBytes(b, t)
	}
	return b
}

var errBadRecord = errors.New("malformed campaign record")

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errBadRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errBadRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int64() int64 {
	v := d.uvarint()
	if v > math.MaxInt64 {
		d.err = errBadRecord
		return 0
	}
	return int64(v)
}

func (d *decoder) time() time.Time {
	if d.err != nil {
		return time.Time{}
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errBadRecord
		return time.Time{}
	}
	d.b = d.b[n:]
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, v).UTC()
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errBadRecord
		return nil
	}
	s := make([]byte, n)
	copy(s, d.b[:n])
	d.b = d.b[n:]
	return s
}

// count reads a collection length, bounded by the bytes left (every
// element takes at least one byte).
func (d *decoder) count() int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = errBadRecord
	}
	if d.err != nil {
		return 0
	}
	return int(n)
}

func decodeRecord(id CampaignID, v []byte) (*record, error) {
	if len(v) < 2 {
		return nil, fmt.Errorf("campaign %d: %w (%d bytes)", id, errBadRecord, len(v))
	}
	if v[0] != recordV1 {
		return nil, fmt.Errorf("campaign %d: %w: unknown record version %d", id, errBadRecord, v[0])
	}
	r := &record{Campaign: Campaign{ID: id, State: State(v[1])}}
	d := &decoder{b: v[2:]}
	r.FirstSeen = d.time()
	r.LastSeen = d.time()
	r.Messages = d.int64()
	r.SpamReports = d.int64()
	r.HamReports = d.int64()
	r.SpamReporters = d.int64()
	r.HamReporters = d.int64()
	r.numKeys = d.int64()
	if n := d.count(); n > 0 {
		r.Actions = make(map[string]int64, n)
		for i := 0; i < n && d.err == nil; i++ {
			name := string(d.bytes())
			r.Actions[name] = d.int64()
		}
	}
	r.SampleSubject = string(d.bytes())
	r.SampleFrom = string(d.bytes())
	if n := d.count(); n > 0 {
		r.Sketches = make([][]byte, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			r.Sketches = append(r.Sketches, d.bytes())
		}
	}
	if n := d.count(); n > 0 {
		r.MergedFrom = make([]CampaignID, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			r.MergedFrom = append(r.MergedFrom, CampaignID(d.uvarint()))
		}
	}
	for d.err == nil && len(d.b) > 0 {
		tag := d.uvarint()
		payload := d.bytes()
		switch tag {
		case secSampleText:
			r.SampleText = string(payload)
		case secTerms:
			t := &decoder{b: payload}
			if n := t.count(); n > 0 {
				r.Terms = make([][]byte, 0, n)
				for i := 0; i < n && t.err == nil; i++ {
					r.Terms = append(r.Terms, t.bytes())
				}
			}
			if t.err != nil {
				d.err = t.err
			}
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("campaign %d: %w", id, d.err)
	}
	r.ix = r.ixNow()
	return r, nil
}

// --- small values ---

func encodeReporter(first, last time.Time) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(first.UnixNano()))
	return binary.BigEndian.AppendUint64(b, uint64(last.UnixNano()))
}

func decodeReporter(v []byte) (first, last time.Time, ok bool) {
	if len(v) != 16 {
		return time.Time{}, time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC(),
		time.Unix(0, int64(binary.BigEndian.Uint64(v[8:]))).UTC(), true
}

type dayCounts struct{ messages, spam, ham int64 }

func (c dayCounts) encode() []byte {
	b := binary.AppendUvarint(nil, uint64(max(c.messages, 0)))
	b = binary.AppendUvarint(b, uint64(max(c.spam, 0)))
	return binary.AppendUvarint(b, uint64(max(c.ham, 0)))
}

func decodeDay(v []byte) (dayCounts, error) {
	d := &decoder{b: v}
	c := dayCounts{d.int64(), d.int64(), d.int64()}
	return c, d.err
}

func (c *dayCounts) add(o dayCounts) {
	c.messages += o.messages
	c.spam += o.spam
	c.ham += o.ham
}
