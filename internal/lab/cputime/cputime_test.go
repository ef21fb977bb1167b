package cputime

import (
	"runtime"
	"testing"
)

func TestMonotonic(t *testing.T) {
	// Thread reads the calling OS thread's clock: stay on one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p0, t0 := Process(), Thread()
	x := 0
	for i := range 20_000_000 {
		x += i ^ x
	}
	_ = x
	if p1 := Process(); p1 < p0 {
		t.Errorf("process CPU went back: %v < %v", p1, p0)
	}
	if t1 := Thread(); t1 < t0 {
		t.Errorf("thread CPU went back: %v < %v", t1, t0)
	}
}
