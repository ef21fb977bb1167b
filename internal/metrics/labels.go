package metrics

import (
	"strconv"

	"github.com/nddmilter/nddmilter/internal/action"
)

// LabelValues returns the documented values of every label whose values
// form a closed set, by metric name and label name: a series with any
// other value is a bug (the daemon's tests scrape a live daemon and check
// every series against this table). The fleet's nddmilter_fleet_* node
// label and nddmilter_build_info's labels name things (a node, a build)
// and are not listed; the fleet's state label is.
func LabelValues() map[string]map[string][]string {
	actions := make([]string, 0, 5)
	for _, a := range action.All() {
		actions = append(actions, a.String())
	}
	versions := make([]string, 0, 5)
	for v := 2; v <= 6; v++ {
		versions = append(versions, strconv.Itoa(v))
	}
	return map[string]map[string][]string{
		"nddmilter_messages_total": {"action": actions},
		"nddmilter_matches_total":  {"family": {"imatch", "andd", "short", "qgram"}},
		"nddmilter_errors_total": {"stage": {
			"check", "timeout", "panic", // a check that failed, timed out or panicked
			"report", "report-timeout", "report-panic", // a report by mail that failed
			"store", "reload", "accept", "protocol", "spool", "spool_refused", // the daemon's other stages
		}},
		"nddmilter_reports_total":               {"kind": {"spam", "ham"}},
		"nddmilter_overload_total":              {"reason": {"sessions", "connections", "bytes", "api", "http"}},
		"nddmilter_reloads_total":               {"result": {"ok", "error"}},
		"nddmilter_campaigns_by_state":          {"state": {"active", "allowed", "revoked"}},
		"nddmilter_milter_connections_total":    {"version": versions, "streaming": {"true", "false"}},
		"nddmilter_fleet_stream_replicas":       {"state": {"current", "behind", "offline"}},
		"nddmilter_zap_jobs_total":              {"kind": {"move", "undo"}, "outcome": {"moved", "skipped", "failed", "logged"}},
		"nddmilter_fleet_events_rejected_total": {"reason": {"unsigned", "unknown_key", "wrong_node", "bad_signature", "malformed"}},
	}
}
