package natsd

import (
	"fmt"
	"log/slog"

	"github.com/nats-io/nkeys"
)

// slogAdapter passes the server's log lines to slog. The server's Fatalf
// does not exit the process here: the daemon decides.
type slogAdapter struct{ l *slog.Logger }

func (a *slogAdapter) Noticef(format string, v ...any) {
	a.l.Info(fmt.Sprintf(format, v...), "component", "nats")
}
func (a *slogAdapter) Warnf(format string, v ...any) {
	a.l.Warn(fmt.Sprintf(format, v...), "component", "nats")
}
func (a *slogAdapter) Fatalf(format string, v ...any) {
	a.l.Error(fmt.Sprintf(format, v...), "component", "nats", "fatal", true)
}
func (a *slogAdapter) Errorf(format string, v ...any) {
	a.l.Error(fmt.Sprintf(format, v...), "component", "nats")
}
func (a *slogAdapter) Debugf(format string, v ...any) {
	a.l.Debug(fmt.Sprintf(format, v...), "component", "nats")
}
func (a *slogAdapter) Tracef(format string, v ...any) {
	a.l.Debug(fmt.Sprintf(format, v...), "component", "nats", "trace", true)
}

// ValidUserKey reports whether k is a public user nkey (U…).
func ValidUserKey(k string) bool { return nkeys.IsValidPublicUserKey(k) }
