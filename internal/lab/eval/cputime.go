package eval

import (
	"time"

	"github.com/nddmilter/nddmilter/internal/lab/cputime"
)

// haveCPUClock tells whether the speed figures are CPU time; where the
// platform has no per-thread CPU clock they fall back to wall-clock time.
const haveCPUClock = cputime.HaveThread

// clockStart anchors the wall-clock fallback.
var clockStart = time.Now()

func threadCPU() time.Duration {
	if haveCPUClock {
		return cputime.Thread()
	}
	return time.Since(clockStart)
}

func processCPU() time.Duration {
	if haveCPUClock {
		return cputime.Process()
	}
	return time.Since(clockStart)
}
