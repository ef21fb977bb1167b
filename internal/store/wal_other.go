//go:build !(linux || darwin || freebsd)

package store

import "os"

// lockDir is not implemented here: write-ahead logs are not trimmed
// (trimWALs), Badger's read-write recovery does it.
func lockDir(*os.File) (unlock func(), ok bool) { return nil, false }

// seekData: everything is data.
func seekData(_ *os.File, off, size int64) (data, end int64, more bool) {
	return off, size, off < size
}
