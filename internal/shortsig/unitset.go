package shortsig

import (
	"hash/maphash"
	"strings"
)

// fold says how a text unit is lower-cased (see eachUnit).
type fold uint8

const (
	foldNone    fold = iota // the unit has no upper-case letter
	foldASCII               // ASCII letters and digits, some upper-case
	foldUnicode             // a unit with a non-ASCII character
)

// lower returns the unit u lower-cased as f says (strings.ToLower).
func lower(u string, f fold) string {
	if f == foldNone {
		return u
	}
	return strings.ToLower(u)
}

// unitSet is the set of the distinct text units of a message, in order
// of first appearance, each with its flags: an open-addressing table
// (linear probing) of indexes into units. Its memory is reused from
// message to message, and emptying it costs what was put in it, where a
// map's clear costs the largest size it ever had.
type unitSet struct {
	seed  maphash.Seed
	units []string
	flags []uint8
	slots []int32 // a power of two; index+1 of a unit, 0 free
	lower []byte  // a unit being lower-cased
	// arena holds the lower-cased units (and the links) of the messages
	// signed with the set.
	arena arena
}

// arenaSize is the room an arena is made with.
const arenaSize = 4096

// minSlots is the size of an empty set's table: a short message's units
// fit without a growth.
const minSlots = 256

// reset empties the set.
func (t *unitSet) reset() {
	if t.seed == (maphash.Seed{}) {
		t.seed = maphash.MakeSeed()
	}
	clear(t.units) // no message's strings kept alive
	t.units, t.flags = t.units[:0], t.flags[:0]
	if cap(t.slots) < minSlots {
		t.slots = make([]int32, minSlots)
	}
	t.slots = t.slots[:minSlots]
	clear(t.slots)
}

// len returns the number of units in the set.
func (t *unitSet) len() int { return len(t.units) }

// add adds the unit u, lower-cased as f says, if it is not in the set,
// and returns its index in units. A unit already in the set is looked
// up without a copy of its lower-cased form.
func (t *unitSet) add(u string, f fold) int {
	switch f {
	case foldASCII:
		// u is ASCII letters and digits (eachUnit): setting bit 0x20
		// lower-cases the letters and keeps the digits.
		b := t.lower[:0]
		for i := 0; i < len(u); i++ {
			b = append(b, u[i]|0x20)
		}
		t.lower = b
		i, slot := find(t, b)
		if i >= 0 {
			return i
		}
		return t.insert(t.intern(b), slot)
	case foldUnicode:
		u = strings.ToLower(u)
	}
	i, slot := find(t, u)
	if i >= 0 {
		return i
	}
	return t.insert(u, slot)
}

// find returns the index of u in units, or −1 and the free slot where it
// goes. It takes the unit as a string or as bytes (a lower-cased copy
// not yet interned): maphash.String and maphash.Bytes agree, and the
// comparison converts without copying.
func find[T string | []byte](t *unitSet, u T) (int, int) {
	var h uint64
	switch v := any(u).(type) {
	case string:
		h = maphash.String(t.seed, v)
	case []byte:
		h = maphash.Bytes(t.seed, v)
	}
	mask := len(t.slots) - 1
	j := int(h) & mask
	for {
		k := t.slots[j]
		if k == 0 {
			return -1, j
		}
		if t.units[k-1] == string(u) {
			return int(k - 1), j
		}
		j = (j + 1) & mask
	}
}

// intern returns a string of the bytes of b, in the arena.
func (t *unitSet) intern(b []byte) string {
	return t.arena.bytes(b)
}

// arena makes strings, one allocation for many, from message to
// message: a Builder only appends, and never changes the bytes of a
// string it returned, so that the strings of a message stay valid while
// the next message's are made (nothing keeps them after signing, but
// they would not change if something did).
type arena struct {
	b strings.Builder
}

// concat returns the string a+b, in the arena.
func (a *arena) concat(x, y string) string {
	a.room(len(x) + len(y))
	start := a.b.Len()
	a.b.WriteString(x)
	a.b.WriteString(y)
	return a.b.String()[start:]
}

// bytes returns a string of the bytes of b, in the arena.
func (a *arena) bytes(b []byte) string {
	a.room(len(b))
	start := a.b.Len()
	a.b.Write(b)
	return a.b.String()[start:]
}

// room makes room for n bytes.
func (a *arena) room(n int) {
	if a.b.Cap()-a.b.Len() < n {
		a.b = strings.Builder{} // its strings keep the full one
		a.b.Grow(max(arenaSize, n))
	}
}

// insert adds u, which is not in the set, at the free slot, and returns
// its index. The table doubles when half full.
func (t *unitSet) insert(u string, slot int) int {
	t.units = append(t.units, u)
	t.flags = append(t.flags, 0)
	n := len(t.units)
	t.slots[slot] = int32(n)
	if 2*n > len(t.slots) {
		t.grow()
	}
	return n - 1
}

// grow doubles the table and puts the units in it again.
func (t *unitSet) grow() {
	size := 2 * len(t.slots)
	if cap(t.slots) < size {
		t.slots = make([]int32, size)
	}
	t.slots = t.slots[:size]
	clear(t.slots)
	mask := size - 1
	for i, u := range t.units {
		j := int(maphash.String(t.seed, u)) & mask
		for t.slots[j] != 0 {
			j = (j + 1) & mask
		}
		t.slots[j] = int32(i + 1)
	}
}
