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

// BenchmarkReportCorpus runs `nddmilter report` over the SpamAssassin
// corpus (bash scripts/fetch-corpus.sh) into a new store, once per
// iteration; it is skipped without the corpus.
func BenchmarkReportCorpus(b *testing.B) {
	corpus := filepath.Join("..", "..", ".cache", "spamassassin")
	dirs := []string{filepath.Join(corpus, "spam"), filepath.Join(corpus, "easy_ham")}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			b.Skipf("no corpus (bash scripts/fetch-corpus.sh): %v", err)
		}
	}
	for b.Loop() {
		root := newRootCmd()
		var out, errb bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errb)
		root.SetArgs(append([]string{"--store", b.TempDir(), "report", "--reporter", "a"}, dirs...))
		if err := root.ExecuteContext(context.Background()); err != nil {
			b.Fatalf("report: %v\n%s", err, errb.String())
		}
	}
}

// writeCorpus writes n copies of the test campaign into dir, every other
// one heavily randomized (so that some start campaigns apart), plus a
// message too short to sign and an ARF report.
func writeCorpus(t *testing.T, dir string, n int) {
	t.Helper()
	base := spamgen.NewMessage("Refinance your mortgage at record low rates", cliSpamBody, false)
	heavy := []spamgen.Kind{spamgen.Typos, spamgen.Combo, spamgen.Delete}
	for i := range n {
		o := spamgen.Options{Kinds: []spamgen.Kind{spamgen.Reencode}, Seed: uint64(i), Strength: 0.05}
		if i%2 == 1 {
			o.Kinds, o.Strength = []spamgen.Kind{heavy[i%len(heavy)]}, 0.5
		}
		b, err := spamgen.Mutate(base, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("m%03d.eml", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	arf := "From: fbl@isp.example\r\nSubject: report\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/report; report-type=feedback-report; boundary=\"XX\"\r\n\r\n" +
		"--XX\r\nContent-Type: text/plain\r\n\r\nabuse report\r\n" +
		"--XX\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\nVersion: 1\r\n\r\n" +
		"--XX\r\nContent-Type: message/rfc822\r\n\r\n" + string(base) + "\r\n--XX--\r\n"
	for name, b := range map[string]string{"short.eml": "Subject: hi\r\n\r\nok thanks\r\n", "arf.eml": arf} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The local report (messages signed ahead on every core, applied in
// order) gives, with --batch 1, the outcomes of reporting the messages one
// at a time through the daemon's API, message for message.
func TestCLIReportStreamMatchesOneByOne(t *testing.T) {
	skipWithoutResources(t)
	dir := t.TempDir()
	msgs := filepath.Join(dir, "msgs")
	if err := os.Mkdir(msgs, 0o755); err != nil {
		t.Fatal(err)
	}
	writeCorpus(t, msgs, 40)

	st, err := store.Open(filepath.Join(dir, "api-store"), store.Options{})
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

	for _, kind := range [][]string{nil, {"--not-spam", "--reporter", "bob"}} {
		args := append([]string{"report", "-v", "--reporter", "alice"}, kind...)
		remote, _, err := runCLI(t, append(append(args, "--api", srv.URL, "--token", "tok-0123456789abcdef"), msgs)...)
		if err != nil {
			t.Fatalf("report via API: %v\n%s", err, remote)
		}
		local, _, err := runCLI(t, append(append([]string{"--store", filepath.Join(dir, "local")}, args...), "--batch", "1", msgs)...)
		if err != nil {
			t.Fatalf("local report: %v\n%s", err, local)
		}
		if local != remote {
			t.Errorf("local report differs from one by one:\n--- local\n%s\n--- one by one\n%s", local, remote)
		}
		if kind == nil {
			// Heavy copies matching only through ANDD start campaigns of
			// their own and are not merged (the merge rule,
			// docs/SECURITY.md): no "merged [" line is expected.
			for _, want := range []string{"created campaign", "joined campaign", "skipped: too short", "(ARF)", "campaigns merged:     "} {
				if !strings.Contains(local, want) {
					t.Errorf("report output lacks %q:\n%s", want, local)
				}
			}
		}
	}
}

// The summary counts what the batches did, whatever the batch size.
func TestCLIReportBatchSizes(t *testing.T) {
	skipWithoutResources(t)
	dir := t.TempDir()
	msgs := filepath.Join(dir, "msgs")
	if err := os.Mkdir(msgs, 0o755); err != nil {
		t.Fatal(err)
	}
	writeCorpus(t, msgs, 30)
	for _, batch := range []string{"1", "7", "256"} {
		out, _, err := runCLI(t, "--store", filepath.Join(dir, "store"+batch), "report", "--json", "--batch", batch, msgs)
		if err != nil {
			t.Fatalf("--batch %s: %v\n%s", batch, err, out)
		}
		var sum reportSummary
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			t.Fatalf("--batch %s: %v\n%s", batch, err, out)
		}
		if sum.Read != 32 || sum.Errors != 0 || sum.ARF != 1 || sum.Skipped["too short for a signature"] != 1 ||
			sum.Created+sum.Joined+sum.skipped() != sum.Read || sum.Created == 0 {
			t.Errorf("--batch %s: %+v", batch, sum)
		}
	}
}

// In a fleet the summary says how many reports are replicated and how
// many wait in the outbox; a queued report has no outcome yet and is
// counted nowhere else.
func TestReportSummaryFleet(t *testing.T) {
	tests := []struct {
		name string
		outs []api.Outcome
		want []string
		not  []string
		sum  reportSummary
	}{
		{"standalone", []api.Outcome{{Created: true, Campaign: 1}}, nil, []string{"fleet:"},
			reportSummary{Created: 1}},
		{"replicated", []api.Outcome{{Created: true, Campaign: 1, Replication: campaign.Replicated}, {Campaign: 1, Replication: campaign.Replicated}},
			[]string{"fleet:                2 replicated, 0 queued\n"}, []string{"outbox"}, reportSummary{Created: 1, Joined: 1, Replicated: 2}},
		{"queued", []api.Outcome{{Created: true, Campaign: 1, Replication: campaign.Replicated}, {Replication: campaign.Queued}},
			[]string{"fleet:                1 replicated, 1 queued (NATS unreachable"}, nil, reportSummary{Created: 1, Replicated: 1, Queued: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := reportSummary{Kind: "spam", Skipped: map[string]int{}}
			for _, o := range tt.outs {
				s.add(o)
			}
			if s.Created != tt.sum.Created || s.Joined != tt.sum.Joined || s.NoMatch != 0 || s.Replicated != tt.sum.Replicated || s.Queued != tt.sum.Queued {
				t.Errorf("summary %+v, want %+v", s, tt.sum)
			}
			var b strings.Builder
			s.print(&b)
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("summary lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tt.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("summary has %q:\n%s", w, b.String())
				}
			}
		})
	}
}

// A not-spam report by the spam reporter withdraws that reporter's vote,
// and the summary says so.
func TestCLIReportWithdrawnSummary(t *testing.T) {
	dir := t.TempDir()
	msg := filepath.Join(dir, "m.eml")
	body := "Subject: Exclusive investment opportunity\r\n\r\n" + strings.Repeat(
		"Dear friend, your account was selected for an exclusive investment opportunity with guaranteed monthly returns. ", 4) + "\r\n"
	if err := os.WriteFile(msg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	if out, _, err := runCLI(t, "--store", store, "report", "--reporter", "alice", msg); err != nil {
		t.Fatalf("spam report: %v\n%s", err, out)
	}
	out, _, err := runCLI(t, "--store", store, "report", "--not-spam", "--reporter", "alice", msg)
	if err != nil {
		t.Fatalf("not-spam report: %v\n%s", err, out)
	}
	if !strings.Contains(out, "withdrew own vote:    1") {
		t.Errorf("the summary does not show the withdrawn vote:\n%s", out)
	}
}
