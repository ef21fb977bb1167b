//go:build unix

package daemon

import "golang.org/x/sys/unix"

// nofileLimit is the process's soft open-files limit (0: unknown). Go
// raises the soft limit to the hard one when it starts.
func nofileLimit() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}
