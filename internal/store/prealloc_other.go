//go:build !linux

package store

import (
	"errors"
	"os"
)

// errUnsupported says the filesystem cannot preallocate.
var errUnsupported = errors.New("preallocation not supported")

// preallocate is Linux only (fallocate).
func preallocate(*os.File, int64) error { return errUnsupported }
