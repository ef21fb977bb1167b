package milter

import (
	"sync"
	"testing"
	"time"
)

// The runner reuses a goroutine that finished its job, never makes a job
// wait for one that is busy, and lets its idle goroutines go on close.
func TestRunner(t *testing.T) {
	r := newRunner()
	defer r.close()

	// A job stuck past its deadline does not hold the next one.
	release := make(chan struct{})
	stuck := make(chan struct{})
	r.run(func() { close(stuck); <-release })
	<-stuck
	ran := make(chan struct{})
	r.run(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a job waited for a busy goroutine")
	}
	close(release)

	// Many jobs in a row, each from an idle goroutine or a new one.
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		r.run(wg.Done)
		wg.Wait()
	}

	// A nil runner (a Server built without New) still runs jobs.
	var nilRunner *runner
	done := make(chan struct{})
	nilRunner.run(func() { close(done) })
	<-done
	nilRunner.close()
}
