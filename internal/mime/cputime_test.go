package mime

import "github.com/nddmilter/nddmilter/internal/lab/cputime"

// processCPU is the process CPU time in ns (0 where the platform does not say).
func processCPU() int64 { return int64(cputime.Process()) }
