package andd

import (
	"time"

	"github.com/nddmilter/nddmilter/internal/lab/cputime"
)

// cpuTime is the process CPU time (0 where the platform does not say).
func cpuTime() time.Duration { return cputime.Process() }
