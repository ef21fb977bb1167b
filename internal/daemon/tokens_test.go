package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/spool"
)

const (
	adminTok  = "admin-token-0123456789abcdef"
	reportTok = "report-token-0123456789abcdef"
	readTok   = "read-token-0123456789abcdef"
	claimTok  = "claim-token-0123456789abcdef"
)

// apiDo sends a request with a bearer token and returns the status, the
// Retry-After header and the body.
func apiDo(t *testing.T, method, u, tok string, body []byte) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), b
}

// writeSecret writes a token file and returns its path.
func writeSecret(t *testing.T, dir, name, secret string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func spamBody(i int) []byte {
	return spamgen.NewMessage(fmt.Sprintf("Claim your free luxury chronograph %d", i),
		fmt.Sprintf("Congratulations! Your address number %d was chosen among our loyal customers to receive a genuine Swiss luxury chronograph, absolutely free of charge, as part of our anniversary celebration. To claim it, confirm your shipping details and cover a small handling fee. Quantities are strictly limited.", i), false)
}

// Red-team finding 9 through the daemon: http.tokens give scoped tokens
// (a report token reports as its reporter and nothing else, a read token
// reads and logs in to the dashboard read-only), and
// reports.reporter_limit answers 429 with Retry-After past a reporter's
// burst.
func TestScopedTokensAndReporterLimit(t *testing.T) {
	dir := t.TempDir()
	cfg := fmt.Sprintf(`http:
  token: %s
  tokens:
    - name: webmail
      scope: report
      reporter: alice
      token_file: %s
    - name: monitor
      scope: read
      token_file: %s
    - name: gateway
      scope: report
      reporter: "*"
      token_file: %s
reports:
  realm: example.org
  reporter_limit:
    per_hour: 60
    burst: 3
`, adminTok, writeSecret(t, dir, "webmail.token", reportTok), writeSecret(t, dir, "monitor.token", readTok),
		writeSecret(t, dir, "gateway.token", claimTok))
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	startDaemon(t, Options{ConfigPath: cfgPath, HTTPListen: addr})
	base := "http://" + addr
	tests := []struct {
		name, method, path, tok string
		body                    []byte
		status                  int
	}{
		{"report token reports", "POST", "/v1/reports?kind=spam", reportTok, spamBody(1), http.StatusOK},
		{"report token as another", "POST", "/v1/reports?kind=spam&reporter=mallory", reportTok, spamBody(2), http.StatusForbidden},
		{"report token lists", "GET", "/v1/campaigns", reportTok, nil, http.StatusForbidden},
		{"report token deletes", "DELETE", "/v1/campaigns/1", reportTok, nil, http.StatusForbidden},
		{"read token lists", "GET", "/v1/campaigns", readTok, nil, http.StatusOK},
		{"read token reports", "POST", "/v1/reports?kind=spam&reporter=bob", readTok, spamBody(3), http.StatusForbidden},
		{"read token allows", "POST", "/v1/campaigns/1/allow", readTok, nil, http.StatusForbidden},
		{"admin allows", "POST", "/v1/campaigns/1/allow?undo=1", adminTok, nil, http.StatusOK},
	}
	for _, tt := range tests {
		if status, _, b := apiDo(t, tt.method, base+tt.path, tt.tok, tt.body); status != tt.status {
			t.Errorf("%s: %d, want %d: %s", tt.name, status, tt.status, b)
		}
	}
	// alice reported once through the webmail token; two more fit her
	// burst of 3, the next is refused, whatever the spelling, whatever
	// the report token.
	for i, who := range []string{"Alice", "alice@example.org", "ALICE"} {
		status, retry, b := apiDo(t, "POST", base+"/v1/reports?kind=spam&reporter="+url.QueryEscape(who), claimTok, spamBody(10+i))
		want := http.StatusOK
		if i == 2 {
			want = http.StatusTooManyRequests
		}
		if status != want || (want == http.StatusTooManyRequests && (retry == "" || !strings.Contains(string(b), "reporter_limit"))) {
			t.Errorf("report %d as %s: %d (Retry-After %q), want %d: %s", i, who, status, retry, want, b)
		}
	}
	if status, _, b := apiDo(t, "POST", base+"/v1/reports?kind=spam", reportTok, spamBody(20)); status != http.StatusTooManyRequests {
		t.Errorf("the webmail token reporting as alice past her limit: %d: %s", status, b)
	}
	if status, _, b := apiDo(t, "POST", base+"/v1/reports?kind=spam&reporter=alice", adminTok, spamBody(21)); status != http.StatusOK {
		t.Errorf("the administrator reporting as alice: %d: %s, want no limit", status, b)
	}
	// The read token logs in to the dashboard read-only.
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("POST", base+"/ui/login", strings.NewReader(url.Values{"secret": {readTok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("dashboard login with the read token: %d", resp.StatusCode)
	}
}

// A spooled report of a reporter over its limit is deferred (spooled
// again behind the others), never set aside nor lost; the others are
// ingested.
func TestSpoolDefersRateLimited(t *testing.T) {
	dir := t.TempDir()
	spoolDir := filepath.Join(dir, "spool")
	if err := os.Mkdir(spoolDir, 0o770); err != nil {
		t.Fatal(err)
	}
	sp, err := spool.Open(spoolDir, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := sp.Put(spool.Report{Kind: "spam", Reporter: "mallory", Raw: spamBody(100 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sp.Put(spool.Report{Kind: "spam", Reporter: "carol", Raw: spamBody(200)}); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("http:\n  token: %s\napi:\n  spool_dir: %s\n  spool_interval: 1s\nreports:\n  reporter_limit:\n    per_hour: 1\n    burst: 2\n", adminTok, spoolDir)
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	startDaemon(t, Options{ConfigPath: cfgPath, HTTPListen: addr})
	deadline := time.Now().Add(15 * time.Second)
	var reports int
	for time.Now().Before(deadline) {
		_, _, b := apiDo(t, "GET", "http://"+addr+"/v1/campaigns", adminTok, nil)
		var cs []struct {
			SpamReports int `json:"spam_reports"`
		}
		if err := json.Unmarshal(b, &cs); err != nil {
			t.Fatalf("campaigns: %v: %s", err, b)
		}
		reports = 0
		for _, c := range cs {
			reports += c.SpamReports
		}
		if reports >= 3 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if reports != 3 {
		t.Fatalf("%d reports stored, want 3 (mallory's burst of 2, and carol's)", reports)
	}
	time.Sleep(1500 * time.Millisecond) // another pass of the spool
	if p, _ := sp.Pending(); len(p) != 2 {
		t.Errorf("%d reports waiting in the spool, want mallory's 2 deferred", len(p))
	}
	if bad, _ := os.ReadDir(filepath.Join(spoolDir, "bad")); len(bad) != 0 {
		t.Errorf("set aside: %v", bad)
	}
}
