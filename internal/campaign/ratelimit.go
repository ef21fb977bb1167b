package campaign

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Reports per reporter (docs/SECURITY.md, "What one reporter can do").
//
// One reporter's reports are bounded by a token bucket per normalized
// reporter id (NormalizeReporter), taken in Ingester.ReportBatch, where the
// API, the report socket, reports by mail and the spool all end: a
// reporter over its limit gets a *RateLimitError (ErrRateLimited) and
// nothing of the batch is stored. The daemon sets the limiter
// (Ingester.SetReporterLimiter). Not limited: the command line's own
// reports, the API's administrator (WithoutReporterLimit: the api-token
// names any reporter anyway, and ingests corpora through a running
// daemon), and a fleet's replicated events (limited at their origin).

// ErrRateLimited is what a report of a reporter over its limit fails
// with (errors.Is); the error is a *RateLimitError.
var ErrRateLimited = errors.New("too many reports from this reporter")

// RateLimitError says which reporter is over its limit and when it may
// report again.
type RateLimitError struct {
	Reporter   string        // the normalized id
	RetryAfter time.Duration // when the reports refused would fit
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%v %q: retry in %s (reports.reporter_limit)", ErrRateLimited, e.Reporter, e.RetryAfter.Round(time.Second))
}

// Is makes errors.Is(err, ErrRateLimited) hold.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// ReporterLimit is the bound on one reporter's reports: Burst at once,
// then PerHour per hour. Zero values select the defaults; PerHour < 0
// disables the limit.
type ReporterLimit struct {
	// PerHour is the sustained rate, reports per hour. Default 600.
	PerHour float64
	// Burst is how many reports a reporter may make at once (a junk
	// folder sorted in one go). Default 100.
	Burst int
	// MaxReporters bounds the reporters tracked: past it, those whose
	// bucket is full again are forgotten, and all when none is.
	// Default 65536.
	MaxReporters int
}

// Defaults of ReporterLimit.
const (
	DefaultReporterPerHour      = 600
	DefaultReporterBurst        = 100
	DefaultReporterMaxReporters = 65536
)

func (l ReporterLimit) withDefaults() ReporterLimit {
	if l.PerHour == 0 {
		l.PerHour = DefaultReporterPerHour
	}
	if l.Burst <= 0 {
		l.Burst = DefaultReporterBurst
	}
	if l.MaxReporters <= 0 {
		l.MaxReporters = DefaultReporterMaxReporters
	}
	return l
}

// ReporterLimiter holds the token buckets of the reporters. It is safe
// for concurrent use and outlives the engines that use it (a daemon's
// reload builds a new engine over the same limiter).
type ReporterLimiter struct {
	mu      sync.Mutex
	lim     ReporterLimit
	buckets map[string]*rate.Limiter
	now     func() time.Time
}

// NewReporterLimiter returns a limiter with l's bound; clock nil means
// time.Now.
func NewReporterLimiter(l ReporterLimit, clock func() time.Time) *ReporterLimiter {
	if clock == nil {
		clock = time.Now
	}
	return &ReporterLimiter{lim: l.withDefaults(), buckets: map[string]*rate.Limiter{}, now: clock}
}

// SetLimit changes the bound (a reload); the reporters' buckets keep
// their tokens, within the new burst.
func (rl *ReporterLimiter) SetLimit(l ReporterLimit) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.lim = l.withDefaults()
	now := rl.now()
	for _, b := range rl.buckets {
		b.SetLimitAt(now, rl.every())
		b.SetBurstAt(now, rl.lim.Burst)
	}
}

func (rl *ReporterLimiter) every() rate.Limit { return rate.Limit(rl.lim.PerHour / 3600) }

// admit takes n[id] tokens of each reporter id's bucket, all or none.
func (rl *ReporterLimiter) admit(n map[string]int) error {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.lim.PerHour < 0 {
		return nil
	}
	now := rl.now()
	var taken []*rate.Reservation
	for id, k := range n {
		b := rl.bucket(id, now)
		r := b.ReserveN(now, k)
		wait := time.Duration(math.MaxInt64)
		if r.OK() {
			wait = r.DelayFrom(now)
		}
		if wait > 0 {
			if r.OK() {
				r.CancelAt(now)
			}
			for _, t := range taken {
				t.CancelAt(now)
			}
			if !r.OK() { // more at once than the burst
				wait = time.Duration(float64(k) / float64(rl.every()) * float64(time.Second))
			}
			return &RateLimitError{Reporter: id, RetryAfter: max(wait, time.Second)}
		}
		taken = append(taken, r)
	}
	return nil
}

// bucket returns id's bucket, making room when the table is full.
func (rl *ReporterLimiter) bucket(id string, now time.Time) *rate.Limiter {
	if b := rl.buckets[id]; b != nil {
		return b
	}
	if len(rl.buckets) >= rl.lim.MaxReporters {
		for k, b := range rl.buckets {
			if b.TokensAt(now) >= float64(rl.lim.Burst) {
				delete(rl.buckets, k)
			}
		}
		if len(rl.buckets) >= rl.lim.MaxReporters {
			clear(rl.buckets)
		}
	}
	b := rate.NewLimiter(rl.every(), rl.lim.Burst)
	rl.buckets[id] = b
	return b
}

// tracked is the number of reporters with a bucket.
func (rl *ReporterLimiter) tracked() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return len(rl.buckets)
}

type limiterBox struct{ l *ReporterLimiter }

type unlimitedKey struct{}

// WithoutReporterLimit returns a context under which reports are not
// bounded by the reporter limiter: an administrator's.
func WithoutReporterLimit(ctx context.Context) context.Context {
	return context.WithValue(ctx, unlimitedKey{}, true)
}

// SetReporterLimiter bounds the reports of each reporter through this
// engine with l (nil: no bound, the default).
func (e *Ingester) SetReporterLimiter(l *ReporterLimiter) {
	if l == nil {
		e.limiter.Store(nil)
		return
	}
	e.limiter.Store(&limiterBox{l})
}

// admitReports takes the reports' tokens from the reporter limiter, if
// any, unless ctx is an administrator's (WithoutReporterLimit). A
// replicated event's reports are not admitted here (ApplyReports): they
// were limited at their origin. reqs are normalized.
func (e *Ingester) admitReports(ctx context.Context, reqs []ReportRequest) error {
	b := e.limiter.Load()
	if b == nil || len(reqs) == 0 {
		return nil
	}
	if ctx.Value(unlimitedKey{}) != nil {
		return nil
	}
	n := make(map[string]int, 1)
	for _, r := range reqs {
		n[r.Reporter]++
	}
	return b.l.admit(n)
}
