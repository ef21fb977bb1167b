package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

const (
	reportToken = "report-token-0123456789abcdef"
	claimToken  = "claim-token-0123456789abcdef"
	readToken   = "read-token-0123456789abcdef"
)

// Red-team finding 9: a token's scope bounds what its holder does. A
// report token reports (as its one reporter, or as the reporter each
// request names) and nothing else; a read token reads and changes
// nothing; the api-token does everything.
func TestTokenScopes(t *testing.T) {
	eng, st := newEngineWith(t, campaign.Options{ReporterRealm: "example.org"})
	srv := httptest.NewServer(NewHandler(eng, Options{Token: testToken, Tokens: []Token{
		{Name: "webmail", Secret: reportToken, Scope: ScopeReport, Reporter: "Alice@example.org"},
		{Name: "gateway", Secret: claimToken, Scope: ScopeReport, Reporter: AnyReporter},
		{Name: "monitor", Secret: readToken, Scope: ScopeRead},
	}}))
	t.Cleanup(srv.Close)
	status, out, raw := do(t, "POST", srv.URL+"/v1/reports?kind=spam&reporter=seed", testToken, spamCopy(t, 1))
	if status != http.StatusOK {
		t.Fatalf("admin report: %d %s", status, raw)
	}
	id := int(out["campaign"].(float64))
	c := func(f string, a ...any) string { return srv.URL + fmt.Sprintf(f, a...) }
	tests := []struct {
		name, method, url, token string
		body                     []byte
		status                   int
	}{
		{"report token reports as its reporter", "POST", c("/v1/reports?kind=spam"), reportToken, spamCopy(t, 2), http.StatusOK},
		{"report token names its own reporter", "POST", c("/v1/reports?kind=spam&reporter=alice"), reportToken, spamCopy(t, 3), http.StatusOK},
		{"report token names another reporter", "POST", c("/v1/reports?kind=spam&reporter=mallory"), reportToken, spamCopy(t, 4), http.StatusForbidden},
		{"report token lists", "GET", c("/v1/campaigns"), reportToken, nil, http.StatusForbidden},
		{"report token checks", "POST", c("/v1/check"), reportToken, spamCopy(t, 5), http.StatusForbidden},
		{"report token allows", "POST", c("/v1/campaigns/%d/allow", id), reportToken, nil, http.StatusForbidden},
		{"report token deletes", "DELETE", c("/v1/campaigns/%d", id), reportToken, nil, http.StatusForbidden},
		{"report token backs up", "GET", c("/v1/store/backup"), reportToken, nil, http.StatusForbidden},
		{"claim token names a reporter", "POST", c("/v1/reports?kind=spam&reporter=bob"), claimToken, spamCopy(t, 6), http.StatusOK},
		{"claim token reads", "GET", c("/v1/campaigns/%d", id), claimToken, nil, http.StatusForbidden},
		{"read token lists", "GET", c("/v1/campaigns"), readToken, nil, http.StatusOK},
		{"read token shows", "GET", c("/v1/campaigns/%d", id), readToken, nil, http.StatusOK},
		{"read token checks (dry run)", "POST", c("/v1/check"), readToken, spamCopy(t, 7), http.StatusOK},
		{"read token records a check", "POST", c("/v1/check?record=1"), readToken, spamCopy(t, 7), http.StatusForbidden},
		{"read token reports", "POST", c("/v1/reports?kind=spam&reporter=carol"), readToken, spamCopy(t, 8), http.StatusForbidden},
		{"read token allows", "POST", c("/v1/campaigns/%d/allow", id), readToken, nil, http.StatusForbidden},
		{"read token deletes", "DELETE", c("/v1/campaigns/%d", id), readToken, nil, http.StatusForbidden},
		{"read token backs up", "GET", c("/v1/store/backup"), readToken, nil, http.StatusForbidden},
		{"unknown token", "GET", c("/v1/campaigns"), "nope-0123456789abcdef", nil, http.StatusUnauthorized},
		{"admin allows", "POST", c("/v1/campaigns/%d/allow", id), testToken, nil, http.StatusOK},
	}
	for _, tt := range tests {
		if status, _, raw := do(t, tt.method, tt.url, tt.token, tt.body); status != tt.status {
			t.Errorf("%s: %d, want %d: %s", tt.name, status, tt.status, raw)
		}
	}
	// Nothing the refused requests asked for happened: the campaign is
	// still there (allowed by the admin at the end), and its reporters
	// are seed, alice (twice, once) and bob; never mallory nor carol.
	reps, err := st.Reporters(context.Background(), store.CampaignID(id), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]bool{}
	for _, r := range reps {
		got[r.Hash] = true
	}
	for who, want := range map[string]bool{"seed": true, "alice": true, "bob": true, "mallory": false, "carol": false} {
		if got[store.ReporterHash(who)] != want {
			t.Errorf("reporter %s on the campaign: %v, want %v", who, got[store.ReporterHash(who)], want)
		}
	}
}

// Red-team finding 9: 2,000 reports in 4 s from one name made 1,966
// campaigns. With a reporter limit, the API answers a report token 429
// with Retry-After past the burst, for every spelling of the name, and
// stores nothing more; the report socket likewise. The administrator's
// token is not limited.
func TestReporterRateLimitAPI(t *testing.T) {
	eng, _ := newEngineWith(t, campaign.Options{ReporterRealm: "example.org"})
	eng.Ingester.SetReporterLimiter(campaign.NewReporterLimiter(campaign.ReporterLimit{PerHour: 60, Burst: 3}, nil))
	srv := httptest.NewServer(NewHandler(eng, Options{Token: testToken,
		Tokens: []Token{{Name: "gateway", Secret: claimToken, Scope: ScopeReport, Reporter: AnyReporter}}}))
	t.Cleanup(srv.Close)
	for i, who := range []string{"mallory", "Mallory", "mallory%40example.org", "MALLORY", "mallory"} {
		status, out, raw := do(t, "POST", srv.URL+"/v1/reports?kind=spam&reporter="+who, claimToken, spamCopy(t, uint64(i+1)))
		want := http.StatusOK
		if i >= 3 {
			want = http.StatusTooManyRequests
		}
		if status != want {
			t.Fatalf("report %d as %s: %d, want %d: %s", i, who, status, want, raw)
		}
		if status == http.StatusTooManyRequests {
			if msg, _ := out["error"].(string); msg == "" {
				t.Errorf("429 without a reason: %s", raw)
			}
		}
	}
	req, _ := http.NewRequest("POST", srv.URL+"/v1/reports?kind=spam&reporter=mallory", bytes.NewReader(spamCopy(t, 9)))
	req.Header.Set("Authorization", "Bearer "+claimToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ra := resp.Header.Get("Retry-After"); resp.StatusCode != http.StatusTooManyRequests || ra == "" || ra == "0" {
		t.Errorf("status %d, Retry-After %q", resp.StatusCode, ra)
	}
	if status, _, raw := do(t, "POST", srv.URL+"/v1/reports?kind=spam&reporter=alice", claimToken, spamCopy(t, 10)); status != http.StatusOK {
		t.Errorf("alice: %d %s", status, raw)
	}
	if status, _, raw := do(t, "POST", srv.URL+"/v1/reports?kind=spam&reporter=mallory", testToken, spamCopy(t, 12)); status != http.StatusOK {
		t.Errorf("the administrator reporting as mallory: %d %s, want no limit", status, raw)
	}
	// The report socket goes through the same engine and limit.
	path := serveSocketEngine(t, SocketOptions{}, eng)
	sc := socketClient(path, 5*time.Second)
	_, err = sc.Report(context.Background(), spamCopy(t, 11), store.KindSpam, "Mallory@Example.org")
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
		t.Errorf("socket report as mallory: %v, want HTTP 429", err)
	}
}
