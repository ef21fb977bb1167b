package natsd

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/nats-io/nkeys"
)

// fatalCatcher passes the server's log lines on and keeps the first fatal
// one: a server that cannot listen (a port already in use, an address not
// on this host) says so only in its log, and Start returns that line at
// once instead of waiting out its timeout.
type fatalCatcher struct {
	server.Logger // where the lines go

	once  sync.Once
	fatal chan struct{} // closed at the first fatal line
	mu    sync.Mutex
	first string
}

// newFatalCatcher passes the lines to next (nil: drops them).
func newFatalCatcher(next server.Logger) *fatalCatcher {
	if next == nil {
		next = &slogAdapter{l: slog.New(slog.DiscardHandler)}
	}
	return &fatalCatcher{Logger: next, fatal: make(chan struct{})}
}

// err is the first fatal line, "" if there was none.
func (c *fatalCatcher) err() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}

func (c *fatalCatcher) Fatalf(format string, v ...any) {
	c.once.Do(func() {
		c.mu.Lock()
		c.first = fmt.Sprintf(format, v...)
		c.mu.Unlock()
		close(c.fatal)
	})
	c.Logger.Fatalf(format, v...)
}

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
