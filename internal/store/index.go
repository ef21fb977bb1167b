package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// The ranking indexes (schema 2) keep every campaign listed in the orders
// List offers, so that a list reads a page of index entries and the
// records on it instead of every record. They are written in the same
// transaction as the record they describe: putRecord and delRecord are
// the only writers of campaign records, and both bring the indexes and
// the store's counters (counts.go) up to date from the difference
// between what the indexes hold (record.ix) and the record.
//
//	'L' ^lastSeen id           → uvarints messages, spam reporters, spam reports  (recent first)
//	'V' ^messages id           → lastSeen (8 B)                                   (volume)
//	'R' ^spamRep ^spamReps id  → lastSeen                                         (reports)
//	'F' ^hamRep ^hamReps id    → lastSeen, only with not-spam reports            (false-positive watch)
//
// ^x is the bitwise complement of x as uint64 big-endian, so that a
// forward iteration yields the largest first; ties go by ascending id.
const (
	pfxRecent  = 'L'
	pfxVolume  = 'V'
	pfxReports = 'R'
	pfxHam     = 'F'
)

// ixState is what the ranking indexes and the counters hold for a
// campaign record: the record's values when it was read (or zero, with
// present false, for a record not yet written).
type ixState struct {
	present                     bool
	state                       State
	lastSeen                    int64 // unix ns, ≥ 0
	messages                    int64
	spamReports, hamReports     int64
	spamReporters, hamReporters int64
	keys                        int64
}

// ixNow is the index state of the record as it is now.
func (r *record) ixNow() ixState {
	return ixState{
		present:       true,
		state:         r.State,
		lastSeen:      unixNano(r.LastSeen),
		messages:      max(r.Messages, 0),
		spamReports:   max(r.SpamReports, 0),
		hamReports:    max(r.HamReports, 0),
		spamReporters: max(r.SpamReporters, 0),
		hamReporters:  max(r.HamReporters, 0),
		keys:          max(r.numKeys, 0),
	}
}

func unixNano(t time.Time) int64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return t.UnixNano()
}

func inv(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, ^uint64(max(v, 0))) }

func appendID(b []byte, id CampaignID) []byte { return binary.BigEndian.AppendUint64(b, uint64(id)) }

// ixEntry is one index entry.
type ixEntry struct{ k, v []byte }

// entries returns the index entries of s (none when not present), in the
// order of pfxRecent, pfxVolume, pfxReports, pfxHam (nil key: no entry).
func (s ixState) entries(id CampaignID) [4]ixEntry {
	var e [4]ixEntry
	if !s.present {
		return e
	}
	seen := binary.BigEndian.AppendUint64(nil, uint64(s.lastSeen))
	e[0].k = appendID(inv([]byte{pfxRecent}, s.lastSeen), id)
	e[0].v = binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(nil,
		uint64(s.messages)), uint64(s.spamReporters)), uint64(s.spamReports))
	e[1] = ixEntry{appendID(inv([]byte{pfxVolume}, s.messages), id), seen}
	e[2] = ixEntry{appendID(inv(inv([]byte{pfxReports}, s.spamReporters), s.spamReports), id), seen}
	if s.hamReports > 0 {
		e[3] = ixEntry{appendID(inv(inv([]byte{pfxHam}, s.hamReporters), s.hamReports), id), seen}
	}
	return e
}

// reindex brings the ranking indexes and the counters from old to cur
// (either may be absent).
func (w *wtx) reindex(id CampaignID, old, cur ixState) error {
	oe, ne := old.entries(id), cur.entries(id)
	for i := range oe {
		o, n := oe[i], ne[i]
		sameKey := o.k != nil && n.k != nil && bytes.Equal(o.k, n.k)
		if o.k != nil && !sameKey {
			if err := w.del(o.k); err != nil {
				return err
			}
		}
		if n.k != nil && (!sameKey || !bytes.Equal(o.v, n.v)) {
			if err := w.set(n.k, n.v); err != nil {
				return err
			}
		}
	}
	w.counts().addState(old, -1)
	w.counts().addState(cur, 1)
	return nil
}

// putRecord writes a campaign record and brings its index entries and the
// counters up to date.
func putRecord(w *wtx, r *record) error {
	cur := r.ixNow()
	if err := w.reindex(r.ID, r.ix, cur); err != nil {
		return err
	}
	r.ix = cur
	return w.set(campaignKey(r.ID), r.encode())
}

// delRecord deletes a campaign record with its index entries, its
// hourly ranking ring, its sender domains and its share of the counters.
// The campaign's other
// entries (keys, reporters, counters) are the caller's.
func delRecord(w *wtx, r *record) error {
	if err := w.reindex(r.ID, r.ix, ixState{}); err != nil {
		return err
	}
	r.ix = ixState{}
	if err := w.dropRing(r.ID); err != nil {
		return err
	}
	if err := w.dropSenders(r.ID); err != nil {
		return err
	}
	return w.del(campaignKey(r.ID))
}

// decodeIx reads the lastSeen value of a 'V', 'R' or 'F' entry.
func decodeSeen(v []byte) int64 {
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// idOfEntry returns the campaign id that ends an index key.
func idOfEntry(k []byte) CampaignID {
	if len(k) < 8 {
		return 0
	}
	return CampaignID(binary.BigEndian.Uint64(k[len(k)-8:]))
}

// recentEntry decodes an 'L' entry: last seen (from the key) and the
// counts of its value.
func recentEntry(k, v []byte) (seen int64, messages, spamRep, spamReps int64, ok bool) {
	if len(k) != 17 {
		return 0, 0, 0, 0, false
	}
	seen = int64(^binary.BigEndian.Uint64(k[1:9]))
	d := &decoder{b: v}
	messages, spamRep, spamReps = d.int64(), d.int64(), d.int64()
	return seen, messages, spamRep, spamReps, d.err == nil
}

// verifyIndexes checks the ranking index entries against the records'
// index states (recs): it returns the repairs (stale entries deleted,
// missing ones written) and how many entries were wrong.
func verifyIndexes(ctx context.Context, txn *badger.Txn, recs map[CampaignID]*verifyCounts) ([]repairOp, int64, error) {
	var ops []repairOp
	var bad int64
	found := make(map[CampaignID]uint8, len(recs))
	for slot, pfx := range []byte{pfxRecent, pfxVolume, pfxReports, pfxHam} {
		n := 0
		_, err := scanPrefix(txn, []byte{pfx}, true, 0, func(s, v []byte) error {
			k := append([]byte{pfx}, s...)
			id := idOfEntry(k)
			if vc := recs[id]; vc != nil {
				e := vc.ix.entries(id)[slot]
				if bytes.Equal(e.k, k) && bytes.Equal(e.v, v) {
					found[id] |= 1 << slot
					return nil
				}
			}
			bad++
			ops = append(ops, repairOp{key: k, del: true})
			if n++; n%4096 == 0 {
				return ctx.Err()
			}
			return nil
		})
		if err != nil {
			return ops, bad, err
		}
	}
	for id, vc := range recs {
		for slot, e := range vc.ix.entries(id) {
			if e.k != nil && found[id]&(1<<slot) == 0 {
				bad++
				ops = append(ops, repairOp{key: e.k, val: e.v})
			}
		}
	}
	return ops, bad, nil
}
