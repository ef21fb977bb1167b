package store

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"
)

// errTxnFull asks the caller to commit what it has and retry the report in
// a fresh transaction.
var errTxnFull = errors.New("transaction budget reached")

// drainNeed asks the caller to move the entries of campaign from into
// campaign to in several transactions before the merge can be atomic.
type drainNeed struct{ from, to CampaignID }

func (d *drainNeed) Error() string {
	return fmt.Sprintf("campaign %d too large to merge into %d in one transaction", d.from, d.to)
}

func reporterHash(reporter string) uint64 {
	h := sha256.Sum256([]byte(reporter))
	return binary.BigEndian.Uint64(h[:8])
}

func validateReport(in *ReportInput) error {
	if in.Kind != KindSpam && in.Kind != KindHam {
		return fmt.Errorf("report: unknown kind %d", in.Kind)
	}
	if in.ReporterHashed {
		if _, err := strconv.ParseUint(in.Reporter, 16, 64); err != nil || len(in.Reporter) != 16 {
			return fmt.Errorf("report: reporter hash %q: want 16 hex digits", in.Reporter)
		}
	}
	if len(in.Keys) > MaxReportKeys {
		return fmt.Errorf("report: %d keys, at most %d allowed", len(in.Keys), MaxReportKeys)
	}
	for _, k := range in.Keys {
		if len(k) > MaxKeyLen {
			return fmt.Errorf("report: key of %d bytes, at most %d allowed", len(k), MaxKeyLen)
		}
	}
	return validateDigest(in)
}

// Report applies one report atomically in one transaction (retried on
// write conflicts): it finds the campaigns of in.Keys and in.Join, creates
// one (in.Create), joins the only one or merges several into the oldest,
// then updates counts, reporters, samples, index and sketches. When it
// returns without error the report is durable (unless NoSyncWrites).
//
// Merging a campaign too large for one transaction first moves its
// entries into the oldest campaign in several transactions; each of them
// leaves the store consistent (both campaigns valid), and the final,
// atomic transaction applies the report.
func (b *Badger) Report(ctx context.Context, in ReportInput) (ReportResult, error) {
	if err := b.writable(); err != nil {
		return ReportResult{}, err
	}
	if err := validateReport(&in); err != nil {
		return ReportResult{}, err
	}
	if in.Time.IsZero() {
		in.Time = time.Now()
	}
	var drained []CampaignID
	for {
		var res ReportResult
		err := b.updateIndex(ctx, 0, 0, func(w *wtx) error {
			var err error
			res, err = b.applyReport(w, &in, drained)
			return err
		})
		var dn *drainNeed
		if errors.As(err, &dn) {
			if err := b.drain(withoutApplied(ctx), dn.from, dn.to); err != nil {
				return ReportResult{}, err
			}
			// The drained campaign may no longer be reachable through
			// in.Keys: name it so that the retry merges its record.
			in.Join = append(slices.Clip(in.Join), dn.from)
			drained = append(drained, dn.from)
			continue
		}
		if err != nil {
			// Not wrapped again: the caller names the operation (the
			// engine's "report: …"), and the error names the store.
			return ReportResult{}, err
		}
		return res, nil
	}
}

// ReportBatch applies many reports for bulk ingestion. Each report is
// atomic and they are applied in order, with the outcome of calling Report
// for each in turn, but many share one transaction (up to the batch budget
// of batchBudgetEntries entries: 1,000 typical reports are one commit and
// one fsync), so that bulk ingestion pays one fsync per batch instead of
// one per report. On error, the reports before the failing one
// (results[:i] of the returned slice, i = len(results)) are durable.
func (b *Badger) ReportBatch(ctx context.Context, ins []ReportInput) ([]ReportResult, error) {
	if err := b.writable(); err != nil {
		return nil, err
	}
	now := time.Now()
	for i := range ins {
		if err := validateReport(&ins[i]); err != nil {
			return nil, fmt.Errorf("report %d: %w", i, err)
		}
	}
	if m := appliedOf(ctx); m != nil && m.round != nil {
		return b.reportRound(ctx, m, ins, now)
	}
	results := make([]ReportResult, 0, len(ins))
	var drained []CampaignID // campaigns drained for ins[len(results)]
	for len(results) < len(ins) {
		var (
			part []ReportResult
			dn   *drainNeed
		)
		err := b.updateIndex(ctx, batchBudgetEntries, batchBudgetBytes, func(w *wtx) error {
			part = part[:0]
			dn = nil
			w.reserveIndex(ins[len(results):])
			for j := len(results); j < len(ins); j++ {
				in := ins[j]
				if in.Time.IsZero() {
					in.Time = now
				}
				var dr []CampaignID
				if j == len(results) && len(drained) > 0 {
					in.Join = append(slices.Clip(in.Join), drained...)
					dr = drained
				}
				r, err := b.applyReport(w, &in, dr)
				if errors.Is(err, errTxnFull) {
					break
				}
				if errors.As(err, &dn) {
					if len(part) > 0 {
						dn = nil // commit first, drain on the next round
					}
					break
				}
				if err != nil {
					return fmt.Errorf("report %d: %w", j, err)
				}
				part = append(part, r)
				if w.room() == 0 {
					break
				}
			}
			return nil
		})
		if err != nil {
			return results, fmt.Errorf("report batch: %w", err)
		}
		if len(part) > 0 {
			drained = nil
		}
		results = append(results, part...)
		if dn != nil {
			drained = append(drained, dn.from)
			if err := b.drain(withoutApplied(ctx), dn.from, dn.to); err != nil {
				return results, fmt.Errorf("report %d: %w", len(results), err)
			}
		}
	}
	return results, nil
}

// reportRound is ReportBatch in a round of a report event (ForRound):
// it finishes the merge the event began, if any, or else commits one
// transaction of reports — or, when the first report needs to merge a
// campaign too large for one transaction, merges it in several
// transactions and commits no report (ErrRoundAgain: the caller then
// matches the reports again against the merged campaigns). Every transaction records
// the event's progress (Progress). results are those of ins[:len(results)].
func (b *Badger) reportRound(ctx context.Context, m *appliedMark, ins []ReportInput, now time.Time) ([]ReportResult, error) {
	r := m.round
	if r.Drain != ([2]CampaignID{}) {
		if err := b.drainRound(ctx, m, r.Drain[0], r.Drain[1]); err != nil {
			return nil, err
		}
		return nil, ErrRoundAgain
	}
	if len(r.Next) != len(ins) {
		return nil, fmt.Errorf("report round: %d steps for %d reports", len(r.Next), len(ins))
	}
	var part []ReportResult
	var dn *drainNeed
	err := b.updateIndex(ctx, batchBudgetEntries, batchBudgetBytes, func(w *wtx) error {
		part, dn = part[:0], nil
		w.reserveIndex(ins)
		for j := range ins {
			in := ins[j]
			if in.Time.IsZero() {
				in.Time = now
			}
			res, err := b.applyReport(w, &in, nil)
			if errors.Is(err, errTxnFull) {
				break
			}
			if errors.As(err, &dn) {
				if len(part) > 0 {
					dn = nil // commit first, merge in the next round
				}
				break
			}
			if err != nil {
				return fmt.Errorf("report %d: %w", j, err)
			}
			part = append(part, res)
			if w.room() == 0 {
				break
			}
		}
		p := r.Progress
		if len(part) > 0 {
			p.Step = r.Next[len(part)-1]
			p.Partial = p.Step < r.Total
		}
		m.pending = &p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("report batch: %w", err)
	}
	if dn != nil {
		if err := b.drainRound(ctx, m, dn.from, dn.to); err != nil {
			return nil, err
		}
		return nil, ErrRoundAgain
	}
	return part, nil
}

// drainRound merges campaign from into campaign to in a round of a report
// event: their entries move in bounded transactions, each recording the
// merge in the event's progress (so that a node killed meanwhile finishes
// it), and the last one merges the records.
func (b *Badger) drainRound(ctx context.Context, m *appliedMark, from, to CampaignID) error {
	b.log.Info("store: merging a large campaign in several transactions", "from", from, "into", to, "event", m.seq)
	for {
		done := false
		err := b.updateIndex(ctx, 0, 0, func(w *wtx) error {
			p := m.round.Progress
			p.Partial = true
			p.Drain = [2]CampaignID{from, to}
			m.pending = &p
			src, err := getRecord(w.txn, from)
			if errors.Is(err, ErrNotFound) {
				p.Drain, done = [2]CampaignID{}, true
				return nil
			}
			if err != nil {
				return err
			}
			dst, err := getRecord(w.txn, to)
			if errors.Is(err, ErrNotFound) {
				p.Drain, done = [2]CampaignID{}, true
				return nil
			}
			if err != nil {
				return err
			}
			if done, err = moveEntries(w, dst, src, txnBudgetEntries/4); err != nil {
				return err
			}
			if !done {
				if err := putRecord(w, src); err != nil {
					return err
				}
				return putRecord(w, dst)
			}
			// The last entries moved: the records merge here.
			if err := b.mergeInto(w, dst, src); err != nil {
				return err
			}
			p.Drain = [2]CampaignID{}
			return putRecord(w, dst)
		})
		if err != nil {
			return fmt.Errorf("merge campaign %d into %d: %w", from, to, err)
		}
		if done {
			return nil
		}
	}
}

// mergeMaxPending is the most writes a transaction may hold before a
// merge: a merge lists the merged campaign's entries with iterators, and
// Badger sorts all of a transaction's pending writes for every iterator,
// so a batch holding more commits them first and merges in a fresh
// transaction.
const mergeMaxPending = 2000

// mergeEstimate bounds the number of entries a merge of src writes.
func mergeEstimate(src *record) int {
	days := 2
	if !src.FirstSeen.IsZero() && src.LastSeen.After(src.FirstSeen) {
		days += int(src.LastSeen.Sub(src.FirstSeen) / (24 * time.Hour))
	}
	hours := min(days*24, int(DefaultHourRetention/time.Hour)+24)
	// Keys move in chunks (a deletion and a write each); their bytes
	// count as about one entry per two keys of the budget (wtx.room).
	keys := int(src.numKeys)/2 + 2*keyChunksEntries(int(src.numKeys))
	return keys + 2*int(src.SpamReporters+src.HamReporters) + 2*days + 4*hours + 20
}

// applyReport is Report inside a transaction. It reads everything first
// and returns errTxnFull or *drainNeed before writing anything. Campaigns
// in drained were just drained: they are merged whatever their estimate
// (which may overstate what is left), so that a merge always progresses.
func (b *Badger) applyReport(w *wtx, in *ReportInput, drained []CampaignID) (ReportResult, error) {
	txn := w.txn
	// Phase 1: reads.
	prior, err := priorMsgReport(txn, in)
	if err != nil {
		return ReportResult{}, err
	}
	if dup, err := duplicateOf(txn, in, prior); err != nil || dup {
		return ReportResult{Campaign: prior.campaign, Repeated: true, Duplicate: true}, err
	}
	keyIDs := make([]CampaignID, len(in.Keys))
	var ids []CampaignID
	for i, k := range in.Keys {
		if len(k) == 0 {
			continue
		}
		id, err := w.lookupIndex(k)
		if err != nil {
			return ReportResult{}, err
		}
		if id != 0 {
			keyIDs[i] = id
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	owned := slices.Clone(ids) // campaigns owning one of in.Keys
	if in.Vetted {
		for _, id := range append([]CampaignID{in.Target}, in.MayMerge...) {
			if id != 0 && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	} else {
		for _, id := range in.Join {
			if id != 0 && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	recs := make(map[CampaignID]*record, len(ids))
	for _, id := range ids {
		r, err := getRecord(txn, id)
		if errors.Is(err, ErrNotFound) {
			continue // dangling index entry or stale Join: ignore it
		}
		if err != nil {
			return ReportResult{}, err
		}
		recs[id] = r
	}
	dst, srcs := chooseCampaigns(in, ids, owned, recs)
	need := len(in.Keys)/2 + keyChunksEntries(len(in.Keys)) + 22 // list chunks (their bytes); record, reporter, counters, index entries; message report, withdrawn vote
	var res ReportResult
	if dst == nil {
		if !in.Create {
			return ReportResult{}, nil
		}
		if need > w.room() && w.entries > 0 {
			return ReportResult{}, errTxnFull
		}
		id, err := b.newID(w)
		if err != nil {
			return ReportResult{}, err
		}
		dst = &record{Campaign: Campaign{ID: id, FirstSeen: in.Time, LastSeen: in.Time}}
		res.Created = true
	} else {
		largest, largestEst := CampaignID(0), 0
		for _, r := range srcs {
			e := mergeEstimate(r)
			need += e
			if e > largestEst && !slices.Contains(drained, r.ID) {
				largest, largestEst = r.ID, e
			}
		}
		// One report and its merges stay within the per-report budget
		// (a batch transaction may have more room): beyond it, the
		// largest campaign is drained first in bounded transactions.
		if need > w.room() || need > txnBudgetEntries {
			if w.entries > 0 {
				return ReportResult{}, errTxnFull
			}
			if largest != 0 {
				return ReportResult{}, &drainNeed{from: largest, to: dst.ID}
			}
		}
		if len(recs) > 1 && w.entries > mergeMaxPending {
			return ReportResult{}, errTxnFull // see mergeMaxPending
		}
	}
	res.Campaign = dst.ID
	// Phase 2: writes.
	for _, src := range srcs {
		if err := b.mergeInto(w, dst, src); err != nil {
			return ReportResult{}, err
		}
		res.Merged = append(res.Merged, src.ID)
	}
	if !res.Created {
		if res.Withdrawn, err = withdraw(w, dst, in, prior); err != nil {
			return ReportResult{}, err
		}
	}
	// Reporter.
	rk := reporterKey(dst.ID, in.Kind, in.reporterKey())
	first, last := in.Time, in.Time
	// A campaign created by this report has no entries yet: skip the
	// reads (misses that would search every level of the tree).
	var item *badger.Item
	err = badger.ErrKeyNotFound
	if !res.Created {
		item, err = txn.Get(rk)
	}
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		if in.Kind == KindSpam {
			dst.SpamReporters++
		} else {
			dst.HamReporters++
		}
		if err := w.set(reporterCampKey(in.reporterKey(), dst.ID, in.Kind), nil); err != nil {
			return ReportResult{}, err
		}
	case err != nil:
		return ReportResult{}, fmt.Errorf("read reporter: %w", err)
	default:
		res.Repeated = true
		err := item.Value(func(v []byte) error {
			if f, l, ok := decodeReporter(v); ok {
				first, last = minTime(f, in.Time), maxTime(l, in.Time)
			}
			return nil
		})
		if err != nil {
			return ReportResult{}, err
		}
	}
	if err := w.set(rk, encodeReporter(first, last)); err != nil {
		return ReportResult{}, err
	}
	// Counters.
	var dc dayCounts
	if in.Kind == KindSpam {
		dst.SpamReports++
		dc.spam = 1
	} else {
		dst.HamReports++
		dc.ham = 1
	}
	if err := addDay(w, dst.ID, dayNumber(in.Time), dc, res.Created); err != nil {
		return ReportResult{}, err
	}
	hc := hourCounts{spam: dc.spam, ham: dc.ham}
	if err := addHour(w, dst.ID, hourNumber(in.Time), hc, res.Created); err != nil {
		return ReportResult{}, err
	}
	ht := w.hourTotal(hourNumber(in.Time))
	ht.SpamReports += dc.spam
	ht.HamReports += dc.ham
	dst.FirstSeen = minTime(dst.FirstSeen, in.Time)
	dst.LastSeen = maxTime(dst.LastSeen, in.Time)
	if dst.SampleSubject == "" {
		dst.SampleSubject = in.Subject
	}
	if dst.SampleFrom == "" {
		dst.SampleFrom = in.From
	}
	if dst.SampleText == "" {
		dst.SampleText = sampleText(in.Text)
	}
	dst.Sketches = b.keepSketch(dst.Sketches, in.Sketch, true)
	for _, sk := range in.MoreSketches {
		dst.Sketches = b.keepSketch(dst.Sketches, sk, true)
	}
	if len(in.Terms) > 0 && len(in.Terms) <= MaxTermsLen && len(dst.Terms) < b.opts.MaxSketches &&
		!slices.ContainsFunc(dst.Terms, func(s []byte) bool { return bytes.Equal(s, in.Terms) }) {
		dst.Terms = append(dst.Terms, bytes.Clone(in.Terms))
	}
	// Index.
	if in.Index {
		seen := make(map[string]struct{}, len(in.Keys))
		var add [][]byte
		for i, k := range in.Keys {
			// A key of dst or of a merged campaign is already dst's; a
			// key of a campaign left alone stays with its owner.
			if len(k) == 0 || (keyIDs[i] != 0 && recs[keyIDs[i]] != nil) {
				continue
			}
			if _, dup := seen[string(k)]; dup {
				continue
			}
			seen[string(k)] = struct{}{}
			w.addIndex(k, dst.ID)
			add = append(add, k)
		}
		if err := w.appendKeys(dst.ID, dst.numKeys, add, res.Created); err != nil {
			return ReportResult{}, err
		}
		dst.numKeys += int64(len(add))
	}
	if err := putMsgReport(w, in, dst.ID, b.opts.Expiry); err != nil {
		return ReportResult{}, err
	}
	if in.Kind == KindHam && in.Revoke != nil && dst.State == StateActive && in.Revoke(&dst.Campaign) {
		dst.State, res.Revoked = StateRevoked, true
	}
	if err := putRecord(w, dst); err != nil {
		return ReportResult{}, err
	}
	return res, nil
}

// chooseCampaigns decides what a report joins (dst, nil when it must
// create a campaign or do nothing) and which campaigns are merged into
// dst (srcs), from the campaigns read (recs, by id; ids sorted), those
// owning one of the report's keys (owned). Whatever the caller asks,
// only active campaigns are merged, and only into an active one: an
// administrator's decision or a revocation is never spread nor lost by a
// merge.
func chooseCampaigns(in *ReportInput, ids, owned []CampaignID, recs map[CampaignID]*record) (dst *record, srcs []*record) {
	if in.Vetted {
		dst = recs[in.Target]
		if dst == nil {
			// No target (or it was deleted meanwhile): the oldest
			// campaign owning a key, i.e. one created earlier in the same
			// batch; nothing is merged.
			for _, id := range owned {
				if r := recs[id]; r != nil && (dst == nil || id < dst.ID) {
					dst = r
				}
			}
			return dst, nil
		}
		if dst.State != StateActive {
			return dst, nil
		}
		group := []*record{dst}
		for _, id := range in.MayMerge {
			if r := recs[id]; r != nil && r.State == StateActive && !slices.Contains(group, r) {
				group = append(group, r)
			}
		}
		slices.SortFunc(group, func(a, b *record) int { return cmp.Compare(a.ID, b.ID) })
		return group[0], group[1:]
	}
	// Without vetting: every active campaign found is merged into the
	// oldest active one; when none is active, the oldest is joined alone.
	for _, id := range ids {
		r := recs[id]
		if r == nil || r.State != StateActive {
			continue
		}
		if dst == nil {
			dst = r
		} else {
			srcs = append(srcs, r)
		}
	}
	if dst == nil {
		for _, id := range ids {
			if r := recs[id]; r != nil {
				return r, nil
			}
		}
	}
	return dst, srcs
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// addDay adds to a day counter; fresh says the campaign was just created
// (no counter to read).
func addDay(w *wtx, id CampaignID, day uint32, add dayCounts, fresh bool) error {
	k := dayKey(id, day)
	var cur dayCounts
	var item *badger.Item
	err := badger.ErrKeyNotFound
	if !fresh {
		item, err = w.txn.Get(k)
	}
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
	case err != nil:
		return fmt.Errorf("read day counter: %w", err)
	default:
		err = item.Value(func(v []byte) error {
			cur, _ = decodeDay(v) // a malformed counter restarts at zero
			return nil
		})
		if err != nil {
			return err
		}
	}
	cur.add(add)
	return w.set(k, cur.encode())
}

// moveEntries moves up to limit keys, reporters and day counters (0: all)
// from src to dst, adjusting both records' key and reporter counts (the
// caller writes the records). done reports whether src has none left.
func moveEntries(w *wtx, dst, src *record, limit int) (done bool, err error) {
	left := func(n int) int {
		if limit == 0 {
			return 0
		}
		return max(limit-n, -1)
	}
	moved := 0
	// Keys.
	if l := left(moved); l >= 0 {
		chunks, more, err := listChunks(w.txn, src.ID, l)
		if err != nil {
			return false, err
		}
		for _, c := range chunks {
			for _, k := range c.keys {
				w.moveIndex(k, src.ID, dst.ID)
			}
			if err := w.appendKeys(dst.ID, dst.numKeys, c.keys, false); err != nil {
				return false, err
			}
			if err := w.del(keyChunkKey(src.ID, c.n)); err != nil {
				return false, err
			}
			dst.numKeys += int64(len(c.keys))
			src.numKeys -= int64(len(c.keys))
			moved += len(c.keys)
		}
		if more {
			return false, nil // the rest in the next step
		}
	}
	// Reporters.
	if l := left(moved); l >= 0 && (limit == 0 || l > 0) {
		reps, err := collectPrefix(w.txn, idKey(pfxReporter, src.ID), true, l)
		if err != nil {
			return false, fmt.Errorf("list reporters of campaign %d: %w", src.ID, err)
		}
		for _, e := range reps {
			if len(e.k) != 9 {
				continue
			}
			kind := Kind(e.k[0])
			h := binary.BigEndian.Uint64(e.k[1:])
			f, l, ok := decodeReporter(e.v)
			if !ok {
				f, l = src.FirstSeen, src.LastSeen
			}
			dk := reporterKey(dst.ID, kind, h)
			item, err := w.txn.Get(dk)
			switch {
			case errors.Is(err, badger.ErrKeyNotFound):
				if kind == KindSpam {
					dst.SpamReporters++
				} else {
					dst.HamReporters++
				}
				if err := w.set(reporterCampKey(h, dst.ID, kind), nil); err != nil {
					return false, err
				}
			case err != nil:
				return false, err
			default:
				_ = item.Value(func(v []byte) error {
					if f2, l2, ok := decodeReporter(v); ok {
						f, l = minTime(f, f2), maxTime(l, l2)
					}
					return nil
				})
			}
			if kind == KindSpam {
				src.SpamReporters--
			} else {
				src.HamReporters--
			}
			if err := w.set(dk, encodeReporter(f, l)); err != nil {
				return false, err
			}
			if err := w.del(reporterKey(src.ID, kind, h)); err != nil {
				return false, err
			}
			if err := w.del(reporterCampKey(h, src.ID, kind)); err != nil {
				return false, err
			}
		}
		moved += len(reps)
	}
	// Day counters.
	if l := left(moved); l >= 0 && (limit == 0 || l > 0) {
		days, err := collectPrefix(w.txn, idKey(pfxDay, src.ID), true, l)
		if err != nil {
			return false, fmt.Errorf("list day counters of campaign %d: %w", src.ID, err)
		}
		for _, e := range days {
			if len(e.k) != 4 {
				continue
			}
			day := binary.BigEndian.Uint32(e.k)
			c, _ := decodeDay(e.v)
			if err := addDay(w, dst.ID, day, c, false); err != nil {
				return false, err
			}
			if err := w.del(dayKey(src.ID, day)); err != nil {
				return false, err
			}
		}
		moved += len(days)
	}
	// Hour counters.
	if l := left(moved); l >= 0 && (limit == 0 || l > 0) {
		hours, err := collectPrefix(w.txn, idKey(pfxHour, src.ID), true, l)
		if err != nil {
			return false, fmt.Errorf("list hour counters of campaign %d: %w", src.ID, err)
		}
		for _, e := range hours {
			if len(e.k) != 4 {
				continue
			}
			h := binary.BigEndian.Uint32(e.k)
			c, _ := decodeHour(e.v)
			if err := addHour(w, dst.ID, h, c, false); err != nil {
				return false, err
			}
			if err := w.del(hourKey(src.ID, h)); err != nil {
				return false, err
			}
		}
		moved += len(hours)
	}
	if limit == 0 {
		return true, nil
	}
	return moved < limit, nil
}

// mergeInto moves everything of src into dst and deletes src.
func (b *Badger) mergeInto(w *wtx, dst, src *record) error {
	if _, err := moveEntries(w, dst, src, 0); err != nil {
		return err
	}
	dst.Messages += src.Messages
	dst.SpamReports += src.SpamReports
	dst.HamReports += src.HamReports
	for a, n := range src.Actions {
		if dst.Actions == nil {
			dst.Actions = make(map[string]int64)
		}
		dst.Actions[a] += n
	}
	dst.FirstSeen = minTime(dst.FirstSeen, src.FirstSeen)
	dst.LastSeen = maxTime(dst.LastSeen, src.LastSeen)
	if dst.SampleSubject == "" {
		dst.SampleSubject = src.SampleSubject
	}
	if dst.SampleFrom == "" {
		dst.SampleFrom = src.SampleFrom
	}
	if dst.SampleText == "" {
		dst.SampleText = src.SampleText
	}
	for _, s := range src.Sketches {
		dst.Sketches = b.keepSketch(dst.Sketches, s, false)
	}
	for _, s := range src.Terms {
		if len(dst.Terms) >= b.opts.MaxSketches {
			break
		}
		if !slices.ContainsFunc(dst.Terms, func(t []byte) bool { return bytes.Equal(s, t) }) {
			dst.Terms = append(dst.Terms, s)
		}
	}
	dst.MergedFrom = append(dst.MergedFrom, src.ID)
	dst.MergedFrom = append(dst.MergedFrom, src.MergedFrom...)
	if len(dst.MergedFrom) > DefaultMaxMergedFrom {
		dst.MergedFrom = dst.MergedFrom[len(dst.MergedFrom)-DefaultMaxMergedFrom:]
	}
	if err := w.mergeRing(dst.ID, src.ID, hourNumber(b.now())); err != nil {
		return err
	}
	if err := w.mergeSenders(dst.ID, src.ID, b.opts.MaxCampaignSenders); err != nil {
		return err
	}
	return delRecord(w, src)
}

// drain moves the entries of campaign from into campaign to, one bounded
// transaction at a time, leaving both campaigns valid after each.
func (b *Badger) drain(ctx context.Context, from, to CampaignID) error {
	b.log.Info("store: merging a large campaign in several transactions", "from", from, "into", to)
	for {
		done := false
		err := b.updateIndex(ctx, 0, 0, func(w *wtx) error {
			src, err := getRecord(w.txn, from)
			if errors.Is(err, ErrNotFound) {
				done = true
				return nil
			}
			if err != nil {
				return err
			}
			dst, err := getRecord(w.txn, to)
			if errors.Is(err, ErrNotFound) {
				done = true
				return nil
			}
			if err != nil {
				return err
			}
			done, err = moveEntries(w, dst, src, txnBudgetEntries/4)
			if err != nil {
				return err
			}
			if err := putRecord(w, src); err != nil {
				return err
			}
			return putRecord(w, dst)
		})
		if err != nil {
			return fmt.Errorf("merge campaign %d into %d: %w", from, to, err)
		}
		if done {
			return nil
		}
	}
}

// keepSketch appends sk to sketches unless it is empty, already there, or
// its group (sketches with the same first byte) already has
// Options.MaxSketches; clone copies it first.
func (b *Badger) keepSketch(sketches [][]byte, sk []byte, clone bool) [][]byte {
	if len(sk) == 0 || slices.ContainsFunc(sketches, func(s []byte) bool { return bytes.Equal(s, sk) }) {
		return sketches
	}
	n := 0
	for _, s := range sketches {
		if len(s) > 0 && s[0] == sk[0] {
			n++
		}
	}
	if n >= b.opts.MaxSketches {
		return sketches
	}
	if clone {
		sk = bytes.Clone(sk)
	}
	return append(sketches, sk)
}

// sampleText is s as a campaign's SampleText: valid UTF-8 (invalid bytes
// become U+FFFD), at most MaxSampleText bytes, cut between characters.
func sampleText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxSampleText {
		return s
	}
	cut := MaxSampleText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
