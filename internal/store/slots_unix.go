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
func allocSlots(n int) (s []slot, mapped bool) {
	size := n * int(unsafe.Sizeof(slot{}))
	if n == 0 {
		return nil, false
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return make([]slot, n), false
	}
	return unsafe.Slice((*slot)(unsafe.Pointer(unsafe.SliceData(b))), n), true
}

// freeSlots returns slots made by allocSlots with mapped set.
func freeSlots(s []slot) {
	if len(s) == 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(slot{})))
	_ = unix.Munmap(b)
}
