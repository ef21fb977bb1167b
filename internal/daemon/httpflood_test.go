//go:build linux

package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"
	"golang.org/x/sys/unix"

	"github.com/nddmilter/nddmilter/internal/testutil"
)

// TestHTTPFloodKeepsMilter: idle keep-alive connections to /healthz by the
// thousand (no credentials needed) took the process to its descriptor
// limit, and the milter's accept failed ("too many open files"): the MTA
// applied milter_default_action. The HTTP listener's bounds now keep
// descriptors for the milter, which answers every session during the
// flood, and an HTTP client from another address is still served.
//
// The daemon runs in a process of its own (this test binary again, as
// TestHTTPFloodDaemonProcess) with an open-files limit of 2,048; the
// flood opens 3,000 connections from this process.
func TestHTTPFloodKeepsMilter(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 3,000 connections")
	}
	const flood = 3000
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < flood+200 {
		t.Skipf("open-files limit %d is below the flood's %d (%v)", rl.Cur, flood+200, err)
	}
	a := freeAddrs(t, 2)
	milterAddr, httpAddr := a[0], a[1]
	var logw testutil.LockedBuffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestHTTPFloodDaemonProcess$")
	cmd.Env = append(os.Environ(), "NDD_FLOOD_DAEMON="+t.TempDir()+","+milterAddr+","+httpAddr)
	cmd.Stdout, cmd.Stderr = &logw, &logw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Error("the daemon did not stop on SIGTERM")
		}
		if t.Failed() {
			t.Log(logw.String())
		}
	})
	waitReady(t, "http://"+httpAddr)

	const sessions = 200
	rate := func(phase string) float64 {
		start := time.Now()
		for i := range sessions {
			if err := milterSession(milterAddr); err != nil {
				t.Fatalf("milter session %d of %d %s: %v", i+1, sessions, phase, err)
			}
		}
		return sessions / time.Since(start).Seconds()
	}
	before := rate("before the flood")

	// The flood: keep-alive connections, each after one GET /healthz.
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	served := 0
	for range flood {
		c, err := net.DialTimeout("tcp", httpAddr, time.Second)
		if err != nil {
			continue
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(2 * time.Second))
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", httpAddr)
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			resp.Body.Close()
			served++
		}
	}
	during := rate("during the flood")
	// The daemon keeps descriptors for every milter session it may hold
	// (milter.max_sessions, 1,000 by default) below its limit of 2,048.
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if open := len(fds); open > 2048-1000 {
		t.Errorf("the daemon holds %d descriptors during the flood: fewer than milter.max_sessions (1,000) are left of its 2,048", open)
	}
	// Informational (speed is measured by benchmarks, not asserted here).
	t.Logf("flood: %d connections, %d served; the daemon holds %d descriptors; milter %.0f sessions/s before, %.0f during",
		len(conns), served, len(fds), before, during)

	// Another client address still reaches /readyz and /metrics.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: time.Second}
	cl := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + httpAddr + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz from 127.0.0.2 during the flood: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = cl.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `nddmilter_overload_total{reason="http"}`) || strings.Contains(string(b), `nddmilter_overload_total{reason="http"} 0`) {
		t.Errorf("refused connections not counted in nddmilter_overload_total{reason=\"http\"}")
	}
}

// TestHTTPFloodDaemonProcess is the daemon of TestHTTPFloodKeepsMilter, in
// a process of its own with an open-files limit of 2,048, until SIGTERM.
func TestHTTPFloodDaemonProcess(t *testing.T) {
	env := os.Getenv("NDD_FLOOD_DAEMON")
	if env == "" {
		t.Skip("run by TestHTTPFloodKeepsMilter")
	}
	parts := strings.Split(env, ",")
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	rl.Cur = 2048
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, Options{StoreDir: parts[0], MilterListen: "inet:" + parts[1], HTTPListen: parts[2], LogOutput: os.Stderr}); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits (bounded) for /readyz to answer 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	for range 300 {
		if code, _ := httpGet(t, base+"/readyz"); code == 200 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("daemon not ready")
}

// milterSession runs one milter session with one message to its end.
func milterSession(addr string) error {
	c := gomilter.NewClientWithOptions("tcp", addr, gomilter.ClientOptions{
		ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		ActionMask: gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
	})
	s, err := c.Session()
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Mail("a@example.net", nil); err != nil {
		return err
	}
	if _, err := s.Rcpt("b@example.org", nil); err != nil {
		return err
	}
	if _, err := s.HeaderField("Subject", "Minutes of the meeting"); err != nil {
		return err
	}
	if _, err := s.HeaderEnd(); err != nil {
		return err
	}
	if _, err := s.BodyChunk([]byte("The budget review moved to Thursday afternoon.\r\n")); err != nil {
		return err
	}
	_, act, err := s.End()
	if err != nil {
		return err
	}
	if act.Code != gomilter.ActAccept {
		return fmt.Errorf("action %c", act.Code)
	}
	return nil
}
