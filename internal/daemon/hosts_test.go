package daemon

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Red-team finding 7 (DNS rebinding): the daemon's API and dashboard
// answer 421 to a request naming a host it is not reached under; IP
// literals, localhost and http.allowed_hosts are served, and the
// monitoring routes answer any host.
func TestHTTPHostCheck(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	if err := os.WriteFile(cfgPath, []byte("http:\n  allowed_hosts: [ndd.example.test]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	startDaemon(t, Options{ConfigPath: cfgPath, HTTPListen: addr})
	_, port, _ := net.SplitHostPort(addr)
	client := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		path, host string
		status     int
	}{
		{"/ui/login", "evil.example:" + port, http.StatusMisdirectedRequest},
		{"/ui/login", "evil.example", http.StatusMisdirectedRequest},
		{"/v1/campaigns", "evil.example:" + port, http.StatusMisdirectedRequest},
		{"/", "evil.example:" + port, http.StatusMisdirectedRequest},
		{"/ui/login", addr, http.StatusOK},
		{"/ui/login", "localhost:" + port, http.StatusOK},
		{"/ui/login", "ndd.example.test:" + port, http.StatusOK},
		{"/v1/campaigns", "ndd.example.test", http.StatusUnauthorized}, // reaches the API: no token
		{"/metrics", "evil.example:" + port, http.StatusOK},
		{"/healthz", "evil.example:" + port, http.StatusOK},
	}
	for _, tt := range tests {
		req, err := http.NewRequest("GET", "http://"+addr+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tt.host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s (Host %s): %v", tt.path, tt.host, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("GET %s with Host %s: %d, want %d", tt.path, tt.host, resp.StatusCode, tt.status)
		}
	}
}
