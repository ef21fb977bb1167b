//go:build unix

package store

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// allocSlots returns n empty slots in memory of their own, mapped from
// the kernel rather than the Go heap: the key index is most of a large
// store's memory, and in the heap it would raise the garbage collector's
// target (twice the live heap by default) by as much again. Slots hold
// no pointers, so the collector need not see them. mapped is false when
// the mapping failed and the slots are in the heap.
//
// Lookups touch the slots at random: the mapping asks for transparent
// huge pages (where the kernel grants them on request), which miss the
// TLB far less; a refusal changes nothing but speed.
func allocSlots(n int) (s []slot, mapped bool) {
	if n == 0 {
		return nil, false
	}
	size := uintptr(n) * unsafe.Sizeof(slot{})
	p, err := unix.MmapPtr(-1, 0, nil, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return make([]slot, n), false
	}
	adviseHuge(unsafe.Slice((*byte)(p), size))
	return unsafe.Slice((*slot)(p), n), true
}

// freeSlots returns slots made by allocSlots with mapped set, or a part
// of them that starts and ends on page boundaries (slotArena).
func freeSlots(s []slot) {
	if len(s) == 0 {
		return
	}
	_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(s)), uintptr(len(s))*unsafe.Sizeof(slot{}))
}
