package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/fleet"
	"github.com/nddmilter/nddmilter/internal/spamgen"
)

// A daemon with fleet.enabled and an embedded single-server cluster:
// reports go through the stream (the answer says replicated), /readyz
// tells the fleet's state and /v1/fleet/status the node's.
func TestRunFleetEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JetStream server")
	}
	dir := t.TempDir()
	milterAddr, httpAddr, natsAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	cfg := fmt.Sprintf(`milter:
  listen: inet:%s
http:
  listen: %s
  token: s3cret-0123456789
  dashboard:
    enabled: true
store:
  dir: %s
fleet:
  enabled: true
  node: mx1
  embedded:
    enabled: true
    listen: %s
    cluster_listen: "-"
    dir: %s
  replicas: 1
`, milterAddr, httpAddr, filepath.Join(dir, "store"), natsAddr, filepath.Join(dir, "nats"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &lockedBuffer{}
	go func() { done <- Run(ctx, Options{ConfigPath: cfgPath, LogOutput: logs}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	base := "http://" + httpAddr
	var body string
	for i := 0; i < 500; i++ {
		var code int
		code, body = httpGet(t, base+"/readyz")
		if code == 200 && strings.Contains(body, "fleet: connected") {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !strings.Contains(body, "fleet: connected, node mx1") {
		t.Fatalf("/readyz: %q", body)
	}
	c := &api.Client{BaseURL: base, Token: "s3cret-0123456789"}
	raw := spamgen.NewMessage("Exclusive offer: refinance your mortgage at record low rates",
		strings.Repeat("Dear homeowner, our records indicate that you may qualify for a substantially lower monthly payment on your current mortgage. ", 6), false)
	o, err := c.Report(ctx, raw, campaign.KindSpam, "alice")
	if err != nil || o.Replication != campaign.Replicated || !o.Created {
		t.Fatalf("report: %+v %v", o, err)
	}
	var nodes []fleet.Status
	if err := c.FleetStatus(ctx, &nodes); err != nil || len(nodes) != 1 {
		t.Fatalf("fleet status: %+v %v", nodes, err)
	}
	if s := nodes[0]; s.Node != "mx1" || s.Applied == 0 || s.StateHash == "" || s.Lag != 0 {
		t.Errorf("fleet status: %+v", s)
	}
	if v, err := c.Check(ctx, raw, false); err != nil || v.Campaign != o.Campaign {
		t.Errorf("check: %+v %v", v, err)
	}
	// Forgetting a node: this one is alive (409), another unknown (404).
	for _, tt := range []struct {
		node string
		want int
	}{{"mx1", http.StatusConflict}, {"mx9", http.StatusNotFound}, {"a/b", http.StatusNotFound}} {
		var ae *api.Error
		if err := c.FleetForget(ctx, tt.node); !errors.As(err, &ae) || ae.Status != tt.want {
			t.Errorf("forget %s: %v, want HTTP %d", tt.node, err, tt.want)
		}
	}
	// Removing a server from the JetStream cluster needs a system user,
	// which an embedded server without users has not (409, saying so).
	var ae *api.Error
	if err := c.FleetRemoveServer(ctx, "mx9"); !errors.As(err, &ae) || ae.Status != http.StatusConflict || !strings.Contains(err.Error(), "fleet.embedded.users") {
		t.Errorf("remove-server without users: %v, want HTTP 409 naming fleet.embedded.users", err)
	}

	// The fleet's metrics: connected, applying, nothing queued.
	_, met := httpGet(t, base+"/metrics")
	for _, want := range []string{`nddmilter_fleet_connected{node="mx1"} 1`, `nddmilter_fleet_ready{node="mx1"} 1`,
		`nddmilter_fleet_lag_events{node="mx1"} 0`, `nddmilter_fleet_outbox_events{node="mx1"} 0`, `nddmilter_fleet_published_total{node="mx1"}`} {
		if !strings.Contains(met, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The dashboard's now page shows the fleet's nodes and their lag.
	req, _ := http.NewRequest(http.MethodGet, base+"/ui/", nil)
	req.AddCookie(dashboardLogin(t, base, "s3cret-0123456789"))
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "<h2>Fleet</h2>") ||
		!strings.Contains(string(page), "<bdi>mx1</bdi>") {
		t.Errorf("now page (%d) without the fleet's node:\n%s", resp.StatusCode, page)
	}

	// A reload of the same file keeps the fleet without a warning; one
	// that changes the fleet section keeps the running one and warns.
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	waitMetric(t, base, `nddmilter_reloads_total{result="ok"} 1`)
	if strings.Contains(logs.String(), "key=fleet") {
		t.Errorf("a reload of the same file warned about the fleet section:\n%s", logs.String())
	}
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(cfg, "replicas: 1", "replicas: 1\n  hits_every: 5s", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	waitMetric(t, base, `nddmilter_reloads_total{result="ok"} 2`)
	if !strings.Contains(logs.String(), "key=fleet") {
		t.Errorf("a reload changing the fleet section did not warn:\n%s", logs.String())
	}
	if s := firstNode(t, c, ctx); s != "mx1" {
		t.Errorf("after the reloads: fleet status of %q", s)
	}
}

// firstNode is the name of the first node of the fleet's status.
func firstNode(t *testing.T, c *api.Client, ctx context.Context) string {
	t.Helper()
	var nodes []fleet.Status
	if err := c.FleetStatus(ctx, &nodes); err != nil || len(nodes) == 0 {
		t.Fatalf("fleet status: %v %v", nodes, err)
	}
	return nodes[0].Node
}

// lockedBuffer is a bytes.Buffer safe for the daemon's logger and the
// test reading it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The fleet commands with no daemon running say so (ErrNoDaemon), not
// that the store is held.
func TestFleetAPINoDaemon(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	cfg := fmt.Sprintf("http:\n  listen: %s\nstore:\n  dir: %s\n", freeAddr(t), filepath.Join(dir, "store"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := FleetAPI(BackendOptions{ConfigPath: cfgPath})
	if !errors.Is(err, ErrNoDaemon) || !strings.Contains(err.Error(), "nddmilter serve") {
		t.Fatalf("FleetAPI with no daemon: %v", err)
	}
}
