// Package cputime reads the CPU time spent by this process and by the
// calling thread. Benchmarks report it next to wall-clock time because
// the machines are shared: other processes inflate wall-clock figures but
// not the CPU time a measured loop used.
package cputime

import "time"

// Process returns the user + system CPU time used by the process so far
// (0 where the platform does not say).
func Process() time.Duration { return process() }

// Thread returns the CPU time used by the calling OS thread (lock the
// goroutine to its thread first), or 0 where HaveThread is false.
func Thread() time.Duration { return thread() }

// HaveThread tells whether Thread reads a real per-thread clock here.
const HaveThread = haveThread
