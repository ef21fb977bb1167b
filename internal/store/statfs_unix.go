//go:build linux || darwin || freebsd

package store

import "syscall"

// freeSpace returns the bytes of the filesystem holding dir available to
// an unprivileged user.
func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
