package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/store"
)

func TestExposition(t *testing.T) {
	m := New()
	m.Message(action.Reject, []string{"imatch", "andd"}, 3*time.Millisecond, 2048, 2)
	m.Message(action.Accept, nil, time.Millisecond, 100, 0)
	m.Error("timeout")
	m.FailOpen()
	m.Report(store.KindSpam)
	m.SetStore(StoreStats{Campaigns: 7, Keys: 70, DiskBytes: 4096})
	m.Session(1)
	m.Reload(false)
	m.SpoolPending(3)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`nddmilter_messages_total{action="reject"} 1`,
		`nddmilter_messages_total{action="tag"} 0`,
		`nddmilter_matches_total{family="andd"} 1`,
		`nddmilter_check_duration_seconds_count 2`,
		`nddmilter_body_bytes_sum 2148`,
		`nddmilter_parse_warnings_total 2`,
		`nddmilter_errors_total{stage="timeout"} 1`,
		`nddmilter_failopen_total 1`,
		`nddmilter_reports_total{kind="spam"} 1`,
		`nddmilter_campaigns 7`,
		`nddmilter_store_bytes 4096`,
		`nddmilter_milter_sessions 1`,
		`nddmilter_reloads_total{result="error"} 1`,
		`nddmilter_spool_pending 3`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}

func TestNilSafe(t *testing.T) {
	var m *Metrics
	m.Message(action.Accept, nil, 0, 0, 0)
	m.Error("x")
	m.FailOpen()
	m.Report(store.KindSpam)
	m.Session(1)
	m.Reload(true)
	m.SetStore(StoreStats{})
	m.SpoolPending(1)
}
