package store

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"runtime"
	"slices"
	"sync"
)

// keyTable is the in-memory index of signature keys: a multiset of
// (fingerprint of a key, campaign id) pairs in open-addressing hash
// tables, 12 bytes a slot, with no Go allocation per key. It answers
// "which campaigns may own this key?"; Lookup verifies a candidate that
// one exact key alone found against the campaign's key list (query.go),
// and the engine checks the others against their sketches, so a
// fingerprint collision never makes a false hit.
//
// A key's 64-bit hash is keyed by a secret of the store (keyHash), so
// that nobody can choose keys that collide or crowd one region of the
// table. The hash picks one of the table's shards (its high bits, by a
// multiply-shift), and the rest of it, mixed, makes a 48-bit in-shard
// fingerprint q: its top bits are the home slot in the shard, the others
// (the remainder) are kept in the slot. Each shard is a Robin Hood
// linear-probing table of 2^bits slots that keeps each entry's distance
// from its home slot, so that an entry's whole fingerprint is known from
// its position, its distance and its remainder: a shard doubles (moving
// one more bit of the remainder into the home slot) without the keys,
// and deletion shifts the following entries back (no tombstones).
//
// Shards have their own lock: lookups take it shared, changes
// exclusively; a shard grows alone, so growth costs a copy of one shard,
// not of the table.
type keyTable struct {
	k0, k1  uint64 // the hash key (keyHash)
	shards  []tableShard
	scratch sync.Pool // *findScratch
}

// tableShard is one shard of a keyTable.
type tableShard struct {
	mu     sync.RWMutex
	bits   uint8  // the shard has 1<<bits slots
	mapped bool   // slots are mapped memory (allocSlots)
	n      int    // entries
	slots  []slot // zero: empty
}

// alloc gives the shard 1<<bits empty slots.
func (s *tableShard) alloc(bits uint8) {
	s.bits = bits
	s.slots, s.mapped = allocSlots(1 << bits)
}

// release frees the slots of s, which no one may use any more.
func (s *tableShard) release() {
	if s.mapped {
		freeSlots(s.slots)
	}
	s.slots, s.mapped = nil, false
}

// release frees the table's slots once the table is unreachable.
func (t *keyTable) releaseWhenUnreachable() {
	shards := t.shards
	runtime.AddCleanup(t, func(shards []tableShard) {
		for i := range shards {
			shards[i].release()
		}
	}, shards)
}

// slot is one entry, packed in three 32-bit words: the campaign id's low
// 32 bits; its high 21 bits, the distance from the home slot (7 bits) and
// the remainder's high 4 bits; the remainder's low 32 bits. The id is
// never 0 in an entry, so the zero slot is empty.
type slot struct{ a, b, c uint32 }

const (
	// fpBits is the in-shard fingerprint's length: home-slot bits plus
	// remainder bits.
	fpBits = 48
	// remBits is the longest remainder a slot holds, so shards have at
	// least 1<<(fpBits-remBits) slots.
	remBits       = 36
	minShardBits  = fpBits - remBits
	maxShardBits  = 40
	slotIDBits    = 53 // campaign ids are below 2^53 (fleet.go)
	maxDist       = 1<<7 - 1
	maxSlotID     = 1<<slotIDBits - 1
	tableMaxLoadN = 7 // a shard grows past tableMaxLoadN/tableMaxLoadD full
	tableMaxLoadD = 8
	// tableTargetLoad is the load a table is sized for (shards of
	// minShardBits or more bits, at most maxShards of them): a little
	// below the growth threshold, so that the shards of a table built for
	// the keys present do not grow at once.
	tableTargetLoad = 0.78
	minShards       = 16
	maxShards       = 4096
)

// errSlotID is the error of an id a slot cannot hold.
var errSlotID = errors.New("key index: campaign id out of range")

func (s slot) empty() bool    { return s.a == 0 && s.b&(1<<21-1) == 0 }
func (s slot) id() CampaignID { return CampaignID(uint64(s.a) | uint64(s.b&(1<<21-1))<<32) }
func (s slot) dist() uint32   { return s.b >> 21 & maxDist }
func (s slot) rem() uint64    { return uint64(s.b>>28)<<32 | uint64(s.c) }

func makeSlot(id CampaignID, dist uint32, rem uint64) slot {
	return slot{
		a: uint32(id),
		b: uint32(uint64(id)>>32)&(1<<21-1) | dist<<21 | uint32(rem>>32)<<28,
		c: uint32(rem),
	}
}

func (s slot) withDist(d uint32) slot {
	s.b = s.b&^(maxDist<<21) | d<<21
	return s
}

// newKeyTable returns an empty table keyed by k0, k1 and sized for about
// n keys.
func newKeyTable(k0, k1 uint64, n int) *keyTable {
	b := minShardBits
	shards := 0
	for {
		per := tableTargetLoad * float64(uint64(1)<<b)
		shards = int(float64(n)/per) + 1
		if shards <= maxShards || b == maxShardBits {
			break
		}
		b++
	}
	shards = max(shards, minShards)
	t := &keyTable{k0: k0, k1: k1, shards: make([]tableShard, shards)}
	var a slotArena
	for i := range t.shards {
		s := &t.shards[i]
		s.bits = uint8(b)
		s.slots, s.mapped = a.alloc(1 << b)
	}
	a.finish()
	t.releaseWhenUnreachable()
	return t
}

// keyHash is a keyed 64-bit hash of a key, in the manner of wyhash: each
// 8-byte word is folded in by a 64×64→128-bit multiplication with the
// key's secret.
func keyHash(k0, k1 uint64, key []byte) uint64 {
	const (
		p0 = 0xa0761d6478bd642f
		p1 = 0xe7037ed1a0b428db
		p2 = 0x8ebc6af09c88c6e3
	)
	h := k0 ^ uint64(len(key))*p0
	for len(key) >= 8 {
		h = mum(h^binary.LittleEndian.Uint64(key), k1^p1)
		key = key[8:]
	}
	var t uint64
	for i, c := range key {
		t |= uint64(c) << (8 * i)
	}
	h = mum(h^t^uint64(len(key))<<59, k1^p2)
	return mum(h^k0, p0^k1)
}

func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func (t *keyTable) hash(key []byte) uint64 { return keyHash(t.k0, t.k1, key) }

// locate returns the shard of hash h and the in-shard fingerprint.
func (t *keyTable) locate(h uint64) (*tableShard, uint64) {
	i, _ := bits.Mul64(h, uint64(len(t.shards)))
	// A bijective mix, so that the fingerprint's bits do not follow the
	// shard's.
	g := h
	g ^= g >> 30
	g *= 0xbf58476d1ce4e5b9
	g ^= g >> 27
	g *= 0x94d049bb133111eb
	g ^= g >> 31
	return &t.shards[i], g >> (64 - fpBits)
}

// find calls f with the campaign of every entry whose fingerprint is h's.
func (t *keyTable) find(h uint64, f func(CampaignID)) {
	s, q := t.locate(h)
	s.mu.RLock()
	s.find(q, f)
	s.mu.RUnlock()
}

// findAll calls f(i, id) with the campaign of every entry whose
// fingerprint is hs[i]'s, for each i in order. It takes the read locks of
// all the shards concerned first, in shard order, then loads the home
// slot of every hash before probing any: the loads do not depend on each
// other, so the processor overlaps their cache and TLB misses, which a
// lock's atomic instruction between two loads would keep apart. Writers
// lock one shard at a time, so holding several read locks cannot
// deadlock.
func (t *keyTable) findAll(hs []uint64, f func(i int, id CampaignID)) {
	sc, _ := t.scratch.Get().(*findScratch)
	if sc == nil {
		sc = new(findScratch)
	}
	defer t.scratch.Put(sc)
	locs, held := sc.locs[:0], sc.held[:0]
	for _, h := range hs {
		i, _ := bits.Mul64(h, uint64(len(t.shards)))
		s, q := t.locate(h)
		locs = append(locs, located{s: s, q: q})
		held = append(held, int(i))
	}
	sc.locs, sc.held = locs, held
	slices.Sort(held)
	held = slices.Compact(held)
	for _, i := range held {
		t.shards[i].mu.RLock()
	}
	for j := range locs {
		l := &locs[j]
		home, _ := l.s.split(l.q)
		l.first = l.s.slots[home]
	}
	for j := range locs {
		l := &locs[j]
		if !l.first.empty() {
			l.s.find(l.q, func(id CampaignID) { f(j, id) })
		}
	}
	for _, i := range held {
		t.shards[i].mu.RUnlock()
	}
	clear(locs) // no shard kept alive by the pool
}

// findScratch is findAll's memory, reused: the shard, the in-shard
// fingerprint and the home slot of each hash, and the shards to lock.
type findScratch struct {
	locs []located
	held []int
}

type located struct {
	s     *tableShard
	q     uint64
	first slot
}

// add adds the pair (h, id).
func (t *keyTable) add(h uint64, id CampaignID) {
	s, q := t.locate(h)
	s.mu.Lock()
	s.insert(q, id)
	s.mu.Unlock()
}

// remove removes one pair (h, id), if there is one.
func (t *keyTable) remove(h uint64, id CampaignID) {
	s, q := t.locate(h)
	s.mu.Lock()
	s.remove(q, id)
	s.mu.Unlock()
}

// move makes one pair (h, from) (h, to), or adds (h, to) when there is
// none.
func (t *keyTable) move(h uint64, from, to CampaignID) {
	s, q := t.locate(h)
	s.mu.Lock()
	if !s.replace(q, from, to) {
		s.insert(q, to)
	}
	s.mu.Unlock()
}

// len returns the number of entries.
func (t *keyTable) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		n += s.n
		s.mu.RUnlock()
	}
	return n
}

// bytes returns the memory the slots take.
func (t *keyTable) bytes() int64 {
	var n int64
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		n += int64(len(s.slots)) * 12
		s.mu.RUnlock()
	}
	return n
}

// entries calls f with every entry as (shard, in-shard fingerprint, id).
func (t *keyTable) entries(f func(shard int, q uint64, id CampaignID)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		mask := uint64(len(s.slots) - 1)
		for p, e := range s.slots {
			if !e.empty() {
				home := (uint64(p) - uint64(e.dist())) & mask
				f(i, home<<(fpBits-s.bits)|e.rem(), e.id())
			}
		}
		s.mu.RUnlock()
	}
}

func (s *tableShard) split(q uint64) (home, rem uint64) {
	r := fpBits - uint(s.bits)
	return q >> r, q & (1<<r - 1)
}

func (s *tableShard) find(q uint64, f func(CampaignID)) {
	home, rem := s.split(q)
	mask := uint64(len(s.slots) - 1)
	for p, d := home, uint32(0); ; p, d = (p+1)&mask, d+1 {
		e := s.slots[p]
		if e.empty() || e.dist() < d {
			return
		}
		if e.dist() == d && e.rem() == rem {
			f(e.id())
		}
	}
}

// insert adds (q, id), growing the shard when it is full or a probe
// gets too long.
func (s *tableShard) insert(q uint64, id CampaignID) {
	if (s.n+1)*tableMaxLoadD > len(s.slots)*tableMaxLoadN {
		s.grow()
	}
	home, rem := s.split(q)
	mask := uint64(len(s.slots) - 1)
	cur, d := makeSlot(id, 0, rem), uint32(0)
	for p := home; ; p = (p + 1) & mask {
		e := s.slots[p]
		if e.empty() {
			s.slots[p] = cur.withDist(d)
			s.n++
			return
		}
		if e.dist() < d {
			// Robin Hood: the entry nearer its home moves on.
			s.slots[p] = cur.withDist(d)
			cur, d = e, e.dist()
		}
		d++
		if d > maxDist {
			// The carried entry's fingerprint, from where it would sit.
			h := (p + 1 - uint64(d)) & mask
			q := h<<(fpBits-s.bits) | cur.rem()
			s.grow()
			s.insert(q, cur.id())
			return
		}
	}
}

// slotOf returns the position of an entry (q, id), or -1.
func (s *tableShard) slotOf(q uint64, id CampaignID) int {
	home, rem := s.split(q)
	mask := uint64(len(s.slots) - 1)
	for p, d := home, uint32(0); ; p, d = (p+1)&mask, d+1 {
		e := s.slots[p]
		if e.empty() || e.dist() < d {
			return -1
		}
		if e.dist() == d && e.rem() == rem && e.id() == id {
			return int(p)
		}
	}
}

func (s *tableShard) replace(q uint64, from, to CampaignID) bool {
	p := s.slotOf(q, from)
	if p < 0 {
		return false
	}
	e := s.slots[p]
	s.slots[p] = makeSlot(to, e.dist(), e.rem())
	return true
}

func (s *tableShard) remove(q uint64, id CampaignID) {
	p := s.slotOf(q, id)
	if p < 0 {
		return
	}
	mask := len(s.slots) - 1
	for {
		next := (p + 1) & mask
		e := s.slots[next]
		if e.empty() || e.dist() == 0 {
			s.slots[p] = slot{}
			break
		}
		s.slots[p] = e.withDist(e.dist() - 1)
		p = next
	}
	s.n--
}

// grow doubles the shard: each entry's home gains the remainder's top
// bit.
func (s *tableShard) grow() {
	old, oldBits, oldMapped := s.slots, s.bits, s.mapped
	if oldBits >= maxShardBits {
		panic("store: key index shard full") // 2^40 slots: unreachable
	}
	s.alloc(oldBits + 1)
	s.n = 0
	defer func() {
		// No reader holds the old slots: they are read under the
		// shard's lock, which the caller holds exclusively.
		if oldMapped {
			freeSlots(old)
		}
	}()
	mask := uint64(len(old) - 1)
	for p, e := range old {
		if e.empty() {
			continue
		}
		home := (uint64(p) - uint64(e.dist())) & mask
		s.insert(home<<(fpBits-oldBits)|e.rem(), e.id())
	}
}
