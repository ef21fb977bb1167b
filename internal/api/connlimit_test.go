package api

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// dialFrom opens a connection to addr from the loopback address src.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// alive reports whether the listener kept c open (a refused connection is
// closed at once: a read ends with EOF; a kept one times out).
func alive(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestLimitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	ll := LimitListener(ln, ConnLimits{Max: 3, PerAddr: 2, OnRefused: func(string) { refused.Add(1) }})
	defer ll.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ll.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	addr := ln.Addr().String()
	a1, a2, a3 := dialFrom(t, "127.0.0.1", addr), dialFrom(t, "127.0.0.1", addr), dialFrom(t, "127.0.0.1", addr)
	if !alive(a1) || !alive(a2) || alive(a3) {
		t.Fatalf("per address: alive %v %v %v, want the third refused", alive(a1), alive(a2), alive(a3))
	}
	b1, b2 := dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.2", addr)
	if !alive(b1) || alive(b2) {
		t.Fatalf("total: alive %v %v, want the fourth connection refused", alive(b1), alive(b2))
	}
	if refused.Load() != 2 {
		t.Errorf("refused %d, want 2", refused.Load())
	}
	// Closing a connection gives its place back.
	(<-accepted).Close()
	if c := dialFrom(t, "127.0.0.3", addr); !alive(c) {
		t.Error("a place given back was not taken")
	}
}

// TestMaxConnAge: a keep-alive connection older than MaxConnAge is closed
// after its next answer, however often its client sends requests.
func TestMaxConnAge(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		ServerOptions{MaxConnAge: 300 * time.Millisecond})
	go srv.Serve(LimitListener(ln, ConnLimits{}))
	defer srv.Close()
	var conns atomic.Int64
	var d net.Dialer
	cl := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conns.Add(1)
		return d.DialContext(ctx, network, addr)
	}}}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		resp, err := cl.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		time.Sleep(20 * time.Millisecond)
	}
	if conns.Load() < 2 {
		t.Errorf("one connection served requests for 1 s with a 300 ms age limit")
	}
}
