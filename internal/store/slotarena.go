package store

// arenaSlots is the size of the mappings a slotArena carves shards from:
// large enough for huge pages, a multiple of 1024 slots (whole pages).
const arenaSlots = 1 << 22

// slotArena gives the shards of a table being built their slots from a
// few large mappings instead of one small mapping each, so that the
// kernel can back them with huge pages (allocSlots). Each part is a
// whole number of pages (shards have at least 1<<minShardBits slots), so
// a shard frees its own part alone (freeSlots) when it grows or the
// table goes. finish frees what was not given out.
type slotArena struct {
	rest []slot // the current mapping's part not given out
}

// alloc returns n empty slots; mapped as for allocSlots.
func (a *slotArena) alloc(n int) (s []slot, mapped bool) {
	if n%1024 != 0 {
		return allocSlots(n)
	}
	if len(a.rest) < n {
		a.finish()
		region, mapped := allocSlots(max(n, arenaSlots))
		if !mapped {
			return make([]slot, n), false
		}
		a.rest = region
	}
	s, a.rest = a.rest[:n:n], a.rest[n:]
	return s, true
}

// finish frees the part of the current mapping not given out.
func (a *slotArena) finish() {
	freeSlots(a.rest)
	a.rest = nil
}
