package fleet

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/nddmilter/nddmilter/internal/testutil"
)

// testCluster is a JetStream cluster of embedded servers on loopback.
type testCluster struct {
	t    testing.TB
	opts []*server.Options
	srvs []*server.Server
}

// startCluster starts n clustered JetStream servers (n == 1: a single
// server) with their state in t's temporary directories.
//
// Client ports are picked by the kernel as each server starts. Route
// ports must be known before (every server routes to all the others),
// and one picked in advance can be taken by an outgoing connection
// before its server listens on it (go test runs packages side by side),
// so a cluster that does not start is started again on new ports, at
// most three times. A restart reuses the ports of the first start.
func startCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	var err error
	for range 3 {
		c := &testCluster{t: t}
		if err = c.startAll(t.TempDir(), n); err == nil {
			t.Cleanup(c.shutdown)
			return c
		}
		c.shutdown()
	}
	t.Fatal(err)
	return nil
}

func (c *testCluster) startAll(dir string, n int) error {
	// In one call: separate picks could return the same port twice.
	ports := testutil.FreePorts(c.t, n)
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("s%d", i),
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("s%d", i)),
			NoSigs:     true,
		}
		if n > 1 {
			o.Cluster = server.ClusterOpts{Name: "test", Host: "127.0.0.1", Port: ports[i]}
			for j, p := range ports {
				if j != i {
					o.Routes = append(o.Routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)})
				}
			}
		}
		c.opts = append(c.opts, o)
		c.srvs = append(c.srvs, nil)
	}
	for i := range n {
		if err := c.tryStart(i); err != nil {
			return err
		}
	}
	return nil
}

// start starts server i again, on the ports of its first start.
func (c *testCluster) start(i int) {
	c.t.Helper()
	if err := c.tryStart(i); err != nil {
		c.t.Fatal(err)
	}
}

// tryStart starts server i with a copy of its options (a server keeps
// the options it was given) and records the client port it listens on.
// A server that is not ready in 10s is shut down; the error carries the
// errors it logged.
func (c *testCluster) tryStart(i int) error {
	s, err := server.NewServer(c.opts[i].Clone())
	if err != nil {
		return fmt.Errorf("server %d: %w", i, err)
	}
	logs := &errorLog{}
	s.SetLogger(logs, false, false)
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("server %d not ready in 10s: %s", i, logs)
	}
	c.opts[i].Port = s.Addr().(*net.TCPAddr).Port
	c.srvs[i] = s
	return nil
}

// errorLog keeps the first 20 errors a server logs, and drops the rest.
type errorLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *errorLog) add(format string, v ...any) {
	l.mu.Lock()
	if len(l.errs) < 20 {
		l.errs = append(l.errs, fmt.Sprintf(format, v...))
	}
	l.mu.Unlock()
}

func (l *errorLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return "no error logged"
	}
	return strings.Join(l.errs, "; ")
}

func (l *errorLog) Fatalf(format string, v ...any) { l.add(format, v...) }
func (l *errorLog) Errorf(format string, v ...any) { l.add(format, v...) }
func (*errorLog) Noticef(string, ...any)           {}
func (*errorLog) Warnf(string, ...any)             {}
func (*errorLog) Debugf(string, ...any)            {}
func (*errorLog) Tracef(string, ...any)            {}

func (c *testCluster) url(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.opts[i].Port)
}

func (c *testCluster) urls() []string {
	var u []string
	for i := range c.opts {
		u = append(u, c.url(i))
	}
	return u
}

func (c *testCluster) shutdown() {
	for i, s := range c.srvs {
		if s != nil {
			s.Shutdown()
			s.WaitForShutdown()
			c.srvs[i] = nil
		}
	}
}
