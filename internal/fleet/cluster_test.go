package fleet

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// testCluster is a JetStream cluster of embedded servers on loopback.
type testCluster struct {
	t    testing.TB
	opts []*server.Options
	srvs []*server.Server
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startCluster starts n clustered JetStream servers (n == 1: a single
// server) with their state in t's temporary directories.
func startCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	c := &testCluster{t: t}
	dir := t.TempDir()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = freePort(t)
	}
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("s%d", i),
			Host:       "127.0.0.1",
			Port:       freePort(t),
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("s%d", i)),
			NoLog:      true,
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
		c.start(i)
	}
	t.Cleanup(c.shutdown)
	return c
}

func (c *testCluster) start(i int) {
	c.t.Helper()
	s, err := server.NewServer(c.opts[i])
	if err != nil {
		c.t.Fatalf("server %d: %v", i, err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		c.t.Fatalf("server %d not ready", i)
	}
	c.srvs[i] = s
}

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
