package milter

import (
	"sync"
	"time"
)

// runnerIdle is how long a goroutine that finished a check waits for the
// next one before it exits.
const runnerIdle = 10 * time.Second

// runner runs the checks on reused goroutines. A check runs apart from
// its session so that the session can give up on it at its deadline;
// starting a new goroutine for every message grew a fresh stack each
// time. A check never waits for a goroutine: when none is idle, a new one
// starts, so a check stuck past its deadline holds only its own.
type runner struct {
	jobs chan func() // unbuffered: a send succeeds only into an idle goroutine
	done chan struct{}
	once sync.Once
}

func newRunner() *runner {
	return &runner{jobs: make(chan func()), done: make(chan struct{})}
}

// run runs f on an idle goroutine, or on a new one. f must not panic
// (the session's check recovers its own).
func (r *runner) run(f func()) {
	if r == nil {
		go f()
		return
	}
	select {
	case r.jobs <- f:
	default:
		go r.loop(f)
	}
}

// loop runs f, then the jobs handed to it, until it has been idle for
// runnerIdle or the runner is closed.
func (r *runner) loop(f func()) {
	t := time.NewTimer(runnerIdle)
	defer t.Stop()
	for {
		f()
		t.Reset(runnerIdle)
		select {
		case f = <-r.jobs:
		case <-t.C:
			return
		case <-r.done:
			return
		}
	}
}

// close makes the idle goroutines exit; checks still running finish.
func (r *runner) close() {
	if r != nil {
		r.once.Do(func() { close(r.done) })
	}
}
