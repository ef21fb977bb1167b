package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/store"
)

// zapConfig writes a configuration with zero-hour purge on (a doveadm
// backend nobody runs: these commands never call it) and returns its
// path and the ledger's directory.
func zapConfig(t *testing.T, dir, extra string) (string, string) {
	t.Helper()
	key := filepath.Join(dir, "doveadm.key")
	if err := os.WriteFile(key, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(dir, "store")
	cfg := fmt.Sprintf("store:\n  dir: %s\nzap:\n  doveadm:\n    url: http://127.0.0.1:1/doveadm/v1\n    api_key_file: %s\n%s", st, key, extra)
	path := filepath.Join(dir, "nddmilter.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, st + "-ledger"
}

// fillLedger gives campaign 7 two copies moved and one skipped as read.
func fillLedger(t *testing.T, l *ledger.Ledger) {
	t.Helper()
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	for i, outcome := range []string{ledger.Moved, ledger.Moved, ledger.Skipped} {
		var e ledger.Key
		e[15] = byte(i + 1)
		user := fmt.Sprintf("user%d", i)
		j := ledger.Job{ID: ledger.MakeJobID(ledger.Move, e, user), Kind: ledger.Move, Entry: e, Campaign: 7, User: user,
			Rcpt: user + "@example.org", MessageID: fmt.Sprintf("copy%d@spam.example", i), Delivered: at, Next: at}
		if err := l.AddJob(j); err != nil {
			t.Fatal(err)
		}
		j.Status, j.Outcome, j.Finished, j.Attempts = ledger.Done, outcome, at.Add(time.Duration(i)*time.Minute), 1
		if outcome == ledger.Moved {
			j.From, j.To = "INBOX", ledger.Location{Mailbox: "Junk", Validity: "1", UID: uint32(i + 1)}
		} else {
			j.Reason = "read"
		}
		if err := l.UpdateJob(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetMark(7, ledger.Mark{Triggered: at}); err != nil {
		t.Fatal(err)
	}
}

// With the daemon stopped, the commands read the ledger and queue the
// undo in it; without zap they say it is off.
func TestCLIPurgesLocal(t *testing.T) {
	dir := t.TempDir()
	cfg, ledgerDir := zapConfig(t, dir, "")
	if _, _, err := runCLI(t, "--config", cfg, "campaigns", "purges", "7"); err == nil || !strings.Contains(err.Error(), "no delivery ledger") {
		t.Fatalf("no ledger yet: %v", err)
	}
	l, err := ledger.Open(ledgerDir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fillLedger(t, l)
	l.Close()

	out, _, err := runCLI(t, "--config", cfg, "campaigns", "purges", "7")
	if err != nil {
		t.Fatalf("purges: %v\n%s", err, out)
	}
	for _, want := range []string{
		"campaign 7: zero-hour purge",
		"triggered   2025-03-01 10:00:00 UTC",
		"to Junk     3 jobs: 2 moved, 1 skipped (read 1), 0 failed, 0 pending",
		"back        0 jobs: 0 moved, 0 skipped, 0 failed, 0 pending",
		"jobs, the latest first (3 of 3)",
		"2025-03-01 10:02:00  move  user2  copy2@spam.example  — → —         skipped: read",
		"2025-03-01 10:00:00  move  user0  copy0@spam.example  INBOX → Junk  moved",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("purges output lacks %q:\n%s", want, out)
		}
	}
	out, _, err = runCLI(t, "--config", cfg, "campaigns", "purges", "--json", "--limit", "1", "7")
	if err != nil || !strings.Contains(out, `"total_jobs": 3`) || strings.Count(out, `"message_id"`) != 1 {
		t.Errorf("purges --json --limit 1: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "--config", cfg, "campaigns", "purges", "8"); err == nil || !strings.Contains(err.Error(), "never took it up") {
		t.Errorf("unknown campaign: %v", err)
	}
	out, errOut, err := runCLI(t, "--config", cfg, "campaigns", "undo-purge", "7", "8")
	if err == nil || !strings.Contains(out, "campaign 7: purge undone, 2 copies to move back (when the daemon starts)") ||
		!strings.Contains(errOut, "campaign 8") {
		t.Fatalf("undo-purge: %v\n%s\n%s", err, out, errOut)
	}
	l, err = ledger.Open(ledgerDir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := l.Purge(7, -1)
	l.Close()
	if p.Undos.Pending != 2 || !strings.HasPrefix(p.Mark.HeldBy, "the command line") || !p.Mark.Triggered.IsZero() {
		t.Errorf("ledger after undo-purge: undos %+v, mark %+v", p.Undos, p.Mark)
	}
	if out, _, _ := runCLI(t, "--config", cfg, "campaigns", "purges", "7"); !strings.Contains(out, "by the command line") || !strings.Contains(out, "2 pending") {
		t.Errorf("purges after the undo:\n%s", out)
	}

	off := filepath.Join(dir, "off.yaml")
	os.WriteFile(off, []byte("store:\n  dir: "+filepath.Join(dir, "store")+"\n"), 0o600)
	if _, _, err := runCLI(t, "--config", off, "campaigns", "purges", "7"); err == nil || !strings.Contains(err.Error(), "zero-hour purge is off") {
		t.Errorf("zap off: %v", err)
	}
}

// apiPurges serves a ledger's purge through the API handler.
type apiPurges struct{ l *ledger.Ledger }

func (p apiPurges) Purge(ctx context.Context, id store.CampaignID, limit int) (ledger.Purge, error) {
	return p.l.Purge(uint64(id), limit)
}

func (p apiPurges) UndoPurge(ctx context.Context, id store.CampaignID, who string) (int, error) {
	return 5, nil
}

// While the daemon holds the ledger, the commands go through its API: a
// read token shows, only an admin token undoes.
func TestCLIPurgesThroughAPI(t *testing.T) {
	skipWithoutResources(t)
	dir := t.TempDir()
	l, err := ledger.Open(filepath.Join(dir, "store-ledger"), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() // held, as the daemon holds it
	fillLedger(t, l)
	eng := cliEngine(t, filepath.Join(dir, "engine-store"))
	const admin, read = "tok-0123456789abcdef", "read-0123456789abcdef"
	srv := httptest.NewServer(api.NewHandler(eng, api.Options{Token: admin, Purges: apiPurges{l},
		Tokens: []api.Token{{Name: "monitor", Secret: read, Scope: api.ScopeRead}}}))
	defer srv.Close()
	cfg, _ := zapConfig(t, dir, fmt.Sprintf("http:\n  listen: %s\n  token: %s\n", strings.TrimPrefix(srv.URL, "http://"), admin))

	t.Setenv("NDDMILTER_API_TOKEN", "")
	out, errOut, err := runCLI(t, "--config", cfg, "campaigns", "purges", "7")
	if err != nil || !strings.Contains(out, "2 moved, 1 skipped (read 1)") || !strings.Contains(errOut, "using its API") {
		t.Fatalf("purges through the API: %v\n%s\n%s", err, out, errOut)
	}
	out, _, err = runCLI(t, "--config", cfg, "campaigns", "undo-purge", "7")
	if err != nil || !strings.Contains(out, "campaign 7: purge undone, 5 copies to move back (now)") {
		t.Fatalf("undo-purge through the API: %v\n%s", err, out)
	}
	if out, _, err := runCLI(t, "campaigns", "purges", "--api", srv.URL, "--token", read, "7"); err != nil || !strings.Contains(out, "user0") {
		t.Errorf("purges with a read token: %v\n%s", err, out)
	}
	if _, errOut, err := runCLI(t, "campaigns", "undo-purge", "--api", srv.URL, "--token", read, "7"); err == nil || !strings.Contains(errOut, "403") {
		t.Errorf("undo-purge with a read token: %v\n%s", err, errOut)
	}
}

// cliEngine is the real engine over a fresh store in dir.
func cliEngine(t *testing.T, dir string) *campaign.Engine {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lex, _ := imatchbag.DefaultLexicon()
	mod, _ := andd.DefaultModel()
	eng, err := campaign.New(st, lex, mod, campaign.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}
