package daemon

import (
	"context"
	"errors"
	"fmt"
	"github.com/nddmilter/nddmilter/internal/store"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/fleet"
	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/testutil"
)

// A daemon with fleet.enabled and an embedded single-server cluster:
// reports go through the stream (the answer says replicated), /readyz
// tells the fleet's state and /v1/fleet/status the node's.
func TestRunFleetEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JetStream server")
	}
	dir := t.TempDir()
	a := freeAddrs(t, 3)
	milterAddr, httpAddr, natsAddr := a[0], a[1], a[2]
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	seedFile, pub := testSeed(t, dir, "mx1")
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
  nats:
    nkey_seed: %s
  nodes:
    - {name: mx1, key: %s, snapshots: true}
  embedded:
    enabled: true
    listen: %s
    cluster_listen: "-"
    dir: %s
  replicas: 1
`, milterAddr, httpAddr, filepath.Join(dir, "store"), seedFile, pub, natsAddr, filepath.Join(dir, "nats"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &testutil.LockedBuffer{}
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
		t.Fatalf("/readyz: %q\n%s", body, tail(logs.String(), 4000))
	}
	c := &api.Client{BaseURL: base, Token: "s3cret-0123456789"}
	raw := spamgen.NewMessage("Exclusive offer: refinance your mortgage at record low rates",
		strings.Repeat("Dear homeowner, our records indicate that you may qualify for a substantially lower monthly payment on your current mortgage. ", 6), false)
	o, err := c.Report(ctx, raw, store.KindSpam, "alice")
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
	// It names what its signatures and applying depend on.
	if st := nodes[0].Settings; st["signatures.lexicon"] == "" || st["andd.model"] == "" || !strings.Contains(st["signatures"], "evidence=") ||
		st["policy.revoke"] != "ham_reporters=2 ratio=0.5" || st["store.expiry"] != "720h0m0s" {
		t.Errorf("fleet status: settings %v", st)
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
	// A single server has no other server to remove (409, saying so).
	var ae *api.Error
	if err := c.FleetRemoveServer(ctx, "mx9"); !errors.As(err, &ae) || ae.Status != http.StatusConflict || !strings.Contains(err.Error(), "not clustered") {
		t.Errorf("remove-server on a single server: %v, want HTTP 409 saying it is not clustered", err)
	}

	// The fleet's metrics: connected, applying, nothing queued.
	_, met := httpGet(t, base+"/metrics")
	for _, want := range []string{`nddmilter_fleet_connected{node="mx1"} 1`, `nddmilter_fleet_ready{node="mx1"} 1`,
		`nddmilter_fleet_lag_events{node="mx1"} 0`, `nddmilter_fleet_outbox_events{node="mx1"} 0`, `nddmilter_fleet_published_total{node="mx1"}`} {
		if !strings.Contains(met, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// Its clock's offset, once measured (its first status stored and read).
	for i := 0; !strings.Contains(met, `nddmilter_fleet_clock_offset_seconds{node="mx1"} 0`); i++ {
		if i == 200 {
			t.Fatal("/metrics: no clock offset of 0 in 10s")
		}
		time.Sleep(50 * time.Millisecond)
		_, met = httpGet(t, base+"/metrics")
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

	// An event of a newer version, signed by a node of the fleet, halts
	// applying, and the node is no longer ready, saying why.
	kp, err := natsd.ReadUserSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := natsd.ClientOptions{URLs: []string{"nats://" + natsAddr}, NkeySeed: seedFile}.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf(`{"v":%d}`, fleet.EventVersion+1)
	newer := append([]byte{byte(fleet.EventVersion + 1), byte(len(head))}, head...)
	h, err := fleet.SignEvent(kp, "mx1", "NDDMILTER.events", "newer-1", newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "NDDMILTER.events", Header: h, Data: newer}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		code, body := httpGet(t, base+"/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "halted: event") && strings.Contains(body, "needs an upgrade") {
			break
		}
		if i == 200 {
			t.Fatalf("/readyz after an event of a newer version: %d %q", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, met = httpGet(t, base+"/metrics"); !strings.Contains(met, `nddmilter_fleet_halted{node="mx1"} 1`) {
		t.Errorf("/metrics: not halted")
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

// TestFleetReplaceHost: three daemons with embedded servers and nkey
// users form a fleet; one host is retired for good and a fourth takes its
// place; `fleet remove-server` (its API) through a remaining daemon
// removes the retired server from the JetStream cluster, after which the
// stream's copies are on the three live hosts, all current, and the new
// host has the fleet's campaigns; then the whole fleet restarts at once
// and takes reports again. The three first start together with
// empty stores: each serves within seconds (the look for a snapshot is
// retried, not left waiting on a request sent before the cluster had a
// meta leader, which held every start for a minute).
func TestFleetReplaceHost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four daemons with embedded JetStream servers")
	}
	dir := t.TempDir()
	type host struct {
		name, milter, http, nats, route, seedFile, cfg string
		cancel                                         context.CancelFunc
		done                                           chan error
		logs                                           testutil.LockedBuffer
	}
	hosts := make([]*host, 4)
	addrs := freeAddrs(t, 12) // the first three hosts'
	var nodes, routes []string
	for i := range hosts {
		seed, pub, err := natsd.NewUserKey()
		if err != nil {
			t.Fatal(err)
		}
		h := &host{name: fmt.Sprintf("mx%d", i+1)}
		if i < 3 { // mx4's addresses are picked when it starts (below)
			h.milter, h.http, h.nats, h.route = addrs[4*i], addrs[4*i+1], addrs[4*i+2], addrs[4*i+3]
		}
		h.seedFile, h.cfg = filepath.Join(dir, h.name+".nk"), filepath.Join(dir, h.name+".yaml")
		if err := os.WriteFile(h.seedFile, seed, 0o600); err != nil {
			t.Fatal(err)
		}
		// mx1 alone stores snapshots: the others' NATS users may write
		// only their own status (natsd.Permissions).
		nodes = append(nodes, fmt.Sprintf("    - {name: %s, key: %s, snapshots: %v}", h.name, pub, i == 0))
		if i < 3 { // the new host dials the first three; they learn its route
			routes = append(routes, "      - nats-route://"+h.route)
		}
		hosts[i] = h
	}
	writeConfig := func(h *host) {
		cfg := fmt.Sprintf(`milter:
  listen: inet:%s
http:
  listen: %s
  token: s3cret-0123456789
store:
  dir: %s
fleet:
  enabled: true
  node: %s
  nats:
    nkey_seed: %s
  nodes:
%s
  embedded:
    enabled: true
    listen: %s
    cluster_listen: %s
    dir: %s
    routes:
%s
  replicas: 3
`, h.milter, h.http, filepath.Join(dir, h.name, "store"), h.name, h.seedFile, strings.Join(nodes, "\n"), h.nats, h.route,
			filepath.Join(dir, h.name, "nats"), strings.Join(routes, "\n"))
		if err := os.WriteFile(h.cfg, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range hosts[:3] {
		writeConfig(h)
	}
	start := func(h *host) {
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done = cancel, make(chan error, 1)
		go func() { h.done <- Run(ctx, Options{ConfigPath: h.cfg, LogOutput: &h.logs}) }()
	}
	stop := func(h *host) {
		if h.cancel != nil {
			h.cancel()
			if err := <-h.done; err != nil {
				t.Errorf("%s: Run: %v", h.name, err)
			}
			h.cancel = nil
		}
	}
	t.Cleanup(func() {
		for _, h := range hosts {
			stop(h)
		}
		if t.Failed() {
			for _, h := range hosts {
				t.Logf("%s log:\n%s", h.name, tail(h.logs.String(), 4000))
			}
		}
	})
	ready := func(h *host) {
		t.Helper()
		var body string
		for range 1500 { // 30 s
			var code int
			code, body = httpGet(t, "http://"+h.http+"/readyz")
			if code == 200 && strings.Contains(body, "fleet: connected") {
				return
			}
			select {
			case err := <-h.done:
				t.Fatalf("%s stopped: %v", h.name, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
		t.Fatalf("%s not in the fleet in 30 s: %q", h.name, body)
	}
	client := func(h *host) *api.Client {
		return &api.Client{BaseURL: "http://" + h.http, Token: "s3cret-0123456789"}
	}
	for _, h := range hosts[:3] {
		start(h)
	}
	for _, h := range hosts[:3] {
		ready(h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	raw := spamgen.NewMessage("Exclusive offer: refinance your mortgage at record low rates",
		strings.Repeat("Dear homeowner, our records indicate that you may qualify for a substantially lower monthly payment on your current mortgage. ", 6), false)
	// report reports raw on h until the fleet took it (the stream is
	// created once the servers elected a meta leader), and returns its
	// campaign as h checks it (a report's answer may name none: replicated
	// but not applied within the node's apply timeout, on a busy machine).
	report := func(h *host, raw []byte, who string) store.CampaignID {
		t.Helper()
		for {
			o, err := client(h).Report(ctx, raw, store.KindSpam, who)
			if err == nil && o.Replication == campaign.Replicated {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("report on %s: %+v %v", h.name, o, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		for {
			v, err := client(h).Check(ctx, raw, false)
			if err == nil && v.Campaign != 0 {
				return v.Campaign
			}
			if ctx.Err() != nil {
				t.Fatalf("check on %s after its report: %+v %v", h.name, v, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	first := report(hosts[0], raw, "alice")

	// A server still running is refused, an unknown one is not found.
	var ae *api.Error
	if err := client(hosts[0]).FleetRemoveServer(ctx, "mx2"); !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		t.Errorf("remove-server mx2 (running): %v, want HTTP 409", err)
	}
	if err := client(hosts[0]).FleetRemoveServer(ctx, "mx9"); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Errorf("remove-server mx9 (unknown): %v, want HTTP 404", err)
	}

	// mx3 is retired, mx4 takes its place, mx3 is removed.
	stop(hosts[2])
	mx4 := hosts[3]
	a4 := freeAddrs(t, 4)
	mx4.milter, mx4.http, mx4.nats, mx4.route = a4[0], a4[1], a4[2], a4[3]
	writeConfig(mx4)
	start(mx4)
	ready(hosts[3])
	for {
		err := client(hosts[0]).FleetRemoveServer(ctx, "mx3")
		if err == nil {
			break
		}
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ctx.Err() != nil {
			t.Fatalf("remove-server mx3 (stopped): %v", err)
		}
		time.Sleep(200 * time.Millisecond) // mx1 still sees its route
	}
	var reps []fleet.Replica
	for {
		var nodes []fleet.Status
		if err := client(hosts[0]).FleetStatus(ctx, &nodes); err == nil {
			for _, s := range nodes {
				if s.Node == "mx1" {
					reps = s.Replicas
				}
			}
		}
		var live []string
		for _, r := range reps {
			if r.Healthy() {
				live = append(live, r.Server)
			}
		}
		slices.Sort(live)
		if len(reps) == 3 && slices.Equal(live, []string{"mx1", "mx2", "mx4"}) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the stream's copies after the removal: %+v, want mx1, mx2 and mx4 current", reps)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		v, err := client(hosts[3]).Check(ctx, raw, false)
		if err == nil && v.Campaign == first {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("mx4 check: %+v %v, want campaign %d", v, err, first)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The whole fleet restarts at once (a power cut): every host serves
	// again, and a report taken on one reaches the others.
	live := []*host{hosts[0], hosts[1], hosts[3]}
	for _, h := range live {
		stop(h)
	}
	for _, h := range live {
		start(h)
	}
	for _, h := range live {
		ready(h)
	}
	raw2 := spamgen.NewMessage("Your parcel is waiting: confirm the delivery fee",
		strings.Repeat("We attempted to deliver your parcel today but a customs fee of 1.99 is unpaid; confirm your address and card to reschedule. ", 6), false)
	second := report(hosts[1], raw2, "bob")
	for _, h := range live {
		for {
			v, err := client(h).Check(ctx, raw2, false)
			if err == nil && v.Campaign == second {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s check after the restart: %+v %v, want campaign %d", h.name, v, err, second)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// testSeed writes a new user nkey seed for node into dir and returns its
// file and public key.
func testSeed(t *testing.T, dir, node string) (file, public string) {
	t.Helper()
	seed, pub, err := natsd.NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, node+".nk")
	if err := os.WriteFile(file, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return file, pub
}
