package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/dashboard"
	"github.com/nddmilter/nddmilter/internal/testutil"
)

// The browser test's environment:
//
//	NDDMILTER_CHROMIUM           the browser to run (default: chromium or chromium-browser on PATH)
//	NDDMILTER_BROWSER_REQUIRED=1 a missing browser fails the test instead of skipping it (test/e2e/dashboard.sh)
//	NDDMILTER_SCREENSHOTS=DIR    where the screenshots go (default: the test's temporary directory)
const (
	envChromium   = "NDDMILTER_CHROMIUM"
	envRequired   = "NDDMILTER_BROWSER_REQUIRED"
	envScreenshot = "NDDMILTER_SCREENSHOTS"
)

const browserToken = "browser-test-token-0123456789"

func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH (apt-get install chromium, or set " + envChromium + "): the browser test of the dashboard did not run"
	if os.Getenv(envRequired) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// screenshotDir is where a browser test saves its screenshots: the
// directory of envScreenshot, or a temporary one.
func screenshotDir(t *testing.T) string {
	t.Helper()
	shots := os.Getenv(envScreenshot)
	if shots == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	return shots
}

// newBrowser starts headless Chromium (exe) in a 1280×900 window, closed
// when t ends, and returns its context.
func newBrowser(t *testing.T, exe string) context.Context {
	t.Helper()
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))...)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(bctx); err != nil { // start it without a deadline
		t.Fatalf("start chromium %s: %v", exe, err)
	}
	return bctx
}

// runSteps runs steps in the browser within 30 s, failing t with what.
func runSteps(t *testing.T, bctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// api calls the daemon's /v1 API and decodes its JSON answer into out.
func api(t *testing.T, base, method, path string, body []byte, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+browserToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

type summary struct {
	ID           uint64 `json:"id"`
	State        string `json:"state"`
	Messages     int64  `json:"messages"`
	HamReporters int64  `json:"ham_reporters"`
}

// TestBrowser runs the daemon on a real store, reports campaigns to it,
// and drives headless Chromium through every page: content, allow,
// delete, refusals without login or CSRF token, hostile samples that must
// neither run nor break the layout, a phone's viewport; it saves the
// screenshots.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test starts a daemon and Chromium")
	}
	exe := findChromium(t)
	shots := screenshotDir(t)

	// The daemon, as an administrator runs it.
	dir := t.TempDir()
	addrs := testutil.FreeAddrs(t, 2)
	httpAddr := addrs[0]
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	cfg := fmt.Sprintf("milter:\n  listen: inet:%s\nhttp:\n  listen: %s\n  token: %s\n  dashboard:\n    read_password: read-only-password-0123\nstore:\n  dir: %s\n",
		addrs[1], httpAddr, browserToken, filepath.Join(dir, "store"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, LogOutput: io.Discard}) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	base := "http://" + httpAddr
	for i := 0; ; i++ {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if i == 500 {
			t.Fatal("the daemon did not get ready")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Campaigns, from the generator: spam reported by several users and
	// copies checked (the milter's hits), one with not-spam reports, and
	// hostile samples.
	type camp struct {
		seed            uint64
		subject, from   string
		extra           string
		reporters, hits int
		replyHits       int // of the hits, those that answer a thread: graymail
		hamReporters    int
		id              uint64
	}
	camps := []*camp{
		{seed: 1, subject: "Your parcel is waiting: confirm the delivery fee", from: "DHL Express <noreply@parcel-track.example>", reporters: 4, hits: 9, replyHits: 1},
		{seed: 2, subject: "Luxury watches at 90% off, today only", from: "Watch Outlet <deals@watch-outlet.example>", reporters: 3, hits: 5},
		{seed: 3, subject: "Invoice #88231 overdue", from: "Accounts <billing@invoices.example>", reporters: 2, hits: 2},
		{seed: 4, subject: "Team newsletter: November", from: "Newsletter <news@example.org>", reporters: 1, hits: 1, hamReporters: 2},
		{seed: 5, subject: `<script>window.pwned=1</script><img src=x onerror="window.pwned=1">` + strings.Repeat(" a very long subject", 400),
			from: `"<b>javascript:window.pwned=1</b>" <x@hostile.example>`, extra: `<script>window.pwned=1</script> <a href="javascript:window.pwned=1">open</a> ` + strings.Repeat("overlongwordwithoutanyspace", 60), reporters: 1, hits: 1},
	}
	for _, c := range camps {
		for r := range c.reporters {
			var out struct {
				Campaign uint64 `json:"campaign"`
			}
			if code := api(t, base, http.MethodPost, fmt.Sprintf("/v1/reports?kind=spam&reporter=user%d", r), dashboard.CampaignMessage(t, c.seed, r, c.subject, c.from, c.extra), &out); code != http.StatusOK || out.Campaign == 0 {
				t.Fatalf("report of campaign %d: %d", c.seed, code)
			}
			c.id = out.Campaign
		}
		for h := range c.hits {
			raw := dashboard.CampaignMessage(t, c.seed, 100+h, c.subject, c.from, c.extra)
			if h < c.replyHits {
				raw = append([]byte("In-Reply-To: <thread@example.net>\r\n"), raw...)
			}
			if code := api(t, base, http.MethodPost, "/v1/check?record=1", raw, nil); code != http.StatusOK {
				t.Fatalf("check: %d", code)
			}
		}
		for r := range c.hamReporters {
			if code := api(t, base, http.MethodPost, fmt.Sprintf("/v1/reports?kind=ham&reporter=friend%d", r), dashboard.CampaignMessage(t, c.seed, 200+r, c.subject, c.from, c.extra), nil); code != http.StatusOK {
				t.Fatalf("ham report: %d", code)
			}
		}
	}
	// The invoices campaign's sender also sends ordinary mail: accepted,
	// matching nothing, it puts the campaign on the false-positive watch.
	for i := range 25 {
		raw := fmt.Appendf(nil, "From: Orders <orders@invoices.example>\r\nSubject: Order %d\r\n\r\nYour order %d has shipped.\r\n", i, i)
		if code := api(t, base, http.MethodPost, "/v1/check?record=1", raw, nil); code != http.StatusOK {
			t.Fatalf("check: %d", code)
		}
	}
	// Hits are flushed to the store every second: wait until the hour's
	// ranking holds them all.
	var allHits int64
	for _, c := range camps {
		allHits += int64(c.hits)
	}
	for i := 0; ; i++ {
		var ranked []struct {
			HourMessages int64 `json:"hour_messages"`
		}
		api(t, base, http.MethodGet, "/v1/campaigns?sort=hour", nil, &ranked)
		var sum int64
		for _, r := range ranked {
			sum += r.HourMessages
		}
		if sum == allHits {
			break
		}
		if i == 100 {
			t.Fatalf("the hour's ranking holds %d hits, want %d", sum, allHits)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The browser.
	bctx := newBrowser(t, exe)
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		runSteps(t, bctx, what, steps...)
	}
	text := func(sel string) string {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 10*time.Second)
		defer cancel()
		s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	eval := func(js string) bool {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[bool](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return v
	}
	shot := func(name string) {
		t.Helper()
		b, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, "dashboard-"+name+".png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// noOverflow: the page is no wider than the window, and no script of
	// a sample ran.
	layoutSafe := func(page string, width int) {
		t.Helper()
		if eval(`window.pwned !== undefined`) {
			t.Errorf("%s: a sample's script ran", page)
		}
		if eval(fmt.Sprintf(`document.documentElement.scrollWidth > %d`, width+1)) {
			w, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
			t.Errorf("%s: the page is %d px wide in a %d px window", page, w, width)
		}
	}

	// Without a session, the pages lead to the login form.
	run("open", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#secret")))
	if loc, _ := chromedp.Run(bctx, chromedp.Location()); !strings.HasSuffix(loc, "/ui/login") {
		t.Errorf("without a session: at %s, want the login page", loc)
	}
	run("wrong password", chromedp.SendKeys(chromedp.CSS("#secret"), "not-the-password-0000"), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS(".error")))
	shot("login")
	run("login", chromedp.SendKeys(chromedp.CSS("#name"), "alice"), chromedp.SendKeys(chromedp.CSS("#secret"), browserToken),
		chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#campaigns")))

	// Now: ranked by the last hour, the top campaign first, with counts.
	top := camps[0]
	if got := text("#campaigns tbody tr:first-child td:first-child a"); got != fmt.Sprintf("#%d", top.id) {
		t.Errorf("first campaign of the hour %q, want #%d", got, top.id)
	}
	if got := text(fmt.Sprintf("#c%d td:nth-child(2)", top.id)); got != fmt.Sprint(top.hits) {
		t.Errorf("campaign %d: %s messages in the hour, want %d", top.id, got, top.hits)
	}
	if got := text("#total-checked"); got != fmt.Sprint(allHits+25) { // and the 25 accepted
		t.Errorf("messages checked %s, want %d", got, allHits+25)
	}
	if got := text("#store-campaigns"); got != fmt.Sprint(len(camps)) {
		t.Errorf("campaigns in the store %s, want %d", got, len(camps))
	}
	layoutSafe("now", 1280)
	shot("now")

	// One campaign.
	run("campaign", chromedp.Click(chromedp.CSS(fmt.Sprintf("#c%d a", top.id))), chromedp.WaitVisible(chromedp.CSS("#sample-subject")))
	for sel, want := range map[string]string{"#messages": fmt.Sprint(top.hits), "#spam-reporters": fmt.Sprint(top.reporters), "#state": "active", "#sample-subject": top.subject} {
		if got := text(sel); got != want {
			t.Errorf("campaign %d: %s = %q, want %q", top.id, sel, got, want)
		}
	}
	if !eval(`document.querySelectorAll("svg.chart polyline").length >= 4 && document.querySelectorAll("#reporters tbody tr").length == 4`) {
		t.Error("campaign page: no timeline or not 4 reporters")
	}
	layoutSafe("campaign", 1280)
	shot("campaign")

	// Allow, confirmed; the store says allowed; undo.
	run("allow", chromedp.Click(chromedp.CSS("#allow")), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	shot("confirm")
	run("confirm allow", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#unallow")))
	var s summary
	if api(t, base, http.MethodGet, fmt.Sprintf("/v1/campaigns/%d", top.id), nil, &s); s.State != "allowed" {
		t.Errorf("after allow: state %q in the store", s.State)
	}
	if got := text("#state"); got != "allowed" {
		t.Errorf("after allow: page says %q", got)
	}
	run("undo allow", chromedp.Click(chromedp.CSS("#unallow")), chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#allow")))
	if api(t, base, http.MethodGet, fmt.Sprintf("/v1/campaigns/%d", top.id), nil, &s); s.State != "active" {
		t.Errorf("after undo allow: state %q in the store", s.State)
	}

	// A change without the CSRF token, and one without a session, are
	// refused: the browser's own session cookie, sent without the form's
	// token, changes nothing.
	cookies, err := chromedp.Call(bctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/ui/"}})
	if err != nil || len(cookies.Cookies) != 1 || !cookies.Cookies[0].HTTPOnly {
		t.Fatalf("session cookie: %+v, %v", cookies, err)
	}
	victim := camps[1]
	for _, tc := range []struct {
		name   string
		cookie bool
		form   url.Values
	}{{"no CSRF token", true, url.Values{}}, {"no session", false, url.Values{"csrf": {"x"}}}} {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/ui/campaigns/%d/delete", base, victim.id), strings.NewReader(tc.form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tc.cookie {
			req.AddCookie(&http.Cookie{Name: dashboard.CookieName, Value: cookies.Cookies[0].Value})
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("delete with %s: %d, want 403", tc.name, resp.StatusCode)
		}
		if code := api(t, base, http.MethodGet, fmt.Sprintf("/v1/campaigns/%d", victim.id), nil, nil); code != http.StatusOK {
			t.Errorf("delete with %s: the campaign is gone (%d)", tc.name, code)
		}
	}

	// Delete, confirmed: gone from the store.
	run("delete", chromedp.Navigate(fmt.Sprintf("%s/ui/campaigns/%d", base, victim.id)), chromedp.WaitVisible(chromedp.CSS("#delete")),
		chromedp.Click(chromedp.CSS("#delete")), chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#campaigns")))
	if code := api(t, base, http.MethodGet, fmt.Sprintf("/v1/campaigns/%d", victim.id), nil, nil); code != http.StatusNotFound {
		t.Errorf("after delete: GET the campaign answers %d, want 404", code)
	}
	if eval(fmt.Sprintf(`document.getElementById("c%d") !== null`, victim.id)) {
		t.Error("the deleted campaign is still listed")
	}

	// False-positive watch: the campaign whose sender also sends ham,
	// the one with a copy held back as graymail (a reply), then the
	// campaign with not-spam reports, each with why.
	ham, invoices := camps[3], camps[2]
	run("watch", chromedp.Navigate(base+"/ui/watch"), chromedp.WaitVisible(chromedp.CSS("#watch")))
	if got := text(fmt.Sprintf("#c%d td:nth-child(3)", top.id)); !strings.Contains(got, "1 copy held back as graymail") {
		t.Errorf("watch: campaign %d: why %q", top.id, got)
	}
	if got := text(fmt.Sprintf("#c%d td:nth-child(3)", invoices.id)); !strings.Contains(got, fmt.Sprintf("%d copies from invoices.example, which sent 25 accepted messages", invoices.hits)) {
		t.Errorf("watch: campaign %d: why %q", invoices.id, got)
	}
	if got := text(fmt.Sprintf("#c%d td:nth-child(3)", ham.id)); !strings.Contains(got, "not-spam report") {
		t.Errorf("watch: campaign %d: why %q", ham.id, got)
	}
	if got := text(fmt.Sprintf("#c%d td:nth-child(4)", ham.id)); !strings.HasPrefix(got, fmt.Sprint(ham.hamReporters)) {
		t.Errorf("watch: campaign %d not-spam reporters %q, want %d", ham.id, got, ham.hamReporters)
	}
	layoutSafe("watch", 1280)
	shot("watch")

	// The hostile sample: shown as text, nothing ran, the layout holds.
	hostile := camps[4]
	run("hostile", chromedp.Navigate(fmt.Sprintf("%s/ui/campaigns/%d", base, hostile.id)), chromedp.WaitVisible(chromedp.CSS("#sample-subject")))
	if got := text("#sample-subject"); !strings.HasPrefix(got, "<script>window.pwned=1</script>") {
		t.Errorf("hostile subject shown as %q", got[:min(len(got), 80)])
	}
	if got := text("#sample-text"); !strings.HasPrefix(got, "<script>window.pwned=1</script>") {
		t.Errorf("hostile text shown as %q", got[:min(len(got), 80)])
	}
	if !eval(`document.querySelectorAll("main script, main img, main a[href^='javascript']").length === 0`) {
		t.Error("the hostile sample made elements")
	}
	layoutSafe("hostile campaign", 1280)
	shot("hostile")

	// A phone: the now page fits the screen.
	run("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#campaigns")))
	layoutSafe("now on a phone", 390)
	shot("phone")
	run("hostile on a phone", chromedp.Navigate(fmt.Sprintf("%s/ui/campaigns/%d", base, hostile.id)), chromedp.WaitVisible(chromedp.CSS("#sample-subject")))
	layoutSafe("hostile campaign on a phone", 390)

	// The read-only password: reads, is offered no change.
	run("logout", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(".logout button")),
		chromedp.Click(chromedp.CSS(".logout button")), chromedp.WaitVisible(chromedp.CSS("#secret")))
	run("read-only login", chromedp.SendKeys(chromedp.CSS("#secret"), "read-only-password-0123"), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#campaigns")), chromedp.Navigate(fmt.Sprintf("%s/ui/campaigns/%d", base, top.id)),
		chromedp.WaitVisible(chromedp.CSS("#state")))
	if eval(`document.getElementById("allow") !== null || document.getElementById("delete") !== null`) {
		t.Error("the read role is offered allow or delete")
	}
}
