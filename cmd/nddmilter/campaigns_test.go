package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

const cliSpamBody = `Dear homeowner, our records indicate that you may qualify for a substantially lower monthly payment on your current mortgage. Interest rates have fallen to historic lows and thousands of families are already saving hundreds of dollars every month.

Our licensed advisors compare offers from dozens of national lenders in minutes. There is no obligation, no hidden fee and your credit score will not be affected by requesting a personal quote today.

Approval takes less than two days for most applicants. Simply visit our secure website, answer a few short questions about your property and your income, and a specialist will contact you with several tailored proposals.`

// runCLI runs the root command with args and returns stdout, stderr.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

// writeCopies writes n randomized copies of the test campaign into dir.
func writeCopies(t *testing.T, dir string, n int) []string {
	t.Helper()
	base := spamgen.NewMessage("Refinance your mortgage at record low rates", cliSpamBody, false)
	var paths []string
	for i := range n {
		b, err := spamgen.Mutate(base, spamgen.Options{Kinds: []spamgen.Kind{spamgen.Reencode}, Seed: uint64(i), Strength: 0.02})
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, fmt.Sprintf("copy%02d.eml", i))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func skipWithoutResources(t *testing.T) {
	t.Helper()
	if _, err := imatchbag.DefaultLexicon(); err != nil {
		t.Skipf("embedded lexicon not available yet: %v", err)
	}
	if _, err := andd.DefaultModel(); err != nil {
		t.Skipf("embedded model not available yet: %v", err)
	}
}

func TestCLIReportCheckCampaigns(t *testing.T) {
	skipWithoutResources(t)
	dir := t.TempDir()
	st := filepath.Join(dir, "store")
	msgs := writeCopies(t, filepath.Join(dir), 6)
	short := filepath.Join(dir, "short.txt")
	os.WriteFile(short, []byte("Subject: hi\n\nok thanks\n"), 0o644)

	out, _, err := runCLI(t, "--store", st, "report", "--reporter", "alice", msgs[0], short)
	if err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	for _, want := range []string{"messages read:        2", "campaigns created:    1", "skipped:              1", "too short for a signature: 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("report summary lacks %q:\n%s", want, out)
		}
	}
	// Four more reporters, one via --files-from.
	list := filepath.Join(dir, "list.txt")
	os.WriteFile(list, []byte("# files\n"+msgs[1]+"\n"), 0o644)
	if out, _, err := runCLI(t, "--store", st, "report", "--reporter", "bob", "--files-from", list); err != nil || !strings.Contains(out, "joined a campaign:    1") {
		t.Fatalf("report --files-from: %v\n%s", err, out)
	}
	for i, r := range []string{"carol", "dave", "erin"} {
		if _, _, err := runCLI(t, "--store", st, "report", "--reporter", r, msgs[2+i]); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err = runCLI(t, "--store", st, "check", "--json", msgs[5])
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(out), &line); err != nil {
		t.Fatalf("check --json output %q: %v", out, err)
	}
	if line["path"] != msgs[5] || line["action"] != "reject" || line["campaign"] != float64(1) ||
		!strings.HasPrefix(line["rule"].(string), "reject: p=") || len(line["evidence"].([]any)) == 0 {
		t.Errorf("check --json: %v", line)
	}
	out, _, _ = runCLI(t, "--store", st, "check", msgs[5], short)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], msgs[5]+"\treject\t1\t") || !strings.HasPrefix(lines[1], short+"\taccept\t0\t") {
		t.Errorf("check text output:\n%s", out)
	}

	out, _, err = runCLI(t, "--store", st, "campaigns", "list", "--sort", "reports")
	if err != nil || !strings.Contains(out, "Refinance your mortgage") || !strings.Contains(out, "5 (5)") {
		t.Errorf("campaigns list: %v\n%s", err, out)
	}
	if out, _, err := runCLI(t, "--store", st, "campaigns", "watch", "--json"); err != nil || out != "" {
		t.Errorf("campaigns watch without not-spam reports: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, "--store", st, "campaigns", "show", "--reporter", "alice", "--reporter", "bob", "1")
	// The store keeps hashes of the reporter ids: alice's is the first 16
	// hex digits of sha256("alice").
	for _, want := range []string{"campaign 1 (active)", "spam reports   5 from 5 distinct reporters", "exact copy     reject", "timeline",
		"2bd806c97f0e00af  spam", "= alice", "= bob"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("campaigns show lacks %q: %v\n%s", want, err, out)
		}
	}
	if out, _, err := runCLI(t, "--store", st, "campaigns", "allow", "1"); err != nil || !strings.Contains(out, "now allowed") {
		t.Errorf("allow: %v %s", err, out)
	}
	if out, _, _ := runCLI(t, "--store", st, "check", msgs[5]); !strings.Contains(out, "\taccept\t1\t") {
		t.Errorf("check after allow: %s", out)
	}
	if out, _, err := runCLI(t, "--store", st, "campaigns", "allow", "--undo", "1"); err != nil || !strings.Contains(out, "now active") {
		t.Errorf("allow --undo: %v %s", err, out)
	}
	// An unknown id among several: the others are still done, and the
	// command fails saying how many did not.
	out, errOut, err := runCLI(t, "--store", st, "campaigns", "delete", "999", "1")
	if err == nil || !strings.Contains(err.Error(), "1 of 2 campaigns failed") ||
		!strings.Contains(out, "campaign 1 deleted") || !strings.Contains(errOut, "campaign 999") {
		t.Errorf("delete 999 1: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if _, _, err := runCLI(t, "--store", st, "campaigns", "show", "1"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("show after delete: %v", err)
	}
}

// While the daemon holds the store, the CLI says so, and goes through the
// API when told to.
func TestCLILockedStoreUsesAPI(t *testing.T) {
	skipWithoutResources(t)
	dir := t.TempDir()
	stDir := filepath.Join(dir, "store")
	msgs := writeCopies(t, dir, 2)
	st, err := store.Open(stDir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lex, _ := imatchbag.DefaultLexicon()
	mod, _ := andd.DefaultModel()
	eng, err := campaign.New(st, lex, mod, campaign.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(eng, api.Options{Token: "tok-0123456789abcdef"}))
	defer srv.Close()

	t.Setenv("NDDMILTER_API_TOKEN", "")
	_, _, err = runCLI(t, "--store", stDir, "campaigns", "list")
	if err == nil || !strings.Contains(err.Error(), "in use by another process") || !strings.Contains(err.Error(), "--api") {
		t.Fatalf("locked store error: %v", err)
	}
	out, _, err := runCLI(t, "--store", stDir, "report", "--api", srv.URL, "--token", "tok-0123456789abcdef", "--reporter", "x", msgs[0])
	if err != nil || !strings.Contains(out, "campaigns created:    1") {
		t.Fatalf("report via API: %v\n%s", err, out)
	}
	t.Setenv("NDDMILTER_API_TOKEN", "tok-0123456789abcdef")
	out, _, err = runCLI(t, "check", "--api", srv.URL, msgs[1])
	if err != nil || !strings.Contains(out, "\ttag\t1\t") {
		t.Fatalf("check via API: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, "campaigns", "list", "--api", srv.URL, "--json")
	if err != nil || !strings.Contains(out, `"spam_reporters":1`) {
		t.Fatalf("list via API: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, "campaigns", "watch", "--api", srv.URL)
	if err != nil || !strings.Contains(out, "WHY") || !strings.Contains(out, "(no campaigns)") {
		t.Fatalf("watch via API: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, "campaigns", "show", "--api", srv.URL, "1")
	if err != nil || !strings.Contains(out, "campaign 1 (active)") {
		t.Fatalf("show via API: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "campaigns", "show", "--api", srv.URL, "--token", "bad", "1"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("bad token: %v", err)
	}
	// With the daemon's configuration (http.listen and a token), the CLI
	// goes through the API by itself.
	t.Setenv("NDDMILTER_API_TOKEN", "")
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	cfg := fmt.Sprintf("store:\n  dir: %s\nhttp:\n  listen: %s\n  token: tok-0123456789abcdef\n", stDir, strings.TrimPrefix(srv.URL, "http://"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(t, "--config", cfgPath, "campaigns", "list")
	if err != nil || !strings.Contains(out, "Refinance your mortgage") || !strings.Contains(errOut, "using its API") {
		t.Fatalf("automatic API fallback: %v\n%s\n%s", err, out, errOut)
	}
}

// TestReadCommandsNeedAStore checks that check and campaigns do not create
// an empty store at a mistyped --store (which would accept everything).
func TestReadCommandsNeedAStore(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo")
	for _, args := range [][]string{
		{"--store", missing, "check", "/dev/null"},
		{"--store", missing, "campaigns", "list"},
		{"--store", missing, "campaigns", "show", "1"},
	} {
		_, _, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), "no store at") {
			t.Errorf("%v: err = %v, want \"no store at\"", args, err)
		}
		if _, serr := os.Stat(missing); serr == nil {
			t.Fatalf("%v created %s", args, missing)
		}
	}
}
