//go:build !(linux || darwin || freebsd)

package store

import "errors"

// freeSpace is not implemented here: the disk-full guard is off.
func freeSpace(string) (int64, error) {
	return 0, errors.New("free disk space not measured on this system")
}
