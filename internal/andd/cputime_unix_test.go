//go:build unix

package andd

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time used by the process so far (benchmarks report
// CPU ns/op, which a busy machine does not inflate the way it does wall time).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
