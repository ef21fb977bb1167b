//go:build unix && !linux

package store

// adviseHuge does nothing: huge pages on request are Linux's.
func adviseHuge([]byte) {}
