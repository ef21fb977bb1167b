package fleet

import (
	"log/slog"
	"sync"
	"time"
)

// queueSummaryEvery is how often, at most, an outage's queued events are
// summed up in the log while they go on.
const queueSummaryEvery = time.Minute

// queueLog keeps an outage's log short: its first queued event is logged
// at WARN with the cause, the next ones are counted and summed up at most
// once a minute, and the outbox's drain ends the outage with one line.
type queueLog struct {
	mu          sync.Mutex
	since       time.Time // the outage's first queued event; zero: none
	events      int       // events queued since then
	reports     int       // reports in them
	lastSummary time.Time
}

// queued records an event of typ with reports reports queued because of
// err, and logs it when it starts an outage or a summary is due.
func (q *queueLog) queued(log *slog.Logger, typ string, reports int, err error, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.since.IsZero() {
		q.since, q.lastSummary = now, now
		q.events, q.reports = 1, reports
		log.Warn("fleet: the stream is unreachable: events are queued in the outbox and published once it answers "+
			"(one line a minute while it lasts)", "type", typ, "reports", reports, "err", err)
		return
	}
	q.events++
	q.reports += reports
	if now.Sub(q.lastSummary) >= queueSummaryEvery {
		q.lastSummary = now
		log.Warn("fleet: still queueing events", "events", q.events, "reports", q.reports,
			"since", q.since.UTC().Format(time.RFC3339), "last_err", err)
	}
}

// drained ends the outage, if any, with one line.
func (q *queueLog) drained(log *slog.Logger, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.since.IsZero() {
		return
	}
	log.Info("fleet: the outbox drained: the events queued during the outage are published", "events", q.events,
		"reports", q.reports, "outage", now.Sub(q.since).Round(time.Second))
	q.since = time.Time{}
	q.events, q.reports = 0, 0
}
