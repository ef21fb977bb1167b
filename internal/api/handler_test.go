package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

const testToken = "s3cret-token"

var spamBody = `Congratulations! Your email address was randomly chosen among our loyal customers to receive a genuine Swiss luxury chronograph, absolutely free of charge, as part of our anniversary celebration.

To claim your reward you only need to confirm your shipping details and cover a small handling fee. Quantities are strictly limited and unclaimed prizes will be offered to the next winner on our waiting list.

Every timepiece comes with a certificate of authenticity, a premium leather strap, sapphire crystal glass and water resistance up to one hundred meters. Retail value exceeds three thousand dollars.`

func spamMessage() []byte {
	return spamgen.NewMessage("Your account has been selected for a luxury watch giveaway", spamBody, false)
}

func spamCopy(t *testing.T, seed uint64) []byte {
	t.Helper()
	b, err := spamgen.Mutate(spamMessage(), spamgen.Options{Kinds: []spamgen.Kind{spamgen.Reencode}, Seed: seed, Strength: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newServer(t *testing.T, opts Options) (*httptest.Server, *campaign.Engine, *store.Badger) {
	t.Helper()
	eng, st := newEngine(t)
	srv := httptest.NewServer(NewHandler(eng, opts))
	t.Cleanup(srv.Close)
	return srv, eng, st
}

// newEngine is the real engine with the shipped lexicon and model over a
// fresh Badger store.
func newEngine(tb testing.TB) (*campaign.Engine, *store.Badger) {
	tb.Helper()
	return newEngineWith(tb, campaign.Options{})
}

// newEngineWith is newEngine with engine options.
func newEngineWith(tb testing.TB, opts campaign.Options) (*campaign.Engine, *store.Badger) {
	tb.Helper()
	st, err := store.Open(tb.TempDir(), store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		tb.Fatal(err)
	}
	mod, err := andd.DefaultModel()
	if err != nil {
		tb.Fatal(err)
	}
	eng, err := campaign.New(st, lex, mod, opts, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return eng, st
}

func do(t *testing.T, method, url, token string, body []byte) (int, map[string]any, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: content type %q", method, url, ct)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, b
}

func TestAuth(t *testing.T) {
	srv, _, _ := newServer(t, Options{Token: testToken})
	tests := []struct {
		name, token string
		status      int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "nope", http.StatusUnauthorized},
		{"prefix of token", testToken[:4], http.StatusUnauthorized},
		{"right token", testToken, http.StatusOK},
	}
	for _, tt := range tests {
		status, m, _ := do(t, "GET", srv.URL+"/v1/campaigns", tt.token, nil)
		if status != tt.status {
			t.Errorf("%s: status %d, want %d", tt.name, status, tt.status)
		}
		if status != http.StatusOK && (m == nil || m["error"] == "") {
			t.Errorf("%s: no JSON error: %v", tt.name, m)
		}
	}
}

func TestNoTokenRefuses(t *testing.T) {
	srv, _, _ := newServer(t, Options{})
	status, m, _ := do(t, "GET", srv.URL+"/v1/campaigns", "anything", nil)
	if status != http.StatusServiceUnavailable || !strings.Contains(m["error"].(string), "no token configured") {
		t.Errorf("status %d, %v", status, m)
	}
}

func TestReportCheckCampaigns(t *testing.T) {
	srv, _, _ := newServer(t, Options{Token: testToken})
	c := &Client{BaseURL: srv.URL, Token: testToken}
	ctx := context.Background()

	// A report per reporter; the first creates the campaign.
	var id store.CampaignID
	for i, r := range []string{"a", "b", "c", "d", "e"} {
		o, err := c.Report(ctx, spamCopy(t, uint64(i)), store.KindSpam, r)
		if err != nil {
			t.Fatalf("report %s: %v", r, err)
		}
		if i == 0 {
			if !o.Created || o.Campaign == 0 || o.Kind != "spam" {
				t.Fatalf("first report: %+v", o)
			}
			id = o.Campaign
		} else if o.Created || o.Campaign != id {
			t.Fatalf("report %s: %+v", r, o)
		}
	}
	// Raw JSON of a check: action as a name, evidence listed.
	status, m, raw := do(t, "POST", srv.URL+"/v1/check?dry_run=1", testToken, spamMessage())
	if status != http.StatusOK || m["action"] != "reject" || m["campaign"] != float64(id) {
		t.Fatalf("check: %d %s", status, raw)
	}
	if ev, _ := m["evidence"].([]any); len(ev) == 0 || !strings.HasPrefix(m["rule"].(string), "reject: p=") {
		t.Errorf("check answer: %s", raw)
	}
	v, err := c.Check(ctx, spamCopy(t, 77), true)
	if err != nil || v.Action != action.Reject || v.Campaign != id {
		t.Fatalf("client check: %+v %v", v, err)
	}

	list, err := c.List(ctx, ListQuery{Since: 24 * time.Hour, Sort: "volume", Limit: 10})
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].SpamReporters != 5 || list[0].State != "active" {
		t.Fatalf("list: %+v %v", list, err)
	}
	d, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != id || len(d.SignatureKeys) == 0 || len(d.Timeline) == 0 || d.Timeline[0].SpamReports != 5 ||
		d.Decision != action.Reject || !strings.Contains(d.SampleSubject, "watch") || !strings.HasPrefix(d.SampleText, "Congratulations!") {
		t.Errorf("detail: %+v", d)
	}
	s, err := c.Allow(ctx, id, false)
	if err != nil || s.State != "allowed" {
		t.Fatalf("allow: %+v %v", s, err)
	}
	if v, _ := c.Check(ctx, spamMessage(), false); v.Action != action.Accept || !strings.Contains(v.Rule, "allowed") {
		t.Errorf("check after allow: %+v", v)
	}
	if s, err := c.Allow(ctx, id, true); err != nil || s.State != "active" {
		t.Fatalf("allow --undo: %+v %v", s, err)
	}
	// Not-spam reports through the API.
	o, err := c.Report(ctx, spamMessage(), store.KindHam, "h1")
	if err != nil || o.Kind != "ham" || o.Campaign != id || o.Created {
		t.Fatalf("ham report: %+v %v", o, err)
	}
	if err := c.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, id); !IsNotFound(err) {
		t.Errorf("get after delete: %v", err)
	}
	if err := c.Delete(ctx, id); !IsNotFound(err) {
		t.Errorf("second delete: %v", err)
	}
}

func TestARFAndSkipped(t *testing.T) {
	srv, _, _ := newServer(t, Options{Token: testToken})
	arf := "From: fbl@isp.example\r\nSubject: report\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/report; report-type=feedback-report; boundary=\"XX\"\r\n\r\n" +
		"--XX\r\nContent-Type: text/plain\r\n\r\nabuse report\r\n" +
		"--XX\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\nVersion: 1\r\n\r\n" +
		"--XX\r\nContent-Type: message/rfc822\r\n\r\n" + string(spamMessage()) + "\r\n--XX--\r\n"
	status, m, raw := do(t, "POST", srv.URL+"/v1/reports?kind=spam&reporter=isp", testToken, []byte(arf))
	if status != http.StatusOK || m["arf"] != true || m["created"] != true {
		t.Fatalf("ARF: %d %s", status, raw)
	}
	status, m, raw = do(t, "POST", srv.URL+"/v1/reports?reporter=isp", testToken, []byte("Subject: hi\r\n\r\nok\r\n"))
	if status != http.StatusOK || !strings.HasPrefix(m["skipped"].(string), "too short for a signature") {
		t.Fatalf("short: %d %s", status, raw)
	}
	// A report names its reporter: none, or white space, is refused.
	for _, q := range []string{"", "?kind=spam", "?reporter=%20"} {
		if status, _, raw := do(t, "POST", srv.URL+"/v1/reports"+q, testToken, spamMessage()); status != http.StatusBadRequest || !strings.Contains(string(raw), "reporter: missing") {
			t.Errorf("report without a reporter (%q): %d %s, want 400", q, status, raw)
		}
	}
}

func TestErrors(t *testing.T) {
	srv, _, _ := newServer(t, Options{Token: testToken, MaxBody: 1024})
	tests := []struct {
		method, path string
		body         []byte
		status       int
		errHas       string
	}{
		{"POST", "/v1/reports?kind=maybe", spamMessage(), 400, "unknown report kind"},
		{"POST", "/v1/reports", nil, 400, "empty body"},
		{"POST", "/v1/check", bytes.Repeat([]byte("x"), 2048), 413, "larger than 1024"},
		{"GET", "/v1/campaigns?since=yesterday", nil, 400, "invalid duration"},
		{"GET", "/v1/campaigns?sort=size", nil, 400, "unknown sort"},
		{"GET", "/v1/campaigns?limit=-1", nil, 400, "invalid limit"},
		{"GET", "/v1/campaigns/abc", nil, 400, "invalid campaign id"},
		{"GET", "/v1/campaigns/999", nil, 404, "not found"},
		{"POST", "/v1/campaigns/999/allow", nil, 404, "not found"},
		{"DELETE", "/v1/campaigns/999", nil, 404, "not found"},
		{"GET", "/v1/nothing", nil, 404, "no such API route"},
	}
	for _, tt := range tests {
		status, m, raw := do(t, tt.method, srv.URL+tt.path, testToken, tt.body)
		if status != tt.status {
			t.Errorf("%s %s: status %d, want %d (%s)", tt.method, tt.path, status, tt.status, raw)
			continue
		}
		if e, _ := m["error"].(string); !strings.Contains(e, tt.errHas) {
			t.Errorf("%s %s: error %q lacks %q", tt.method, tt.path, e, tt.errHas)
		}
	}
}

func TestParseSince(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, true},
		{"24h", 24 * time.Hour, true},
		{"7d", 7 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"-1h", 0, false},
		{"d", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSince(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSince(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// TestCheckDryRunByDefault: POST /v1/check counts nothing unless
// record=1, as nddmilter check; dry_run=1 wins over record=1.
func TestCheckDryRunByDefault(t *testing.T) {
	srv, _, _ := newServer(t, Options{Token: testToken})
	c := &Client{BaseURL: srv.URL, Token: testToken}
	ctx := context.Background()
	o, err := c.Report(ctx, spamMessage(), store.KindSpam, "a")
	if err != nil {
		t.Fatal(err)
	}
	messages := func() int64 {
		t.Helper()
		d, err := c.Get(ctx, o.Campaign)
		if err != nil {
			t.Fatal(err)
		}
		return d.Messages
	}
	before := messages()
	for _, q := range []string{"", "?dry_run=1", "?record=1&dry_run=1", "?record=0"} {
		if status, _, raw := do(t, "POST", srv.URL+"/v1/check"+q, testToken, spamMessage()); status != http.StatusOK {
			t.Fatalf("check%s: %d %s", q, status, raw)
		}
		if got := messages(); got != before {
			t.Errorf("check%s counted a message: %d → %d", q, before, got)
		}
	}
	if status, _, raw := do(t, "POST", srv.URL+"/v1/check?record=1", testToken, spamMessage()); status != http.StatusOK {
		t.Fatalf("check?record=1: %d %s", status, raw)
	}
	if got := messages(); got != before+1 {
		t.Errorf("check?record=1: messages %d → %d, want +1", before, got)
	}
}

// TestStoreRoutes: backup, stats and verify of the store behind the
// token; a backup restores; without a Maintainer the routes answer 404.
func TestStoreRoutes(t *testing.T) {
	eng, st := newEngine(t)
	srv := httptest.NewServer(NewHandler(eng, Options{Token: testToken, Store: st}))
	t.Cleanup(srv.Close)
	c := &Client{BaseURL: srv.URL, Token: testToken}
	ctx := context.Background()
	if _, err := c.Report(ctx, spamMessage(), store.KindSpam, "a"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := c.Backup(ctx, &buf); err != nil || buf.Len() == 0 {
		t.Fatalf("backup: %d bytes, %v", buf.Len(), err)
	}
	s, err := c.StoreStats(ctx)
	if err != nil || s.Campaigns != 1 || s.Keys == 0 {
		t.Fatalf("stats: %+v %v", s, err)
	}
	v, err := c.Verify(ctx)
	if err != nil || v.Campaigns != 1 || v.Problems() != 0 {
		t.Fatalf("verify: %+v %v", v, err)
	}
	res, err := store.Restore(ctx, filepath.Join(t.TempDir(), "r"), &buf, store.Options{})
	if err != nil || res.Campaigns != 1 || res.Problems() != 0 {
		t.Fatalf("restore: %+v %v", res, err)
	}
	if status, _, _ := do(t, "GET", srv.URL+"/v1/store/backup", "wrong", nil); status != http.StatusUnauthorized {
		t.Errorf("backup with a wrong token: %d", status)
	}
	srv2, _, _ := newServer(t, Options{Token: testToken})
	if _, err := (&Client{BaseURL: srv2.URL, Token: testToken}).StoreStats(ctx); !IsNotFound(err) {
		t.Errorf("stats without a Maintainer: %v", err)
	}
}

// The now view, a campaign's hourly series, the false-positive watch and
// paging through the API.
func TestNowSeriesAndPaging(t *testing.T) {
	srv, _, st := newServer(t, Options{Token: testToken})
	c := &Client{BaseURL: srv.URL, Token: testToken}
	ctx := context.Background()
	o, err := c.Report(ctx, spamCopy(t, 1), store.KindSpam, "a")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if v, err := c.Check(ctx, spamCopy(t, uint64(50+i)), true); err != nil || v.Campaign != o.Campaign {
			t.Fatalf("check: %+v %v", v, err)
		}
	}
	if _, err := c.Report(ctx, spamCopy(t, 2), store.KindHam, "h"); err != nil {
		t.Fatal(err)
	}
	st.RecordGraymail(o.Campaign) // a copy its graymail signs held back
	if err := st.FlushHits(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := c.Now(ctx, campaign.NowQuery{Hours: 6})
	if err != nil || len(n.Campaigns) != 1 || n.Campaigns[0].ID != o.Campaign || n.Campaigns[0].HourMessages != 2 ||
		len(n.Campaigns[0].Series) != 6 || len(n.Totals) != 6 || n.Totals[5].Matched != 2 || n.Stats.Campaigns != 1 {
		t.Fatalf("now: %+v %v", n, err)
	}
	var hs []Hour
	status, _, raw := do(t, "GET", srv.URL+"/v1/campaigns/"+strconv.FormatUint(uint64(o.Campaign), 10)+"/series", testToken, nil)
	if err := json.Unmarshal(raw, &hs); status != http.StatusOK || err != nil || len(hs) != 1 || hs[0].Messages != 2 || hs[0].HamReports != 1 {
		t.Errorf("series: %d %s", status, raw)
	}
	if w, err := c.List(ctx, ListQuery{Sort: "ham"}); err != nil || len(w) != 1 {
		t.Errorf("false-positive watch: %+v %v", w, err)
	}
	var ws []Watched
	status, _, raw = do(t, "GET", srv.URL+"/v1/watch?limit=5", testToken, nil)
	if err := json.Unmarshal(raw, &ws); status != http.StatusOK || err != nil || len(ws) != 1 || ws[0].ID != o.Campaign ||
		len(ws[0].Reasons) != 3 || !strings.Contains(ws[0].Reasons[0], "not-spam report") ||
		ws[0].GraymailCopies != 1 || !ws[0].Graymail || !strings.Contains(ws[0].Reasons[1], "1 copy held back as graymail") {
		t.Errorf("watch: %d %s", status, raw)
	}
	if status, _, raw := do(t, "GET", srv.URL+"/v1/watch?offset=-1", testToken, nil); status != http.StatusBadRequest {
		t.Errorf("watch offset=-1: %d %s", status, raw)
	}
	if p, err := c.List(ctx, ListQuery{Offset: 1}); err != nil || len(p) != 0 {
		t.Errorf("second page: %+v %v", p, err)
	}
	for _, q := range []string{"offset=-1", "limit=x", "sort=size"} {
		if status, _, raw := do(t, "GET", srv.URL+"/v1/campaigns?"+q, testToken, nil); status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", q, status, raw)
		}
	}
	if status, _, raw := do(t, "GET", srv.URL+"/v1/now?sort=size", testToken, nil); status != http.StatusBadRequest {
		t.Errorf("now sort=size: %d %s", status, raw)
	}
}

// Reporter identities through the API: only the token's holder may report
// and name the reporter; a missing or wrong token records nothing, and a
// reporter id out of bounds is refused (docs/SECURITY.md).
func TestReporterIdentity(t *testing.T) {
	srv, eng, _ := newServer(t, Options{Token: testToken})
	tests := []struct {
		name, token, reporter string
		status                int
	}{
		{"no token", "", "alice", http.StatusUnauthorized},
		{"wrong token", "nope", "mallory", http.StatusUnauthorized},
		{"control character", testToken, "alice%0Abob", http.StatusBadRequest},
		{"too long", testToken, strings.Repeat("a", campaign.MaxReporterLen+1), http.StatusBadRequest},
		{"token names alice", testToken, "alice", http.StatusOK},
		{"token names a feedback loop", testToken, "fbl:isp", http.StatusOK},
		{"alice again", testToken, "alice", http.StatusOK},
	}
	for _, tt := range tests {
		status, _, raw := do(t, "POST", srv.URL+"/v1/reports?kind=spam&reporter="+tt.reporter, tt.token, spamMessage())
		if status != tt.status {
			t.Errorf("%s: status %d, want %d: %s", tt.name, status, tt.status, raw)
		}
	}
	list, err := eng.Reader.List(context.Background(), store.Query{})
	if err != nil || len(list) != 1 {
		t.Fatalf("campaigns %v, %v", list, err)
	}
	// alice's second report of the same message counts once (store
	// msgreport.go).
	if c := list[0]; c.SpamReporters != 2 || c.SpamReports != 2 {
		t.Errorf("%d spam reporters, %d reports; want 2 (alice, fbl:isp) and 2", c.SpamReporters, c.SpamReports)
	}
}

// Red-team finding 8 through the API: the spellings of one account are
// one reporter (campaign.NormalizeReporter with the engine's realm).
func TestReporterSpellingsAPI(t *testing.T) {
	eng, st := newEngineWith(t, campaign.Options{ReporterRealm: "example.org"})
	srv := httptest.NewServer(NewHandler(eng, Options{Token: testToken}))
	t.Cleanup(srv.Close)
	var id float64
	for i, who := range []string{"mallory", "Mallory", "MALLORY", "mallory%40example.org", "%20Mallory%40Example.ORG%20"} {
		status, out, raw := do(t, "POST", srv.URL+"/v1/reports?kind=spam&reporter="+who, testToken, spamCopy(t, uint64(i+1)))
		if status != http.StatusOK {
			t.Fatalf("report as %s: %d %s", who, status, raw)
		}
		id = out["campaign"].(float64)
	}
	reps, err := st.Reporters(context.Background(), store.CampaignID(id), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].Hash != store.ReporterHash("mallory") {
		t.Errorf("reporters %+v, want mallory once", reps)
	}
}
