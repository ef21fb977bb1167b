//go:build unix

package pipeline

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) used by this process so far. On a
// shared, noisy machine wall-clock ns/op overstates the cost; the CPU time
// per operation does not depend on how busy the other cores are.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
