//go:build !unix

package daemon

// nofileLimit is unknown here.
func nofileLimit() uint64 { return 0 }
