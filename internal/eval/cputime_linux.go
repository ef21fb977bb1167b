package eval

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time consumed by the calling OS thread (the
// caller locks its goroutine to the thread), so that the measurements of
// the pipeline are not inflated by other processes on a busy machine.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// processCPU returns the user and system CPU time of the process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const haveCPUClock = true
