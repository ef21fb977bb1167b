package daemon

// fdMargin are the descriptors kept for everything but milter sessions and
// HTTP connections: the store's files (Badger keeps its tables open), the
// listeners, the report socket and spool, a fleet's NATS connections.
const fdMargin = 512

// minHTTPConns is the fewest HTTP connections allowed, whatever the
// descriptor limit: /metrics, /readyz and an administrator.
const minHTTPConns = 16

// httpConnBudget returns the HTTP listener's connection bound: configured,
// lowered so that the milter's sessions (each one descriptor) and fdMargin
// still fit within the process's open-files limit nofile (0: unknown).
func httpConnBudget(configured, milterSessions int, nofile uint64) int {
	if nofile == 0 {
		return configured
	}
	room := int64(nofile) - int64(milterSessions) - fdMargin
	if room < minHTTPConns {
		return min(configured, minHTTPConns)
	}
	return int(min(int64(configured), room))
}
