package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/dashboard"
	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
)

// TestBrowserFleet runs three daemons forming a fleet (embedded JetStream
// servers clustered on loopback) and drives headless Chromium through
// the dashboard of one of them: the fleet table lists the three nodes,
// converged on one state hash; a campaign reported on another node is
// listed, with the copies checked on the third counted; allowing it from this dashboard reaches the node that took the
// report; the page fits a phone. It saves the screenshot the README shows.
func TestBrowserFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test starts three daemons and Chromium")
	}
	exe := findChromium(t)
	shots := screenshotDir(t)

	dir := t.TempDir()
	type host struct{ name, http, nats, route, seed string }
	hosts := make([]*host, 3)
	var routes, nodes []string
	for i := range hosts {
		hosts[i] = &host{name: fmt.Sprintf("mx%d", i+1), http: freeAddr(t), nats: freeAddr(t), route: freeAddr(t)}
		routes = append(routes, "      - nats-route://"+hosts[i].route)
		seed, pub, err := natsd.NewUserKey()
		if err != nil {
			t.Fatal(err)
		}
		hosts[i].seed = filepath.Join(dir, hosts[i].name+".nk")
		if err := os.WriteFile(hosts[i].seed, seed, 0o600); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, fmt.Sprintf("    - {name: %s, key: %s, snapshots: true}", hosts[i].name, pub))
	}
	for _, h := range hosts {
		cfg := fmt.Sprintf(`milter:
  listen: inet:%s
http:
  listen: %s
  token: %s
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
`, freeAddr(t), h.http, browserToken, filepath.Join(dir, h.name, "store"), h.name, h.seed, strings.Join(nodes, "\n"), h.nats, h.route,
			filepath.Join(dir, h.name, "nats"), strings.Join(routes, "\n"))
		path := filepath.Join(dir, h.name+".yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- daemon.Run(ctx, daemon.Options{ConfigPath: path, LogOutput: io.Discard}) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("%s: %v", h.name, err)
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, h := range hosts {
		for {
			resp, err := http.Get("http://" + h.http + "/readyz")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && strings.Contains(string(b), "fleet: connected") {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not in the fleet within 60s", h.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// A campaign reported on mx1 (retried until the stream takes it: the
	// servers elect their leaders meanwhile), seen on mx2.
	base1, base2 := "http://"+hosts[0].http, "http://"+hosts[1].http
	subject := "Your parcel is waiting: confirm the delivery fee"
	var id uint64
	for i := 0; ; i++ {
		var out struct {
			Campaign    uint64 `json:"campaign"`
			Replication string `json:"replication"`
		}
		code := api(t, base1, http.MethodPost, "/v1/reports?kind=spam&reporter=alice",
			dashboard.CampaignMessage(t, 1, 0, subject, "DHL Express <noreply@parcel-track.example>", ""), &out)
		if code == http.StatusOK && out.Replication == "replicated" && out.Campaign != 0 {
			id = out.Campaign
			break
		}
		if i == 200 {
			t.Fatalf("report on mx1: %d %+v", code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; api(t, base2, http.MethodGet, fmt.Sprintf("/v1/campaigns/%d", id), nil, nil) != http.StatusOK; i++ {
		if i == 200 {
			t.Fatalf("campaign %d never reached mx2", id)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Copies checked on mx3 are counted fleet-wide: mx2's ranking of the
	// hour has them (hit counts are published every few seconds).
	const hits = 3
	base3 := "http://" + hosts[2].http
	for i := range hits {
		if code := api(t, base3, http.MethodPost, "/v1/check?record=1",
			dashboard.CampaignMessage(t, 1, 100+i, subject, "DHL Express <noreply@parcel-track.example>", ""), nil); code != http.StatusOK {
			t.Fatalf("check on mx3: %d", code)
		}
	}
	for i := 0; ; i++ {
		var c summary
		if api(t, base2, http.MethodGet, fmt.Sprintf("/v1/campaigns/%d", id), nil, &c); c.Messages == hits {
			break
		}
		if i == 300 {
			t.Fatalf("campaign %d on mx2: %d messages in 30 s, want the %d checked on mx3", id, c.Messages, hits)
		}
		time.Sleep(100 * time.Millisecond)
	}

	bctx := newBrowser(t, exe)
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		runSteps(t, bctx, what, steps...)
	}
	evalString := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return v
	}
	run("login on mx2", chromedp.Navigate(base2+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#secret")),
		chromedp.SendKeys(chromedp.CSS("#secret"), browserToken), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#fleet")))

	// The nodes publish their status every 10 s, with a state hash once
	// idle: reload until the page says they converged (bounded).
	states := ""
	for i := 0; ; i++ {
		states = evalString(`(document.getElementById("states") || {}).textContent || ""`)
		if states == "3 nodes, one state hash: converged" {
			break
		}
		if i == 60 {
			t.Fatalf("mx2's dashboard: states line %q after 60 s, want the three nodes converged", states)
		}
		time.Sleep(time.Second)
		run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#fleet")))
	}
	for _, h := range hosts {
		row := fmt.Sprintf(`tr[data-node=%q]`, h.name)
		if got := evalString(fmt.Sprintf(`document.querySelector(%q).cells[1].textContent`, row)); got != "ok" {
			t.Errorf("%s's state %q, want ok", h.name, got)
		}
		if got := evalString(fmt.Sprintf(`document.querySelector(%q).cells[6].textContent`, row)); !strings.Contains(got, "@") {
			t.Errorf("%s's state hash %q", h.name, got)
		}
	}
	if n := evalString(`document.querySelectorAll(".fleet-warning").length.toString()`); n != "0" {
		t.Errorf("%s fleet warnings on a healthy fleet: %s", n, evalString(`document.querySelector(".fleet-warning").textContent`))
	}
	if got := evalString(`(document.getElementById("copies") || {}).textContent || ""`); !strings.HasPrefix(got, "Copies of the stream: ") || strings.Count(got, "mx") != 3 {
		t.Errorf("copies line %q, want the stream's three copies", got)
	}
	if got := evalString(fmt.Sprintf(`(document.querySelector("#c%d a") || {}).textContent || ""`, id)); got != fmt.Sprintf("#%d", id) {
		t.Errorf("mx2's ranking of the hour does not list campaign %d reported on mx1 (%q)", id, got)
	} else if got := evalString(fmt.Sprintf(`document.querySelector("#c%d td:nth-child(2)").textContent`, id)); got != fmt.Sprint(hits) {
		t.Errorf("campaign %d on mx2's dashboard: %s messages in the hour, want the %d checked on mx3", id, got, hits)
	}
	b, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shots, "dashboard-fleet.png"), b, 0o644); err != nil {
		t.Fatal(err)
	}

	// Allowed from mx2's dashboard, allowed on mx1.
	run("allow on mx2", chromedp.Navigate(fmt.Sprintf("%s/ui/campaigns/%d", base2, id)), chromedp.WaitVisible(chromedp.CSS("#allow")),
		chromedp.Click(chromedp.CSS("#allow")), chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#unallow")))
	var s summary
	for i := 0; ; i++ {
		if api(t, base1, http.MethodGet, fmt.Sprintf("/v1/campaigns/%d", id), nil, &s); s.State == "allowed" {
			break
		}
		if i == 200 {
			t.Fatalf("campaign %d on mx1: state %q after the allow on mx2's dashboard", id, s.State)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A phone: the fleet table scrolls inside its box, the page does not.
	run("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(base2+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#fleet")))
	if w, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); err != nil || w > 391 {
		t.Errorf("now page with the fleet is %d px wide on a 390 px phone (%v)", w, err)
	}
}
