package store

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"
)

// Sender domains: which domains send ham (the ham table) and which domains
// each campaign's matched copies came from (a campaign's senders), for the
// false-positive watch ("campaigns whose copies came from senders that
// also send ham"). Both are bounded: the ham table keeps at most
// Options.MaxHamSenders domains (the Space-Saving algorithm: a new domain
// replaces the one with the smallest count), a campaign at most
// Options.MaxCampaignSenders.
const (
	pfxCampSenders = 's' // 's' + id → the campaign's sender domains (encodeSenders)
	pfxSenderCamp  = 'S' // 'S' + domain + 0 + id → empty: campaigns with the domain among their senders
	pfxHamSender   = 'A' // 'A' + domain → uvarints count, overestimate: one domain of the ham table
	pfxHamList     = 'l' // 'l' + list id → uvarints count, overestimate: one mailing list of the list table
	pfxGrayCamp    = 'y' // 'y' + id → empty: campaigns whose senders record counts copies held back as graymail
)

// Defaults of the sender bounds.
const (
	DefaultMaxHamSenders      = 10000
	DefaultMaxHamLists        = 4096
	DefaultMaxCampaignSenders = 8
	// MaxSenderDomain bounds a domain's length (DNS names are at most 253
	// bytes); longer ones are not counted.
	MaxSenderDomain = 253
)

// SenderCount is a sender domain with a count of messages.
type SenderCount struct {
	Domain   string
	Messages int64
}

// SenderStore is implemented by stores that keep sender domains (the
// Badger store). The engine uses it when its store has it. The counts are
// this store's own (in a fleet, each node counts the mail it checks) and
// buffered in memory: recording costs no transaction.
type SenderStore interface {
	// RecordSender counts a copy of campaign id from sender (a
	// registrable domain) among the campaign's senders.
	RecordSender(id CampaignID, sender string)
	// RecordHam counts an accepted message that matched no campaign
	// under sender in the ham table.
	RecordHam(sender string)
	// CampaignSenders returns a campaign's sender domains, most copies
	// first.
	CampaignSenders(ctx context.Context, id CampaignID) ([]SenderCount, error)
	// HamSenders returns up to n domains of the ham table with at least
	// min accepted messages (a guaranteed lower bound), most first.
	HamSenders(n int, min int64) []SenderCount
	// HamMessages is the guaranteed lower bound of the accepted messages
	// counted under domain (0 when it is not in the table).
	HamMessages(domain string) int64
	// SenderCampaigns returns up to limit campaigns that have domain
	// among their senders.
	SenderCampaigns(ctx context.Context, domain string, limit int) ([]CampaignID, error)
	// RecordGraymail counts a copy of campaign id whose graymail signs
	// held its action back (accepted, or tagged at most).
	RecordGraymail(id CampaignID)
	// GraymailCampaigns returns up to limit campaigns with copies held
	// back as graymail, most copies first.
	GraymailCampaigns(ctx context.Context, limit int) ([]HeldCampaign, error)
	// CampaignGraymail returns the copies of campaign id held back as
	// graymail; copies still buffered are not included.
	CampaignGraymail(ctx context.Context, id CampaignID) (int64, error)
}

// HeldCampaign is a campaign with the copies of it that graymail signs
// held back.
type HeldCampaign struct {
	ID     CampaignID
	Copies int64
}

var _ SenderStore = (*Badger)(nil)

// validDomain reports whether d can be a key: not empty, bounded, no NUL
// (the separator of pfxSenderCamp keys) nor control characters.
func validDomain(d string) bool {
	if d == "" || len(d) > MaxSenderDomain {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] <= ' ' || d[i] == 0x7f {
			return false
		}
	}
	return true
}

// maxPendingSenders bounds the campaigns whose senders wait in memory
// for the next flush; copies beyond it are not counted.
const maxPendingSenders = 1 << 16

// RecordSender buffers a copy of campaign id from sender; the hit flush
// writes it (flushSenders).
func (b *Badger) RecordSender(id CampaignID, sender string) {
	if b.opts.ReadOnly || !validDomain(sender) {
		return
	}
	b.hitMu.Lock()
	defer b.hitMu.Unlock()
	m := b.senders[id]
	if m == nil {
		if len(b.senders) >= maxPendingSenders {
			return
		}
		m = make(map[string]int64, 1)
		b.senders[id] = m
	}
	// At most 4× what a campaign keeps between flushes: further new
	// domains would be crowded out anyway.
	if _, ok := m[sender]; !ok && len(m) >= 4*b.opts.MaxCampaignSenders {
		return
	}
	m[sender]++
}

// RecordGraymail buffers a copy of campaign id held back as graymail; the
// hit flush writes it with the campaign's senders (flushSenders).
func (b *Badger) RecordGraymail(id CampaignID) {
	if b.opts.ReadOnly {
		return
	}
	b.hitMu.Lock()
	defer b.hitMu.Unlock()
	if _, ok := b.grayHeld[id]; !ok && len(b.grayHeld) >= maxPendingSenders {
		return
	}
	b.grayHeld[id]++
}

// RecordListHam counts an accepted message that matched no campaign under
// its mailing list (a List-Id, lower-cased) in the list table: kept like
// the ham table, bounded by Options.MaxHamLists, across restarts.
func (b *Badger) RecordListHam(list string) {
	if b.opts.ReadOnly || !validListID(list) {
		return
	}
	b.lists.add(list, 1, 0)
}

// ListHamMessages returns the guaranteed count of list in the list table.
func (b *Badger) ListHamMessages(list string) int64 {
	return b.lists.lower(list)
}

// MaxListID bounds a list identifier's length; longer ones are not
// counted.
const MaxListID = 255

// validListID says whether id can be a key of the list table: 1 to
// MaxListID bytes of printable ASCII or UTF-8, no space or angle bracket.
func validListID(id string) bool {
	if id == "" || len(id) > MaxListID || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if r <= ' ' || r == 0x7f || r == '<' || r == '>' {
			return false
		}
	}
	return true
}

// RecordHam counts an accepted message of sender in the ham table.
func (b *Badger) RecordHam(sender string) {
	if b.opts.ReadOnly || !validDomain(sender) {
		return
	}
	b.ham.add(sender, 1, 0)
}

// flushSenders writes the buffered campaign senders and graymail holds,
// a bounded transaction at a time; those of campaigns deleted meanwhile
// are dropped.
func (b *Badger) flushSenders(ctx context.Context) error {
	b.hitMu.Lock()
	pending, held := b.senders, b.grayHeld
	if len(pending) == 0 && len(held) == 0 {
		b.hitMu.Unlock()
		return nil
	}
	b.senders = make(map[CampaignID]map[string]int64)
	b.grayHeld = make(map[CampaignID]int64)
	b.hitMu.Unlock()
	ids := slices.Collect(maps.Keys(pending))
	for id := range held {
		if _, ok := pending[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	_, err := b.updateEach(ctx, len(ids), 4*b.opts.MaxCampaignSenders+8, func(w *wtx, i int) error {
		id := ids[i]
		if _, err := w.txn.Get(campaignKey(id)); errors.Is(err, badger.ErrKeyNotFound) {
			return nil // deleted meanwhile
		} else if err != nil {
			return err
		}
		return w.addSenders(id, pending[id], held[id], b.opts.MaxCampaignSenders)
	})
	if err != nil {
		return fmt.Errorf("flush the senders of %d campaigns: %w", len(ids), err)
	}
	return nil
}

// HamSenders returns up to n domains of the ham table whose guaranteed
// count is at least min, most first (ties by domain).
func (b *Badger) HamSenders(n int, min int64) []SenderCount {
	return b.ham.top(n, min)
}

// HamMessages returns the guaranteed count of domain in the ham table.
func (b *Badger) HamMessages(domain string) int64 {
	return b.ham.lower(domain)
}

// CampaignSenders returns campaign id's sender domains, most copies first;
// copies still buffered are not included.
func (b *Badger) CampaignSenders(ctx context.Context, id CampaignID) ([]SenderCount, error) {
	var ss []SenderCount
	err := b.view(func(txn *badger.Txn) error {
		var err error
		ss, _, err = readSenders(txn, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("senders of campaign %d: %w", id, err)
	}
	return ss, nil
}

// CampaignGraymail returns the copies of campaign id held back as
// graymail; copies still buffered are not included.
func (b *Badger) CampaignGraymail(ctx context.Context, id CampaignID) (int64, error) {
	var held int64
	err := b.view(func(txn *badger.Txn) error {
		var err error
		_, held, err = readSenders(txn, id)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("graymail copies of campaign %d: %w", id, err)
	}
	return held, nil
}

// maxGrayScan bounds the campaigns GraymailCampaigns reads.
const maxGrayScan = 4096

// GraymailCampaigns returns up to limit campaigns with copies held back
// as graymail, most copies first (ties by id), among the maxGrayScan
// newest such campaigns (ids are allocated in order).
func (b *Badger) GraymailCampaigns(ctx context.Context, limit int) ([]HeldCampaign, error) {
	var out []HeldCampaign
	err := b.view(func(txn *badger.Txn) error {
		n := 0
		return scanPrefixReverse(txn, []byte{pfxGrayCamp}, func(s []byte) (bool, error) {
			n++
			if len(s) != 8 {
				return n < maxGrayScan, nil
			}
			id := CampaignID(binary.BigEndian.Uint64(s))
			if _, held, err := readSenders(txn, id); err == nil && held > 0 {
				out = append(out, HeldCampaign{ID: id, Copies: held})
			} // else a malformed record hides its campaign, not the list
			return n < maxGrayScan, ctx.Err()
		})
	})
	if err != nil {
		return nil, fmt.Errorf("campaigns held back as graymail: %w", err)
	}
	slices.SortFunc(out, func(a, b HeldCampaign) int {
		if c := cmp.Compare(b.Copies, a.Copies); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// SenderCampaigns returns up to limit campaigns with domain among their
// senders, in id order.
func (b *Badger) SenderCampaigns(ctx context.Context, domain string, limit int) ([]CampaignID, error) {
	if !validDomain(domain) {
		return nil, nil
	}
	prefix := senderCampPrefix(domain)
	var ids []CampaignID
	err := b.view(func(txn *badger.Txn) error {
		_, err := scanPrefix(txn, prefix, false, limit, func(s, _ []byte) error {
			if len(s) == 8 {
				ids = append(ids, CampaignID(binary.BigEndian.Uint64(s)))
			}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("campaigns of sender %s: %w", domain, err)
	}
	return ids, nil
}

func senderCampPrefix(domain string) []byte {
	k := make([]byte, 0, len(domain)+2)
	k = append(k, pfxSenderCamp)
	k = append(k, domain...)
	return append(k, 0)
}

func senderCampKey(domain string, id CampaignID) []byte {
	return binary.BigEndian.AppendUint64(senderCampPrefix(domain), uint64(id))
}

// countKey is the key of name in the table of counts under prefix pfx
// (pfxHamSender, pfxHamList).
func countKey(pfx byte, name string) []byte {
	return append([]byte{pfx}, name...)
}

// encodeSenders encodes a campaign's senders: count, then domain and
// messages of each, then the copies held back as graymail when there are
// any (a record without them reads as before, and builds that predate
// them ignore the trailing count).
func encodeSenders(ss []SenderCount, held int64) []byte {
	b := binary.AppendUvarint(nil, uint64(len(ss)))
	for _, s := range ss {
		b = binary.AppendUvarint(b, uint64(len(s.Domain)))
		b = append(b, s.Domain...)
		b = binary.AppendUvarint(b, uint64(max(s.Messages, 0)))
	}
	if held > 0 {
		b = binary.AppendUvarint(b, uint64(held))
	}
	return b
}

var errBadSenders = errors.New("malformed sender list")

// decodeSenders decodes encodeSenders: the senders and the copies held
// back as graymail.
func decodeSenders(b []byte) ([]SenderCount, int64, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, 0, errBadSenders
	}
	b = b[k:]
	ss := make([]SenderCount, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, 0, errBadSenders
		}
		d := string(b[k : k+int(l)])
		b = b[k+int(l):]
		m, k2 := binary.Uvarint(b)
		if k2 <= 0 {
			return nil, 0, errBadSenders
		}
		b = b[k2:]
		ss = append(ss, SenderCount{Domain: d, Messages: int64(min(m, 1<<62))})
	}
	var held uint64
	if len(b) > 0 {
		var k int
		if held, k = binary.Uvarint(b); k != len(b) {
			return nil, 0, errBadSenders
		}
	}
	return ss, int64(min(held, 1<<62)), nil
}

// readSenders reads campaign id's senders and its copies held back as
// graymail.
func readSenders(txn *badger.Txn, id CampaignID) ([]SenderCount, int64, error) {
	item, err := txn.Get(idKey(pfxCampSenders, id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var ss []SenderCount
	var held int64
	err = item.Value(func(v []byte) error {
		ss, held, err = decodeSenders(v)
		return err
	})
	return ss, held, err
}

func sortSenders(ss []SenderCount) {
	slices.SortFunc(ss, func(a, b SenderCount) int {
		if c := cmp.Compare(b.Messages, a.Messages); c != 0 {
			return c
		}
		return cmp.Compare(a.Domain, b.Domain)
	})
}

// addSenders adds copies by domain to campaign id's senders, keeping at
// most max: a domain new to a full list replaces the one with the fewest
// copies and inherits its count (Space-Saving), so that a steady sender
// is never crowded out by a stream of one-off domains. It adds held to
// the copies held back as graymail. The reverse indexes (pfxSenderCamp,
// pfxGrayCamp) follow.
func (w *wtx) addSenders(id CampaignID, adds map[string]int64, held int64, max int) error {
	ss, was, err := readSenders(w.txn, id)
	if err != nil {
		return fmt.Errorf("senders of campaign %d: %w", id, err)
	}
	if held > 0 && was == 0 {
		if err := w.set(idKey(pfxGrayCamp, id), nil); err != nil {
			return err
		}
	}
	doms := make([]string, 0, len(adds))
	for d := range adds {
		doms = append(doms, d)
	}
	// Most copies first, so that a full list keeps the biggest senders.
	slices.SortFunc(doms, func(a, b string) int {
		if c := cmp.Compare(adds[b], adds[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, d := range doms {
		n := adds[d]
		if i := slices.IndexFunc(ss, func(s SenderCount) bool { return s.Domain == d }); i >= 0 {
			ss[i].Messages += n
			continue
		}
		if len(ss) < max {
			ss = append(ss, SenderCount{Domain: d, Messages: n})
		} else {
			sortSenders(ss)
			last := &ss[len(ss)-1]
			if err := w.del(senderCampKey(last.Domain, id)); err != nil {
				return err
			}
			*last = SenderCount{Domain: d, Messages: last.Messages + n}
		}
		if err := w.set(senderCampKey(d, id), nil); err != nil {
			return err
		}
	}
	sortSenders(ss)
	return w.set(idKey(pfxCampSenders, id), encodeSenders(ss, was+held))
}

// dropSenders deletes campaign id's senders and their reverse indexes.
func (w *wtx) dropSenders(id CampaignID) error {
	ss, held, err := readSenders(w.txn, id)
	if err != nil && !errors.Is(err, errBadSenders) {
		return err
	}
	for _, s := range ss {
		if err := w.del(senderCampKey(s.Domain, id)); err != nil {
			return err
		}
	}
	if held > 0 || err != nil {
		if err := w.del(idKey(pfxGrayCamp, id)); err != nil {
			return err
		}
	}
	if ss == nil && held == 0 && err == nil {
		return nil
	}
	return w.del(idKey(pfxCampSenders, id))
}

// mergeSenders adds src's senders and graymail holds to dst's (src's are
// dropped with its record).
func (w *wtx) mergeSenders(dst, src CampaignID, max int) error {
	ss, held, err := readSenders(w.txn, src)
	if err != nil || (len(ss) == 0 && held == 0) {
		return nil // nothing usable to move; dropSenders cleans up
	}
	adds := make(map[string]int64, len(ss))
	for _, s := range ss {
		adds[s.Domain] += s.Messages
	}
	return w.addSenders(dst, adds, held, max)
}

// hamTable is the bounded table of the domains that send ham: at most max
// domains, each with a count and the overestimate it inherited when it
// replaced another (count − over is a guaranteed lower bound). It lives in
// memory and is written to the store (pfxHamSender) with the hit counts.
type hamTable struct {
	mu      sync.Mutex
	max     int
	entries map[string]*hamEntry
	heap    hamHeap         // min-heap by count: the one to replace
	dirty   map[string]bool // changed (or removed) since the last flush
}

type hamEntry struct {
	domain      string
	count, over int64
	idx         int
}

type hamHeap []*hamEntry

func (h hamHeap) Len() int { return len(h) }
func (h hamHeap) Less(i, j int) bool {
	if h[i].count != h[j].count {
		return h[i].count < h[j].count
	}
	return h[i].domain < h[j].domain
}
func (h hamHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *hamHeap) Push(x any) { e := x.(*hamEntry); e.idx = len(*h); *h = append(*h, e) }
func (h *hamHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

func newHamTable(max int) *hamTable {
	return &hamTable{max: max, entries: make(map[string]*hamEntry), dirty: make(map[string]bool)}
}

// add counts n messages of domain; over is the overestimate carried by a
// loaded entry (0 for new counts).
func (t *hamTable) add(domain string, n, over int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dirty[domain] = true
	if e := t.entries[domain]; e != nil {
		e.count += n
		e.over += over
		heap.Fix(&t.heap, e.idx)
		return
	}
	if len(t.entries) < t.max {
		e := &hamEntry{domain: domain, count: n, over: over}
		t.entries[domain] = e
		heap.Push(&t.heap, e)
		return
	}
	// Replace the smallest: the newcomer may have been counted up to its
	// count before.
	e := t.heap[0]
	delete(t.entries, e.domain)
	t.dirty[e.domain] = true
	e.domain, e.over, e.count = domain, e.count+over, e.count+n
	t.entries[domain] = e
	heap.Fix(&t.heap, 0)
}

func (t *hamTable) lower(domain string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.entries[domain]; e != nil {
		return e.count - e.over
	}
	return 0
}

func (t *hamTable) top(n int, min int64) []SenderCount {
	t.mu.Lock()
	out := make([]SenderCount, 0, 16)
	for _, e := range t.entries {
		if l := e.count - e.over; l >= min && l > 0 {
			out = append(out, SenderCount{Domain: e.domain, Messages: l})
		}
	}
	t.mu.Unlock()
	sortSenders(out)
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// takeDirty returns the changed entries since the last call: the encoded
// value of each, nil for a removed one.
func (t *hamTable) takeDirty() map[string][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.dirty) == 0 {
		return nil
	}
	out := make(map[string][]byte, len(t.dirty))
	for d := range t.dirty {
		if e := t.entries[d]; e != nil {
			v := binary.AppendUvarint(nil, uint64(e.count))
			out[d] = binary.AppendUvarint(v, uint64(e.over))
		} else {
			out[d] = nil
		}
	}
	clear(t.dirty)
	return out
}

// markDirty marks domains to be written again (after a failed flush).
func (t *hamTable) markDirty(ds map[string][]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for d := range ds {
		t.dirty[d] = true
	}
}

// loadHamTable reads the ham table written by earlier runs.
func (b *Badger) loadHamTable() error {
	return b.loadCounts(pfxHamSender, b.ham, validDomain)
}

// loadCounts reads into t the table of counts stored under prefix pfx,
// leaving out the names valid refuses.
func (b *Badger) loadCounts(pfx byte, t *hamTable, valid func(string) bool) error {
	return b.view(func(txn *badger.Txn) error {
		_, err := scanPrefix(txn, []byte{pfx}, true, 0, func(s, v []byte) error {
			c, k := binary.Uvarint(v)
			if k <= 0 {
				return nil // malformed: forgotten
			}
			o, k2 := binary.Uvarint(v[k:])
			if k2 <= 0 || o > c || !valid(string(s)) {
				return nil
			}
			// Marked dirty: the first flush rewrites the table (and
			// removes what a smaller bound evicted).
			t.add(string(s), int64(min(c, 1<<62)), int64(o))
			return nil
		})
		return err
	})
}

// flushHamTable writes the ham table's changes, a bounded transaction at a
// time.
func (b *Badger) flushHamTable(ctx context.Context) error {
	if err := b.flushCounts(ctx, pfxHamSender, b.ham); err != nil {
		return fmt.Errorf("flush ham senders: %w", err)
	}
	if err := b.flushCounts(ctx, pfxHamList, b.lists); err != nil {
		return fmt.Errorf("flush ham lists: %w", err)
	}
	return nil
}

// flushCounts writes the changes of t, stored under prefix pfx.
func (b *Badger) flushCounts(ctx context.Context, pfx byte, t *hamTable) error {
	dirty := t.takeDirty()
	if len(dirty) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(dirty))
	_, err := b.updateEach(ctx, len(names), 2, func(w *wtx, i int) error {
		k := countKey(pfx, names[i])
		if v := dirty[names[i]]; v != nil {
			return w.set(k, v)
		}
		return w.del(k)
	})
	if err != nil {
		t.markDirty(dirty) // written again at the next flush
		return err
	}
	return nil
}
