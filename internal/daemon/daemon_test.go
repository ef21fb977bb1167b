package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/testutil"
)

// freeAddr is one free loopback address; freeAddrs n distinct ones. A test
// that needs several takes them in one freeAddrs call: each pick is
// released for its server to bind, so separate calls can return the same
// port twice (two nodes then fight over one route port).
func freeAddr(t *testing.T) string {
	t.Helper()
	return freeAddrs(t, 1)[0]
}

func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	// Below the ephemeral range: a port-0 pick could be handed, before the
	// daemon binds it, to the local end of another node's outgoing route
	// dial, and that node's route listener would never start.
	return testutil.FreeAddrs(t, n)
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The daemon as the administrator runs it: config file, milter and HTTP
// listeners, metrics, reload on SIGHUP (a bad file keeps the running
// configuration), clean stop when the context ends.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	a := freeAddrs(t, 2)
	milterAddr, httpAddr := a[0], a[1]
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	readPassword := "first-read-password-0123"
	writeCfg := func(milterExtra string) {
		cfg := fmt.Sprintf("milter:\n  listen: inet:%s\n%shttp:\n  listen: %s\n  token: s3cret-0123456789\n  dashboard:\n    read_password: %s\nstore:\n  dir: %s\n",
			milterAddr, milterExtra, httpAddr, readPassword, filepath.Join(dir, "store"))
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{ConfigPath: cfgPath, LogOutput: io.Discard}) }()

	base := "http://" + httpAddr
	ready := false
	for i := 0; i < 300 && !ready; i++ {
		select {
		case err := <-done:
			t.Fatalf("serve stopped: %v", err)
		default:
		}
		code, _ := httpGet(t, base+"/readyz")
		ready = code == 200
		time.Sleep(20 * time.Millisecond)
	}
	if !ready {
		t.Fatal("not ready")
	}
	if code, body := httpGet(t, base+"/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Errorf("/healthz: %d %q", code, body)
	}
	storeDir := filepath.Join(dir, "store")
	if got := RunningAPIURL(storeDir); got != base {
		t.Errorf("recorded API address %q, want %q", got, base)
	}
	// The dashboard is served under /ui/ (its login page without a
	// session), and / leads there.
	if code, body := httpGet(t, base+"/ui/login"); code != 200 || !strings.Contains(body, `action="/ui/login"`) {
		t.Errorf("/ui/login: %d", code)
	}
	if resp, err := noRedirect.Get(base + "/"); err != nil || resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("/: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	send := func() (map[string]string, *gomilter.Action) {
		t.Helper()
		c := gomilter.NewClientWithOptions("tcp", milterAddr, gomilter.ClientOptions{
			ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
			ActionMask: gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
		})
		s, err := c.Session()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.Mail("a@example.net", nil)
		s.Rcpt("b@example.org", nil)
		s.HeaderField("Subject", "Minutes of the meeting")
		s.HeaderEnd()
		s.BodyChunk([]byte("The budget review moved to Thursday afternoon in the small room.\r\n"))
		mods, act, err := s.End()
		if err != nil {
			t.Fatal(err)
		}
		h := map[string]string{}
		for _, m := range mods {
			if m.Code == gomilter.ActAddHeader {
				h[m.HeaderName] = m.HeaderValue
			}
		}
		return h, act
	}
	if h, act := send(); act.Code != gomilter.ActAccept || !strings.HasPrefix(h["X-NDD-Verdict"], "accept;") {
		t.Fatalf("message: %c %v", act.Code, h)
	}

	// A report through the API is counted.
	req, _ := http.NewRequest("POST", base+"/v1/reports?kind=spam&reporter=alice",
		strings.NewReader("Subject: Cheap watches\r\n\r\nBuy cheap replica watches today, finest quality, discreet shipping worldwide, order now.\r\n"))
	req.Header.Set("Authorization", "Bearer s3cret-0123456789")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("report: %v %v", resp, err)
	}
	// Every accepted spelling of a kind counts under its documented label.
	for _, kind := range []string{"junk", "not-spam", "", "HAM"} {
		req, _ := http.NewRequest("POST", base+"/v1/reports?kind="+url.QueryEscape(kind)+"&reporter=bob",
			strings.NewReader("Subject: Lunch\r\n\r\nShall we meet for lunch at the usual place near the station at noon?\r\n"))
		req.Header.Set("Authorization", "Bearer s3cret-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("report of kind %q: %v %v", kind, resp, err)
		}
		resp.Body.Close()
	}

	// A bad file on SIGHUP keeps the running configuration.
	writeCfg("  on_error: maybe\n")
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	waitMetric(t, base, `nddmilter_reloads_total{result="error"} 1`)
	// A good one is applied without dropping the listener; the dashboard
	// takes its new password, and the sessions of the old one end.
	session := dashboardLogin(t, base, readPassword)
	if code := dashboardGet(t, base, session); code != http.StatusOK {
		t.Errorf("dashboard with a session: %d", code)
	}
	readPassword = "second-read-password-0123"
	writeCfg("  header_prefix: X-Campaign-\n")
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	waitMetric(t, base, `nddmilter_reloads_total{result="ok"} 1`)
	if h, _ := send(); h["X-Campaign-Verdict"] == "" {
		t.Errorf("reloaded header prefix not used: %v", h)
	}
	if code := dashboardGet(t, base, session); code != http.StatusSeeOther {
		t.Errorf("dashboard session of a replaced password: %d, want the login page", code)
	}
	if code := dashboardGet(t, base, dashboardLogin(t, base, readPassword)); code != http.StatusOK {
		t.Errorf("dashboard with the new password: %d", code)
	}

	_, metrics := httpGet(t, base+"/metrics")
	for _, want := range []string{
		`nddmilter_messages_total{action="accept"} 2`,
		`nddmilter_reports_total{kind="spam"} 3`,
		`nddmilter_reports_total{kind="ham"} 2`,
		`nddmilter_check_duration_seconds_count 2`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	checkLabelValues(t, metrics)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	if got := RunningAPIURL(storeDir); got != "" {
		t.Errorf("API address %q still recorded after the daemon stopped", got)
	}
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// dashboardLogin logs in to the dashboard and returns the session cookie.
func dashboardLogin(t *testing.T, base, secret string) *http.Cookie {
	t.Helper()
	resp, err := noRedirect.PostForm(base+"/ui/login", url.Values{"secret": {secret}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "nddmilter_session" {
			return c
		}
	}
	t.Fatalf("dashboard login: %d, no session cookie", resp.StatusCode)
	return nil
}

// dashboardGet reads the dashboard's now page with a session cookie.
func dashboardGet(t *testing.T, base string, session *http.Cookie) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/ui/", nil)
	req.AddCookie(session)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitMetric(t *testing.T, base, want string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if _, m := httpGet(t, base+"/metrics"); strings.Contains(m, want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("metric %q never appeared", want)
}

// keepRestartSettings keeps the running values of what changes only on
// restart, the whole fleet section among them, and warns about each.
func TestKeepRestartSettings(t *testing.T) {
	tests := []struct {
		name string
		edit func(*config.Config)
		want string // the key warned about ("": none)
	}{
		{"nothing", func(*config.Config) {}, ""},
		{"milter.listen", func(c *config.Config) { c.Milter.Listen = "inet:127.0.0.1:9" }, "milter.listen"},
		{"fleet user added", func(c *config.Config) {
			c.Fleet.Embedded.Users = append(c.Fleet.Embedded.Users, config.FleetUser{Nkey: "UNEW"})
		}, "fleet"},
		{"fleet hits_every", func(c *config.Config) { c.Fleet.HitsEvery = config.Duration(time.Minute) }, "fleet"},
	}
	for _, tt := range tests {
		old := config.Default()
		cfg := config.Default()
		tt.edit(cfg)
		var logs strings.Builder
		keepRestartSettings(cfg, old, slog.New(slog.NewTextHandler(&logs, nil)))
		if !reflect.DeepEqual(cfg, old) {
			t.Errorf("%s: the running settings were not kept", tt.name)
		}
		switch got := logs.String(); {
		case tt.want == "" && got != "":
			t.Errorf("%s: unexpected warning %q", tt.name, got)
		case tt.want != "" && !strings.Contains(got, "key="+tt.want+"\n") && !strings.Contains(got, "key="+tt.want+" "):
			t.Errorf("%s: warning %q, want one about %s", tt.name, got, tt.want)
		}
	}
}
