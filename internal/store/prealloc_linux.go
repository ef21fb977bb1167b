package store

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// errUnsupported says the filesystem cannot preallocate.
var errUnsupported = errors.New("preallocation not supported")

// preallocate gives the first n bytes of f disk blocks (its size
// unchanged).
func preallocate(f *os.File, n int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, min(n, fi.Size()))
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return errUnsupported
	}
	if err != nil {
		return fmt.Errorf("fallocate %s: %w", f.Name(), err)
	}
	return nil
}
