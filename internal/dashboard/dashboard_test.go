package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/nddmilter/nddmilter/internal/testutil"
)

const (
	adminSecret = "admin-secret-0123456789"
	readSecret  = "read-secret-0123456789"
)

var testCreds = []Credential{
	{Name: "admin-password", Secret: adminSecret, Role: RoleAdmin},
	{Name: "read-password", Secret: readSecret, Role: RoleRead},
}

type fixture struct {
	srv *httptest.Server
	h   *Handler
	eng *campaign.Engine
	st  *store.Badger
	log *testutil.LockedBuffer
}

// newFixture serves the dashboard over the real engine (shipped lexicon
// and model) and a fresh Badger store.
func newFixture(t *testing.T, o Options) *fixture {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{eng: benchEngine(t, st), st: st, log: &testutil.LockedBuffer{}}
	if o.Credentials == nil {
		o.Credentials = testCreds
	}
	o.Logger = slog.New(slog.NewTextHandler(f.log, nil))
	f.h, err = New(f.eng.Reader, f.eng.Ingester, o)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(f.h)
	t.Cleanup(f.srv.Close)
	return f
}

// report reports message raw as spam by reporter and returns its campaign.
func (f *fixture) report(t *testing.T, raw []byte, kind store.Kind, reporter string) store.CampaignID {
	t.Helper()
	out, err := f.eng.Ingester.Report(context.Background(), raw, kind, reporter)
	if err != nil {
		t.Fatal(err)
	}
	if out.Campaign == 0 {
		t.Fatalf("report made no campaign: %+v", out)
	}
	return out.Campaign
}

// benchEngine is the real engine (shipped lexicon and model) over st.
func benchEngine(tb testing.TB, st store.Store) *campaign.Engine {
	tb.Helper()
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		tb.Fatal(err)
	}
	mod, err := andd.DefaultModel()
	if err != nil {
		tb.Fatal(err)
	}
	eng, err := campaign.New(st, lex, mod, campaign.Options{}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return eng
}

// client is a browser: a cookie jar, no redirects followed.
type client struct {
	t    *testing.T
	c    *http.Client
	base string
	csrf string
}

func (f *fixture) client(t *testing.T) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: f.srv.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (c *client) do(method, path string, form url.Values, hdr map[string]string) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if m := csrfRE.FindSubmatch(b); m != nil {
		c.csrf = string(m[1])
	}
	return resp, string(b)
}

func (c *client) get(path string) (*http.Response, string) {
	return c.do(http.MethodGet, path, nil, nil)
}

// post posts a form as a browser does from the dashboard's own page (its
// fetch metadata says same-origin).
func (c *client) post(path string, form url.Values) (*http.Response, string) {
	return c.do(http.MethodPost, path, form, map[string]string{"Sec-Fetch-Site": "same-origin"})
}

// login logs in with secret, then reads the now page (for its CSRF token).
func (c *client) login(name, secret string) {
	c.t.Helper()
	resp, body := c.post("/ui/login", url.Values{"name": {name}, "secret": {secret}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		c.t.Fatalf("login: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if resp, body := c.get("/ui/"); resp.StatusCode != http.StatusOK || c.csrf == "" {
		c.t.Fatalf("now page after login: %d, csrf %q\n%s", resp.StatusCode, c.csrf, body)
	}
}

func (f *fixture) state(t *testing.T, id store.CampaignID) (store.State, bool) {
	t.Helper()
	c, err := f.eng.Reader.Get(context.Background(), id)
	if errors.Is(err, store.ErrNotFound) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return c.State, true
}

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, Options{})
	c := f.client(t)
	for _, path := range []string{"/ui/login", "/ui/", "/ui/static/style.css", "/ui/static/", "/ui/nothing"} {
		resp, _ := c.get(path)
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: X-Frame-Options %q, X-Content-Type-Options %q", path, h.Get("X-Frame-Options"), h.Get("X-Content-Type-Options"))
		}
	}
	if resp, body := c.get("/ui/static/style.css"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/css") || !strings.Contains(body, "body") {
		t.Errorf("stylesheet: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp, _ := c.get("/ui/static/"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("static directory: %d, want 404 (no listing)", resp.StatusCode)
	}
}

// Without a session, pages send to the login page and changes are
// refused; the store is unchanged.
func TestLoginRequired(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.report(t, campaignMessage(t, 1, 0, "Cheap watches", "a@spam.example", ""), store.KindSpam, "r1")
	c := f.client(t)
	for _, path := range []string{"/ui/", "/ui/watch", fmt.Sprintf("/ui/campaigns/%d", id), fmt.Sprintf("/ui/campaigns/%d/confirm?do=delete", id)} {
		resp, body := c.get(path)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" || strings.Contains(body, "Cheap watches") {
			t.Errorf("GET %s without login: %d → %q", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	// A forged cookie is no session either.
	u, _ := url.Parse(f.srv.URL + "/ui/")
	c.c.Jar.SetCookies(u, []*http.Cookie{{Name: CookieName, Value: "forged", Path: "/ui/"}})
	for _, do := range []string{"allow", "delete"} {
		resp, _ := c.post(fmt.Sprintf("/ui/campaigns/%d/%s", id, do), url.Values{"csrf": {"x"}})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s without login: %d, want 403", do, resp.StatusCode)
		}
	}
	if s, ok := f.state(t, id); !ok || s != store.StateActive {
		t.Errorf("campaign changed without login: state %v, exists %v", s, ok)
	}
}

func TestLogin(t *testing.T) {
	f := newFixture(t, Options{})
	c := f.client(t)
	if resp, _ := c.post("/ui/login", url.Values{"secret": {""}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("empty secret: %d", resp.StatusCode)
	}
	resp, body := c.post("/ui/login", url.Values{"secret": {"wrong-secret-0123456789"}})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Wrong password") || len(resp.Cookies()) != 0 {
		t.Errorf("wrong secret: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp, _ = c.post("/ui/login", url.Values{"name": {"alice"}, "secret": {adminSecret}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	var ck *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == CookieName {
			ck = k
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" || ck.Secure || len(ck.Value) < 40 {
		t.Fatalf("session cookie %+v", ck)
	}
	if resp, body := c.get("/ui/"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "alice") || !strings.Contains(body, "(admin)") {
		t.Errorf("now page: %d", resp.StatusCode)
	}
	if resp, _ := c.get("/ui/login"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("login page while logged in: %d, want a redirect", resp.StatusCode)
	}
	// Logging out ends the session on the server too.
	old := ck.Value
	if resp, _ := c.post("/ui/logout", url.Values{"csrf": {c.csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("logout: %d", resp.StatusCode)
	}
	if f.h.sessions.get(old, time.Now()) != nil {
		t.Error("the session outlived the logout")
	}
	if !strings.Contains(f.log.String(), "dashboard: login") || !strings.Contains(f.log.String(), "login failed") {
		t.Errorf("logins not logged:\n%s", f.log.String())
	}

	// Behind a TLS proxy the cookie is Secure.
	fs := newFixture(t, Options{SecureCookie: true})
	resp, _ = fs.client(t).post("/ui/login", url.Values{"secret": {readSecret}})
	if cs := resp.Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Errorf("SecureCookie: cookies %v", cs)
	}
}

func TestSessionExpires(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := newFixture(t, Options{Clock: clock, SessionTTL: time.Hour})
	c := f.client(t)
	c.login("", readSecret)
	mu.Lock()
	now = now.Add(61 * time.Minute)
	mu.Unlock()
	if resp, _ := c.get("/ui/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("expired session: %d, want the login page", resp.StatusCode)
	}
}

// Wrong secrets are throttled (429 with Retry-After past the burst); the
// correct one is still admitted.
func TestLoginRateLimited(t *testing.T) {
	f := newFixture(t, Options{LoginBurst: 3, LoginInterval: time.Hour})
	c := f.client(t)
	for i := range 3 {
		if resp, _ := c.post("/ui/login", url.Values{"secret": {"wrong-secret-0123456789"}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i, resp.StatusCode)
		}
	}
	resp, body := c.post("/ui/login", url.Values{"secret": {"wrong-secret-0123456789"}})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "Too many") || len(resp.Cookies()) != 0 {
		t.Errorf("fourth wrong attempt: %d, Retry-After %q, cookies %v", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Cookies())
	}
	if resp, _ := c.post("/ui/login", url.Values{"secret": {adminSecret}}); resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Errorf("correct secret after the wrong ones: %d, cookies %v, want a login", resp.StatusCode, resp.Cookies())
	}
}

// Red-team finding 7: behind ssh -L or a proxy every browser has one
// client address; one client's wrong passwords must not lock the
// administrator out. Another's flood of wrong secrets (under the same
// empty name, then under the administrator's name) leaves every one of
// the administrator's logins admitted.
func TestLoginNotLockedOutByOthers(t *testing.T) {
	f := newFixture(t, Options{})
	attacker := f.client(t)
	for i := range 60 {
		name := ""
		if i%2 == 1 {
			name = "alice"
		}
		resp, _ := attacker.post("/ui/login", url.Values{"name": {name}, "secret": {fmt.Sprintf("guess-%02d-0123456789abcdef", i)}})
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("wrong secret %d: %d", i, resp.StatusCode)
		}
	}
	for i := range 10 {
		admin := f.client(t)
		resp, _ := admin.post("/ui/login", url.Values{"name": {"alice"}, "secret": {adminSecret}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("administrator's login %d: %d, want admitted", i, resp.StatusCode)
		}
		// The attacker goes on between the administrator's logins.
		attacker.post("/ui/login", url.Values{"secret": {"wrong-secret-0123456789"}})
	}
}

// A correct secret has its own hard limit per credential and client
// address (the sessions it mints would push the others' out); another
// credential is not held by it.
func TestLoginHardLimit(t *testing.T) {
	f := newFixture(t, Options{LoginHardBurst: 4, LoginInterval: time.Hour})
	for i := range 4 {
		if resp, _ := f.client(t).post("/ui/login", url.Values{"secret": {readSecret}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("login %d: %d", i, resp.StatusCode)
		}
	}
	resp, body := f.client(t).post("/ui/login", url.Values{"secret": {readSecret}})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "Too many logins") {
		t.Errorf("fifth login: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, _ := f.client(t).post("/ui/login", url.Values{"secret": {adminSecret}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the admin password after the read password's limit: %d", resp.StatusCode)
	}
}

// The limiter counts wrong secrets per client address (IPv6 by /64) and
// per name, and keeps a bounded number of keys.
func TestLimiterKeys(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	req := func(addr string) *http.Request {
		r := httptest.NewRequest("POST", "/ui/login", nil)
		r.RemoteAddr = addr
		return r
	}
	l := newLimiter(time.Hour, 2, 3)
	for i := range 2 {
		if !l.failed(req("192.0.2.1:1000"), fmt.Sprint("n", i), now) {
			t.Fatalf("failure %d within the burst throttled", i)
		}
	}
	if l.failed(req("192.0.2.1:1001"), "other", now) {
		t.Error("third failure from one address not throttled")
	}
	// The name's budget: two other addresses under one name.
	l = newLimiter(time.Hour, 2, 3)
	l.failed(req("192.0.2.1:1000"), "Alice", now)
	l.failed(req("192.0.2.2:1000"), "alice", now)
	if l.failed(req("192.0.2.3:1000"), "ALICE", now) {
		t.Error("third failure under one name (any case) not throttled")
	}
	if !l.failed(req("192.0.2.4:1000"), "bob", now) {
		t.Error("another name from another address throttled")
	}
	// IPv6 counts by /64.
	l = newLimiter(time.Hour, 2, 3)
	l.failed(req("[2001:db8:1:2::1]:1000"), "a", now)
	l.failed(req("[2001:db8:1:2::ffff]:1000"), "b", now)
	if l.failed(req("[2001:db8:1:2:3::9]:1000"), "c", now) {
		t.Error("third failure from one /64 not throttled")
	}
	if !l.failed(req("[2001:db8:1:3::1]:1000"), "d", now) {
		t.Error("another /64 throttled")
	}
	// Bounded memory: many addresses, each table at most maxClients keys.
	l = newLimiter(time.Millisecond, 2, 3)
	for i := range 3 * maxClients {
		at := now.Add(time.Duration(i) * time.Millisecond / 4)
		addr := fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255)
		l.failed(req(addr), fmt.Sprint("n", i), at)
		l.admitted(req(addr), "api-token", at)
	}
	for name, b := range map[string]*buckets{"addresses": &l.addrs, "names": &l.names, "credentials": &l.creds} {
		if len(b.m) > maxClients {
			t.Errorf("%s: %d keys, more than %d", name, len(b.m), maxClients)
		}
	}
}

// The read role reads every page but changes nothing, even with its own
// valid CSRF token.
func TestReadRole(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.report(t, campaignMessage(t, 2, 0, "Cheap watches", "a@spam.example", ""), store.KindSpam, "r1")
	c := f.client(t)
	c.login("bob", readSecret)
	for _, path := range []string{"/ui/", "/ui/?sort=day", "/ui/watch", fmt.Sprintf("/ui/campaigns/%d", id)} {
		resp, body := c.get(path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
		if strings.Contains(body, "/confirm?do=") {
			t.Errorf("GET %s: the read role is offered changes", path)
		}
	}
	if resp, _ := c.get(fmt.Sprintf("/ui/campaigns/%d/confirm?do=allow", id)); resp.StatusCode != http.StatusForbidden {
		t.Errorf("confirm page for the read role: %d", resp.StatusCode)
	}
	for _, do := range []string{"allow", "delete"} {
		if resp, _ := c.post(fmt.Sprintf("/ui/campaigns/%d/%s", id, do), url.Values{"csrf": {c.csrf}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s by the read role: %d, want 403", do, resp.StatusCode)
		}
	}
	if s, ok := f.state(t, id); !ok || s != store.StateActive {
		t.Errorf("the read role changed the campaign: state %v, exists %v", s, ok)
	}
	if !strings.Contains(f.log.String(), "why=role") {
		t.Errorf("refusal not logged:\n%s", f.log.String())
	}
}

// Admin changes need the session's CSRF token and a same-origin request;
// with both they happen, and the log says who did what.
func TestAdminChangesAndCSRF(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.report(t, campaignMessage(t, 3, 0, "Cheap watches", "a@spam.example", ""), store.KindSpam, "r1")
	c := f.client(t)
	c.login("carol", adminSecret)
	path := fmt.Sprintf("/ui/campaigns/%d/allow", id)
	refused := []struct {
		name string
		form url.Values
		hdr  map[string]string
	}{
		{"no CSRF token", url.Values{}, nil},
		{"wrong CSRF token", url.Values{"csrf": {c.csrf + "x"}}, nil},
		{"another session's token", url.Values{"csrf": {newToken()}}, nil},
		{"cross-site (Sec-Fetch-Site)", url.Values{"csrf": {c.csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"cross-origin (Origin)", url.Values{"csrf": {c.csrf}}, map[string]string{"Origin": "http://evil.example"}},
		{"neither Origin nor Sec-Fetch-Site", url.Values{"csrf": {c.csrf}}, nil},
	}
	for _, tt := range refused {
		resp, _ := c.do(http.MethodPost, path, tt.form, tt.hdr)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tt.name, resp.StatusCode)
		}
	}
	if s, _ := f.state(t, id); s != store.StateActive {
		t.Fatalf("refused requests changed the campaign: %v", s)
	}

	// The confirmation page holds the form.
	resp, body := c.get(fmt.Sprintf("/ui/campaigns/%d/confirm?do=allow", id))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `action="`+path+`"`) || !strings.Contains(body, c.csrf) {
		t.Fatalf("confirm page: %d\n%s", resp.StatusCode, body)
	}
	steps := []struct {
		do    string
		state store.State
		exist bool
	}{{"allow", store.StateAllowed, true}, {"unallow", store.StateActive, true}, {"delete", 0, false}}
	for _, st := range steps {
		resp, _ := c.do(http.MethodPost, fmt.Sprintf("/ui/campaigns/%d/%s", id, st.do), url.Values{"csrf": {c.csrf}},
			map[string]string{"Origin": f.srv.URL, "Sec-Fetch-Site": "same-origin"})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: %d", st.do, resp.StatusCode)
		}
		if s, ok := f.state(t, id); ok != st.exist || ok && s != st.state {
			t.Errorf("after %s: state %v, exists %v", st.do, s, ok)
		}
		if _, body := c.get(resp.Header.Get("Location")); !strings.Contains(body, fmt.Sprintf(`id="notice">Campaign %d %s.`, id, changes[st.do].done)) {
			t.Errorf("after %s: no notice at %s", st.do, resp.Header.Get("Location"))
		}
		if !regexp.MustCompile(fmt.Sprintf(`dashboard: campaign changed" who=carol credential=admin-password role=admin remote=\S+ change=%s campaign=%d`, st.do, id)).MatchString(f.log.String()) {
			t.Errorf("%s not in the audit log:\n%s", st.do, f.log.String())
		}
	}
	if resp, _ := c.get(fmt.Sprintf("/ui/campaigns/%d", id)); resp.StatusCode != http.StatusNotFound {
		t.Errorf("deleted campaign's page: %d", resp.StatusCode)
	}
	if resp, _ := c.do(http.MethodPost, fmt.Sprintf("/ui/campaigns/%d/allow", id), url.Values{"csrf": {c.csrf}},
		map[string]string{"Sec-Fetch-Site": "same-origin"}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("allow of a deleted campaign: %d", resp.StatusCode)
	}
}

// A reload that drops a credential ends its sessions.
func TestUpdateEndsSessions(t *testing.T) {
	f := newFixture(t, Options{})
	admin, reader := f.client(t), f.client(t)
	admin.login("", adminSecret)
	reader.login("", readSecret)
	f.h.Update(f.eng.Reader, f.eng.Ingester, testCreds[:1])
	if resp, _ := admin.get("/ui/"); resp.StatusCode != http.StatusOK {
		t.Errorf("admin after update: %d", resp.StatusCode)
	}
	if resp, _ := reader.get("/ui/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("reader after its password was removed: %d", resp.StatusCode)
	}
}

func TestPagesShowCampaigns(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	spam := f.report(t, campaignMessage(t, 10, 0, "Luxury watches", "w@spam.example", ""), store.KindSpam, "r1")
	f.report(t, campaignMessage(t, 10, 1, "Luxury watches", "w@spam.example", ""), store.KindSpam, "r2")
	for i := range 3 {
		if _, err := f.eng.Checker.Check(ctx, campaignMessage(t, 10, 10+i, "Luxury watches", "w@spam.example", "")); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.st.FlushHits(ctx); err != nil {
		t.Fatal(err)
	}
	ham := f.report(t, campaignMessage(t, 11, 0, "Team newsletter", "news@example.org", "Hello team."), store.KindSpam, "r3")
	f.report(t, campaignMessage(t, 11, 1, "Team newsletter", "news@example.org", "Hello team."), store.KindHam, "r4")
	c := f.client(t)
	c.login("", adminSecret)

	_, now := c.get("/ui/")
	for _, want := range []string{fmt.Sprintf(`id="c%d"`, spam), "Luxury watches", `class="spark"`, `<polyline`, `id="hours"`, `<td class="num">3</td><td>tag 3</td>`} {
		if !strings.Contains(now, want) {
			t.Errorf("now page lacks %q", want)
		}
	}
	_, watch := c.get("/ui/watch")
	if !strings.Contains(watch, fmt.Sprintf(`id="c%d"`, ham)) || strings.Contains(watch, fmt.Sprintf(`id="c%d"`, spam)) {
		t.Errorf("watch page: want campaign %d only\n%s", ham, watch)
	}
	_, detail := c.get(fmt.Sprintf("/ui/campaigns/%d", spam))
	for _, want := range []string{`id="messages">3<`, `id="spam-reporters">2<`, "imatch", `class="chart"`, "w@spam.example", `id="allow"`, `id="delete"`, "spam</td>"} {
		if !strings.Contains(detail, want) {
			t.Errorf("campaign page lacks %q", want)
		}
	}
	if resp, _ := c.get("/ui/campaigns/999999"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown campaign: %d", resp.StatusCode)
	}
	if resp, _ := c.get("/ui/campaigns/x"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bad id: %d", resp.StatusCode)
	}
	if resp, _ := c.get(fmt.Sprintf("/ui/campaigns/%d/confirm?do=explode", spam)); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown change: %d", resp.StatusCode)
	}
}

// fleet is a FleetStatus of fixed nodes.
type fleetStub Fleet

func (f fleetStub) Fleet(context.Context) (Fleet, error) { return Fleet(f), nil }

func TestFleetShown(t *testing.T) {
	f := newFixture(t, Options{Fleet: fleetStub{Nodes: []Node{
		{Name: "mx1", Healthy: true, Applied: 41, Lag: 2, StateHash: "0123456789abcdef0123", StateSeq: 40, Version: "1.4.0", ClockOffset: 2 * time.Millisecond},
		{Name: "mx2<b>", Lag: 1234, Outbox: 7, Error: "nats: no servers", ClockOffset: -90 * time.Second,
			Warnings: []string{"settings differ between nodes: signatures.lexicon: aa (mx1), <b>bb</b> (mx2)"}},
		{Name: "mx3", Silent: true}},
		States: "2 nodes, state hashes after 2 different events: not comparable yet"}})
	c := f.client(t)
	c.login("", readSecret)
	_, body := c.get("/ui/")
	for _, want := range []string{`id="fleet"`, "mx1", ">41<", ">1234<", ">7<", "nats: no servers", "mx2&lt;b&gt;", `data-node="mx2&lt;b&gt;"`, "unhealthy", "mx3", "silent", "<bdi>1.4.0</bdi>", "<bdi>-</bdi>",
		"<code>0123456789ab@40</code>", "<code>-</code>",
		`unhealthy</strong>, <strong class="bad">clock 1m30s behind the others&#39;</strong>`,
		`<p class="error fleet-warning">settings differ between nodes: signatures.lexicon: aa (mx1), &lt;b&gt;bb&lt;/b&gt; (mx2)</p>`,
		`<p id="states">2 nodes, state hashes after 2 different events: not comparable yet</p>`} {
		if !strings.Contains(body, want) {
			t.Errorf("fleet table lacks %q", want)
		}
	}
	if n := strings.Count(body, "clock "); n != 1 {
		t.Errorf("%d clock notes, want 1 (mx1's 2ms is none)", n)
	}
	if strings.Contains(body, `id="copies"`) {
		t.Error("the stream's copies shown though no node knows them")
	}

	// The stream's copies; a divergence, shown as an error.
	f = newFixture(t, Options{Fleet: fleetStub{Nodes: []Node{{Name: "mx1", Healthy: true}},
		Copies:   []Copy{{Server: "mx1", Leader: true}, {Server: "mx2", Behind: true}, {Server: "mx3<i>", Offline: true}},
		States:   "DIVERGED: nodes that applied the same events hold different campaign states, after event 9: mx3 differs from mx1, mx2.",
		Diverged: true}})
	c = f.client(t)
	c.login("", readSecret)
	_, body = c.get("/ui/")
	for _, want := range []string{
		`<p id="copies">Copies of the stream: <bdi>mx1</bdi> (leader), <bdi>mx2</bdi> <strong class="bad">behind</strong>, <bdi>mx3&lt;i&gt;</bdi> <strong class="bad">offline</strong>.</p>`,
		`<p id="states" class="error">DIVERGED: nodes that applied the same events hold different campaign states, after event 9: mx3 differs from mx1, mx2.</p>`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

// Hostile samples are shown as text: no element, attribute or link of
// theirs reaches the page, invalid UTF-8 and direction overrides are
// neutralized, and a huge subject is cut.
func TestHostileSamples(t *testing.T) {
	f := newFixture(t, Options{})
	huge := strings.Repeat("W", 200_000)
	samples := []struct {
		name, subject, from, text string
	}{
		{"script tag", `<script>window.pwned=1</script> offer`, `"<script>alert(1)</script>" <x@spam.example>`, `<script>window.pwned=1</script>`},
		{"javascript URL", `<a href="javascript:alert(1)">click</a>`, `javascript:alert(1)@spam.example`, `<a href="javascript:window.pwned=1">win</a> <img src=x onerror="window.pwned=1">`},
		{"huge subject", huge, "h@spam.example", huge},
		{"invalid UTF-8", "bad \xff\xfe bytes \xc3", "u@spam.example", "text \xff\xfe\xfd"},
		{"right-to-left override", "invoice \u202egpj.exe", "r@spam.example", "pay \u202eyenom\u202c now \u2067isolate"},
		{"closing tags", `</td></tr></table></main><h1>owned</h1><!--`, "c@spam.example", `</pre></dd></dl><style>*{display:none}</style>`},
	}
	c := f.client(t)
	c.login("", adminSecret)
	ctx := context.Background()
	var ids []store.CampaignID
	for i, s := range samples {
		// Through the engine (the parser cleans some of it), and straight
		// into the store (the page must hold on its own).
		id := f.report(t, campaignMessage(t, uint64(100+i), 0, s.subject, s.from, s.text), store.KindSpam, "r1")
		f.report(t, campaignMessage(t, uint64(100+i), 1, s.subject, s.from, s.text), store.KindHam, "r2") // on the watch page too
		key := []byte(fmt.Sprintf("hostile-%d", i))
		res, err := f.st.Report(ctx, store.ReportInput{Time: time.Now(), Kind: store.KindSpam, Reporter: "r1", Keys: [][]byte{key},
			Create: true, Index: true, Subject: s.subject, From: s.from, Text: s.text})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.Report(ctx, store.ReportInput{Time: time.Now(), Kind: store.KindHam, Reporter: "r2", Keys: [][]byte{key}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id, res.Campaign)
	}
	pages := []string{"/ui/", "/ui/?sort=day", "/ui/watch"}
	for _, id := range ids {
		pages = append(pages, fmt.Sprintf("/ui/campaigns/%d", id), fmt.Sprintf("/ui/campaigns/%d/confirm?do=delete", id))
	}
	for _, p := range pages {
		resp, body := c.get(p)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", p, resp.StatusCode)
			continue
		}
		checkSafe(t, p, body)
	}
	// html/template writes + as &#43;.
	if _, body := c.get(fmt.Sprintf("/ui/campaigns/%d", ids[9])); !strings.Contains(body, "invoice [U&#43;202E]gpj.exe") {
		t.Error("the right-to-left override is not shown as [U+202E]")
	}
	for _, id := range ids[:2] {
		if _, body := c.get(fmt.Sprintf("/ui/campaigns/%d", id)); !strings.Contains(body, "&lt;script&gt;window.pwned=1&lt;/script&gt;") {
			t.Errorf("campaign %d: the script sample is not shown as text", id)
		}
	}
	if _, body := c.get(fmt.Sprintf("/ui/campaigns/%d", ids[5])); !strings.Contains(body, `id="sample-subject"><bdi>`+strings.Repeat("W", detailSubjectRunes)+"…</bdi>") ||
		!strings.Contains(body, `id="sample-text"><bdi>`+strings.Repeat("W", store.MaxSampleText)+"</bdi>") {
		t.Error("the huge subject is not cut")
	}
}

// checkSafe parses a page and fails on anything a sample could have
// injected: a script, an event handler or style attribute, a link or
// resource outside the dashboard, a <style> element, an <h1> beyond the
// page's own, invalid UTF-8, or a page grown beyond bounds.
func checkSafe(t *testing.T, page, body string) {
	t.Helper()
	if !utf8.ValidString(body) {
		t.Errorf("%s: invalid UTF-8 in the page", page)
	}
	if len(body) > 256<<10 {
		t.Errorf("%s: page of %d bytes", page, len(body))
	}
	for _, bad := range []string{"\u202e", "\u2067", "\xff"} {
		if strings.Contains(body, bad) {
			t.Errorf("%s: raw %q in the page", page, bad)
		}
	}
	z := html.NewTokenizer(strings.NewReader(body))
	h1 := 0
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err() != io.EOF {
				t.Errorf("%s: %v", page, z.Err())
			}
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		switch tok.Data {
		case "script", "style", "iframe", "object", "embed", "img", "base":
			t.Errorf("%s: <%s> element", page, tok.Data)
		case "h1":
			h1++
		}
		for _, a := range tok.Attr {
			switch {
			case strings.HasPrefix(a.Key, "on"), a.Key == "style", a.Key == "srcdoc":
				t.Errorf("%s: attribute %s=%q on <%s>", page, a.Key, a.Val, tok.Data)
			case a.Key == "href" || a.Key == "src" || a.Key == "action":
				if !strings.HasPrefix(a.Val, "/ui/") {
					t.Errorf("%s: %s=%q on <%s> leaves the dashboard", page, a.Key, a.Val, tok.Data)
				}
			}
		}
	}
	if h1 != 1 {
		t.Errorf("%s: %d <h1> elements", page, h1)
	}
}

func TestClean(t *testing.T) {
	tests := []struct {
		name, in string
		max      int
		oneLine  bool
		want     string
	}{
		{"plain", "hello", 10, true, "hello"},
		{"cut", "abcdef", 3, true, "abc…"},
		{"invalid UTF-8", "a\xffb", 10, true, "a\uFFFDb"},
		{"bidi override", "a\u202eb", 10, true, "a[U+202E]b"},
		{"isolate", "\u2066x\u2069", 10, true, "[U+2066]x[U+2069]"},
		{"control", "a\x07b\x00", 10, true, "a[U+0007]b[U+0000]"},
		{"new lines in one line", "a\r\nb\tc", 10, true, "a b c"},
		{"new lines kept", "a\r\nb", 10, false, "a\nb"},
		{"zero width joiner kept", "👩\u200d💻", 10, true, "👩\u200d💻"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := clean(tt.in, tt.max, tt.oneLine); got != tt.want {
				t.Errorf("clean(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestCharts(t *testing.T) {
	tests := []struct {
		name string
		svg  string
		want []string
	}{
		{"sparkline", string(sparkline([]int64{0, 2, 4}, `a<b`)), []string{`aria-label="a&lt;b"`, `points="1.0,23.0 60.0,12.0 119.0,1.0"`}},
		{"all zero", string(sparkline([]int64{0, 0}, "z")), []string{`points="1.0,23.0 119.0,23.0"`}},
		{"one point", string(sparkline([]int64{5}, "o")), []string{`points="1.0,1.0 119.0,1.0"`}},
		{"empty", string(sparkline(nil, "e")), []string{`</svg>`}},
		{"chart", string(chart([]series{{"a<", []int64{1, 3}}, {"b", []int64{0, 0}}}, "from<", "to", "l")), []string{`class="s0"`, `class="s1"`, "<title>a&lt;</title>", "from&lt;", ">3</text>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, w := range tt.want {
				if !strings.Contains(tt.svg, w) {
					t.Errorf("%s lacks %q", tt.svg, w)
				}
			}
			if strings.Contains(tt.svg, "NaN") || strings.Contains(tt.svg, "Inf") {
				t.Errorf("%s", tt.svg)
			}
		})
	}
}

// A campaign whose copies came from a domain that also sends accepted
// mail is on the watch page, with the reason.
func TestWatchShowsHamSenders(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	id := f.report(t, campaignMessage(t, 20, 0, "Spring sale", "deals@mail.shop.example", ""), store.KindSpam, "r1")
	for i := range 3 {
		if v, err := f.eng.Checker.Check(ctx, campaignMessage(t, 20, 10+i, "Spring sale", "deals@mail.shop.example", "")); err != nil || v.Campaign != id {
			t.Fatalf("copy %d: %+v %v", i, v, err)
		}
	}
	for i := range 25 {
		raw := fmt.Appendf(nil, "From: orders@shop.example\r\nSubject: Order %d\r\n\r\nYour order %d has shipped.\r\n", i, i)
		if v, err := f.eng.Checker.Check(ctx, raw); err != nil || v.Campaign != 0 {
			t.Fatalf("ham %d: %+v %v", i, v, err)
		}
	}
	if err := f.st.FlushHits(ctx); err != nil {
		t.Fatal(err)
	}
	c := f.client(t)
	c.login("", adminSecret)
	_, watch := c.get("/ui/watch")
	for _, want := range []string{fmt.Sprintf(`id="c%d"`, id), "3 copies from shop.example, which sent 25 accepted messages"} {
		if !strings.Contains(watch, want) {
			t.Errorf("watch page lacks %q\n%s", want, watch)
		}
	}
}
