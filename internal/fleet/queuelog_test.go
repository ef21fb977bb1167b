package fleet

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/testutil"
)

// TestQueueLog: an outage of 2,501 queued reports logs one line when it
// starts, one a minute while it lasts and one when the outbox drained, not
// one per report.
func TestQueueLog(t *testing.T) {
	var buf testutil.LockedBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var q queueLog
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	cause := errors.New("nats: timeout")
	for i := range 2501 {
		q.queued(log, evReport, 1, cause, t0.Add(time.Duration(i)*50*time.Millisecond)) // 125 s
	}
	q.drained(log, t0.Add(130*time.Second))
	q.drained(log, t0.Add(131*time.Second)) // nothing queued: nothing logged
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d log lines, want 4 (start, 2 summaries, drained):\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[3], "events=2501 reports=2501") {
		t.Errorf("the drain line does not sum up the outage: %s", lines[3])
	}
}
