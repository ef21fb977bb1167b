package api

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/store"
)

// serve runs h behind NewServer on a loopback port.
func serve(t *testing.T, h http.Handler, o ServerOptions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h, o)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// closedWithin reports whether the server closes c within d.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// Slowloris-style connections are closed: one that sends nothing, one that
// sends half a request header, one idle after a request.
func TestServerClosesIdleConnections(t *testing.T) {
	eng, _ := newEngine(t)
	addr := serve(t, NewHandler(eng, Options{Token: testToken}), ServerOptions{
		ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	silent := dial()
	partial := dial()
	io.WriteString(partial, "POST /v1/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ")
	idle := dial()
	io.WriteString(idle, "GET /v1/campaigns HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+testToken+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for name, c := range map[string]net.Conn{"silent": silent, "partial header": partial, "idle keep-alive": idle} {
		if !closedWithin(t, c, 3*time.Second) {
			t.Errorf("%s connection still open after 3s", name)
		}
	}
}

// An oversized body gets 413 with a clear message, on the API and on any
// other route behind NewServer.
func TestServerBodyLimit(t *testing.T) {
	eng, _ := newEngine(t)
	api := NewHandler(eng, Options{Token: testToken, MaxBody: 1 << 20})
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.HandleFunc("POST /other", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		}
	})
	addr := serve(t, mux, ServerOptions{MaxBody: 4 << 10})
	big := []byte(strings.Repeat("x", 8<<10))
	status, m, _ := do(t, "POST", "http://"+addr+"/v1/check", testToken, big)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(m["error"].(string), "larger than 4096 bytes") {
		t.Errorf("/v1/check with 8 KiB: %d %v, want 413 naming the limit", status, m)
	}
	resp, err := http.Post("http://"+addr+"/other", "text/plain", strings.NewReader(string(big)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("/other with 8 KiB: %d, want 413", resp.StatusCode)
	}
}

// slowStore makes every lookup take a while whatever the context says
// (an engine stage that does not stop at its deadline).
type slowStore struct {
	store.Store
	delay time.Duration
}

func (s slowStore) Lookup(ctx context.Context, keys [][]byte) ([]store.Hit, error) {
	time.Sleep(s.delay)
	return s.Store.Lookup(ctx, keys)
}

func slowEngine(t *testing.T, delay time.Duration) *campaign.Engine {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		t.Fatal(err)
	}
	mod, err := andd.DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := campaign.New(slowStore{Store: st, delay: delay}, lex, mod, campaign.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// A check past http.request_timeout is answered 503 on time, and checks
// beyond http.max_inflight are refused at once.
func TestRequestDeadlineAndInflight(t *testing.T) {
	eng := slowEngine(t, 600*time.Millisecond)
	addr := serve(t, NewHandler(eng, Options{Token: testToken, RequestTimeout: 100 * time.Millisecond, MaxInflight: 1}), ServerOptions{})
	t0 := time.Now()
	status, m, _ := do(t, "POST", "http://"+addr+"/v1/check", testToken, spamMessage())
	if d := time.Since(t0); d > 500*time.Millisecond {
		t.Errorf("answered after %s, want about the 100ms deadline", d)
	}
	if status != http.StatusServiceUnavailable || !strings.Contains(m["error"].(string), "http.request_timeout") {
		t.Fatalf("slow check: %d %v, want 503 naming http.request_timeout", status, m)
	}
	// The abandoned check still holds the only slot.
	status, m, _ = do(t, "POST", "http://"+addr+"/v1/check", testToken, spamMessage())
	if status != http.StatusServiceUnavailable || !strings.Contains(m["error"].(string), "http.max_inflight") {
		t.Fatalf("second check: %d %v, want 503 naming http.max_inflight", status, m)
	}
}
