package qgram

import (
	"slices"
	"time"
)

// Match is a document of the index found a duplicate of a new one.
type Match struct {
	ID         uint64
	Similarity float64 // docq
}

// Index is the paper's inverted q-gram index over a sliding time window
// (sect. 3.4–3.6): one index per slot (an hour by default) maps each
// q-gram to the documents of that slot holding it, and a new document is
// compared with the documents of the slots within the window only. A slot
// older than the window is dropped whole when time moves past it, so the
// memory is that of the q-grams seen within the window.
//
// The paper keeps a bitmap of the slot's documents per q-gram; Index keeps
// the same information as a posting list of document numbers (a sparse
// bitmap). It is not safe for concurrent use.
type Index struct {
	opts  Options
	slots []*slot // oldest first, each within the window of the newest
}

// slot is the index of one time slot.
type slot struct {
	start    int64 // slot number: Unix time / Slot
	ids      []uint64
	sizes    []int32
	postings map[uint64][]int32
}

// NewIndex returns an empty index.
func NewIndex(opts Options) *Index {
	return &Index{opts: opts.withDefaults()}
}

// Add compares the document id, arrived at t with profile p, with every
// document of the window ending at t and returns those whose docq reaches
// Options.Threshold, most similar first; then it indexes the document.
// Slots that left the window are dropped first. A document older than the
// window's oldest slot is compared but not indexed.
func (x *Index) Add(id uint64, t time.Time, p Profile) []Match {
	matches := x.Query(t, p)
	n := x.slotOf(t)
	i, found := slices.BinarySearchFunc(x.slots, n, func(s *slot, n int64) int { return cmpInt(s.start, n) })
	if !found {
		if newest := x.newest(); newest != nil && n <= newest.start-x.width() {
			return matches // outside the window
		}
		x.slots = slices.Insert(x.slots, i, &slot{start: n, postings: map[uint64][]int32{}})
	}
	s := x.slots[i]
	doc := int32(len(s.ids))
	s.ids = append(s.ids, id)
	s.sizes = append(s.sizes, int32(len(p)))
	for _, g := range p {
		s.postings[g] = append(s.postings[g], doc)
	}
	x.expire()
	return matches
}

// Query returns the documents of the window ending at t whose docq with p
// reaches Options.Threshold, most similar first, without indexing p. Only
// documents sharing a q-gram with p are compared (the counters of fig. 2).
func (x *Index) Query(t time.Time, p Profile) []Match {
	if len(p) == 0 {
		return nil
	}
	n := x.slotOf(t)
	var out []Match
	var counters []int32
	for _, s := range x.slots {
		if s.start > n || s.start <= n-x.width() {
			continue
		}
		counters = slices.Grow(counters[:0], len(s.ids))[:len(s.ids)]
		clear(counters)
		for _, g := range p {
			for _, d := range s.postings[g] {
				counters[d]++
			}
		}
		for d, c := range counters {
			if c == 0 {
				continue
			}
			sim := float64(c) / float64(max(len(p), int(s.sizes[d])))
			if sim >= x.opts.Threshold {
				out = append(out, Match{ID: s.ids[d], Similarity: sim})
			}
		}
	}
	slices.SortFunc(out, func(a, b Match) int {
		if a.Similarity != b.Similarity {
			if a.Similarity > b.Similarity {
				return -1
			}
			return 1
		}
		return cmpInt(int64(a.ID), int64(b.ID))
	})
	return out
}

// Len returns the number of documents indexed within the window.
func (x *Index) Len() int {
	n := 0
	for _, s := range x.slots {
		n += len(s.ids)
	}
	return n
}

// Slots returns the number of slot indexes held.
func (x *Index) Slots() int { return len(x.slots) }

// expire drops the slots that left the window of the newest slot.
func (x *Index) expire() {
	newest := x.newest()
	if newest == nil {
		return
	}
	k := 0
	for k < len(x.slots) && x.slots[k].start <= newest.start-x.width() {
		k++
	}
	x.slots = slices.Delete(x.slots, 0, k)
}

func (x *Index) newest() *slot {
	if len(x.slots) == 0 {
		return nil
	}
	return x.slots[len(x.slots)-1]
}

// width is the number of slots in the window (24 for the paper's 24
// hourly indexes).
func (x *Index) width() int64 {
	return max(1, int64(x.opts.Window/x.opts.Slot))
}

func (x *Index) slotOf(t time.Time) int64 {
	d := int64(x.opts.Slot)
	ns := t.UnixNano()
	s := ns / d
	if ns < 0 && ns%d != 0 {
		s--
	}
	return s
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
