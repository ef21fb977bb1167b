package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/store"
)

// ledgerPurges serves a real ledger's purge reports; UndoPurge records
// who asked.
type ledgerPurges struct {
	l     *ledger.Ledger
	known store.CampaignID
	mu    sync.Mutex
	undos []string
}

func (p *ledgerPurges) Purge(ctx context.Context, id store.CampaignID, limit int) (ledger.Purge, error) {
	if id != p.known {
		return ledger.Purge{}, fmt.Errorf("campaign %d: %w", id, store.ErrNotFound)
	}
	return p.l.Purge(uint64(id), limit)
}

func (p *ledgerPurges) UndoPurge(ctx context.Context, id store.CampaignID, who string) (int, error) {
	if id != p.known {
		return 0, fmt.Errorf("campaign %d: %w", id, store.ErrNotFound)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.undos = append(p.undos, who)
	return 2, nil
}

func purgeLedger(t *testing.T) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open("", ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	for i, outcome := range []string{ledger.Moved, ledger.Moved, ledger.Skipped, ledger.Failed} {
		var e ledger.Key
		e[15] = byte(i + 1)
		user := fmt.Sprintf("u%d", i)
		j := ledger.Job{ID: ledger.MakeJobID(ledger.Move, e, user), Kind: ledger.Move, Entry: e, Campaign: 7, User: user,
			Rcpt: user + "@example.org", MessageID: fmt.Sprintf("c%d@spam.example", i), Delivered: at, Next: at}
		if err := l.AddJob(j); err != nil {
			t.Fatal(err)
		}
		j.Status, j.Outcome, j.Finished, j.Attempts = ledger.Done, outcome, at.Add(time.Duration(i)*time.Minute), 1
		switch outcome {
		case ledger.Moved:
			j.From, j.To = "INBOX", ledger.Location{Mailbox: "Junk", UID: uint32(i + 1)}
		case ledger.Skipped:
			j.Reason = "read"
		}
		if err := l.UpdateJob(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetMark(7, ledger.Mark{Triggered: at}); err != nil {
		t.Fatal(err)
	}
	return l
}

// What zero-hour purge took back is read with a read token; its undo
// needs the admin scope; a daemon without zap answers 404.
func TestPurgeRoutes(t *testing.T) {
	eng, _ := newEngine(t)
	pu := &ledgerPurges{l: purgeLedger(t), known: 7}
	srv := httptest.NewServer(NewHandler(eng, Options{Token: testToken, Purges: pu, Tokens: []Token{
		{Name: "webmail", Secret: reportToken, Scope: ScopeReport, Reporter: AnyReporter},
		{Name: "monitor", Secret: readToken, Scope: ScopeRead},
	}}))
	t.Cleanup(srv.Close)
	off := httptest.NewServer(NewHandler(eng, Options{Token: testToken}))
	t.Cleanup(off.Close)
	for _, tt := range []struct {
		name, method, url, token string
		status                   int
	}{
		{"read token views", "GET", srv.URL + "/v1/campaigns/7/purge", readToken, http.StatusOK},
		{"read token undoes", "POST", srv.URL + "/v1/campaigns/7/purge/undo", readToken, http.StatusForbidden},
		{"report token views", "GET", srv.URL + "/v1/campaigns/7/purge", reportToken, http.StatusForbidden},
		{"report token undoes", "POST", srv.URL + "/v1/campaigns/7/purge/undo", reportToken, http.StatusForbidden},
		{"no token", "GET", srv.URL + "/v1/campaigns/7/purge", "", http.StatusUnauthorized},
		{"unknown campaign", "GET", srv.URL + "/v1/campaigns/8/purge", testToken, http.StatusNotFound},
		{"undo of an unknown campaign", "POST", srv.URL + "/v1/campaigns/8/purge/undo", testToken, http.StatusNotFound},
		{"bad limit", "GET", srv.URL + "/v1/campaigns/7/purge?limit=-1", testToken, http.StatusBadRequest},
		{"bad id", "GET", srv.URL + "/v1/campaigns/x/purge", testToken, http.StatusBadRequest},
		{"GET undo", "GET", srv.URL + "/v1/campaigns/7/purge/undo", testToken, http.StatusNotFound},
		{"zap off", "GET", off.URL + "/v1/campaigns/7/purge", testToken, http.StatusNotFound},
		{"zap off, undo", "POST", off.URL + "/v1/campaigns/7/purge/undo", testToken, http.StatusNotFound},
	} {
		if status, _, raw := do(t, tt.method, tt.url, tt.token, nil); status != tt.status {
			t.Errorf("%s: %d, want %d: %s", tt.name, status, tt.status, raw)
		}
	}
	if len(pu.undos) != 0 {
		t.Fatalf("refused undos reached the purger: %v", pu.undos)
	}
	_, out, _ := do(t, "GET", off.URL+"/v1/campaigns/7/purge", testToken, nil)
	if msg, _ := out["error"].(string); msg != errPurgeOff.Error() {
		t.Errorf("zap off: %q", msg)
	}

	ctx := context.Background()
	c := &Client{BaseURL: srv.URL, Token: readToken}
	p, err := c.Purge(ctx, 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Campaign != 7 || p.Triggered.IsZero() || p.TotalJobs != 4 || p.Moves.Moved != 2 || p.Moves.Failed != 1 ||
		p.Moves.Skipped["read"] != 1 || len(p.Jobs) != 4 {
		t.Fatalf("purge %+v", p)
	}
	if j := p.Jobs[len(p.Jobs)-1]; j.Kind != "move" || j.User != "u0" || j.From != "INBOX" || j.To != "Junk" || j.Outcome != "moved" ||
		j.MessageID != "c0@spam.example" || j.Rcpt != "u0@example.org" || j.At.IsZero() {
		t.Errorf("oldest job %+v", j)
	}
	if p, err := c.Purge(ctx, 7, 1); err != nil || len(p.Jobs) != 1 || p.TotalJobs != 4 || p.Jobs[0].User != "u3" {
		t.Errorf("limit 1: %+v, %v", p, err)
	}
	if _, err := c.UndoPurge(ctx, 7); err == nil {
		t.Error("a read token undid the purge")
	}
	a, err := (&Client{BaseURL: srv.URL, Token: testToken}).UndoPurge(ctx, 7)
	if err != nil || a.Campaign != 7 || a.UndoJobs != 2 {
		t.Fatalf("admin undo: %+v, %v", a, err)
	}
	if len(pu.undos) != 1 || pu.undos[0] != "API token api-token" {
		t.Errorf("undone by %v", pu.undos)
	}
	if _, err := c.Purge(ctx, 8, 0); !IsNotFound(err) {
		t.Errorf("unknown campaign: %v", err)
	}
}
