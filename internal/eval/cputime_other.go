//go:build !linux

package eval

import "time"

var clockStart = time.Now()

// threadCPU falls back to the wall clock where no thread CPU clock is used.
func threadCPU() time.Duration { return time.Since(clockStart) }

// processCPU falls back to the wall clock.
func processCPU() time.Duration { return time.Since(clockStart) }

const haveCPUClock = false
