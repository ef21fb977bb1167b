package natsd

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/nats-io/nkeys"
)

// fatalCatcher passes the server's log lines on (to next, when set) and
// keeps the first fatal one: a server that cannot listen (a port already
// in use, an address not on this host) says so only in its log, and Start
// returns that line at once instead of waiting out its timeout.
type fatalCatcher struct {
	next server.Logger // nil: the lines are dropped

	once  sync.Once
	fatal chan struct{} // closed at the first fatal line
	mu    sync.Mutex
	first string
}

func newFatalCatcher(next server.Logger) *fatalCatcher {
	return &fatalCatcher{next: next, fatal: make(chan struct{})}
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
	if c.next != nil {
		c.next.Fatalf(format, v...)
	}
}

func (c *fatalCatcher) Noticef(format string, v ...any) {
	if c.next != nil {
		c.next.Noticef(format, v...)
	}
}

func (c *fatalCatcher) Warnf(format string, v ...any) {
	if c.next != nil {
		c.next.Warnf(format, v...)
	}
}

func (c *fatalCatcher) Errorf(format string, v ...any) {
	if c.next != nil {
		c.next.Errorf(format, v...)
	}
}

func (c *fatalCatcher) Debugf(format string, v ...any) {
	if c.next != nil {
		c.next.Debugf(format, v...)
	}
}

func (c *fatalCatcher) Tracef(format string, v ...any) {
	if c.next != nil {
		c.next.Tracef(format, v...)
	}
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
