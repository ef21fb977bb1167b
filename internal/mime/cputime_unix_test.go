//go:build unix

package mime

import "syscall"

// processCPU returns the user+system CPU time consumed by the process, in
// nanoseconds, or 0 when unavailable.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
