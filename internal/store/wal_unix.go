//go:build linux || darwin || freebsd

package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes the exclusive lock Badger takes on a store directory
// (flock), without waiting; false when another process or open holds it.
func lockDir(d *os.File) (unlock func(), ok bool) {
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, false
	}
	return func() { unix.Flock(int(d.Fd()), unix.LOCK_UN) }, true
}

// seekData returns the next region of f holding data from off, [data,
// end) with end at most size; more is false when only a hole is left.
// Where the filesystem cannot say, everything is data.
func seekData(f *os.File, off, size int64) (data, end int64, more bool) {
	data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	if err == unix.ENXIO {
		return 0, 0, false
	}
	if err != nil {
		return off, size, true
	}
	if data >= size {
		return 0, 0, false
	}
	end = size
	if hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE); err == nil && hole < end {
		end = hole
	}
	return data, end, true
}
