//go:build !unix

package store

// allocSlots returns n empty slots (in the heap: see slots_unix.go).
func allocSlots(n int) (s []slot, mapped bool) { return make([]slot, n), false }

func freeSlots([]slot) {}
