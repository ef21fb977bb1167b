package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/spool"
	"github.com/nddmilter/nddmilter/internal/store"
)

// runCLIIn is runCLI with stdin.
func runCLIIn(t *testing.T, stdin []byte, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetIn(bytes.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

// serveReportSocket serves a report socket over a real engine and store.
func serveReportSocket(t *testing.T, path string) *store.Badger {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
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
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.NewSocketHandler(eng.Ingester, api.SocketOptions{}), ConnContext: api.SocketConnContext}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return st
}

func TestCLIReportSocket(t *testing.T) {
	skipWithoutResources(t)
	dir := t.TempDir()
	sock, spoolDir := filepath.Join(dir, "report.sock"), t.TempDir()
	msg := spamgen.NewMessage("Refinance your mortgage at record low rates", cliSpamBody, false)
	args := func(extra ...string) []string {
		return append([]string{"report", "--socket", sock, "--spool", spoolDir, "--reporter", "alice@example.org", "-v"}, extra...)
	}
	pending := func() int {
		sp, err := spool.Open(spoolDir, spool.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p, _ := sp.Pending()
		return len(p)
	}

	// Daemon down: spooled, exit 0, at once.
	start := time.Now()
	out, errs, err := runCLIIn(t, msg, args("--kind", "spam")...)
	if err != nil || !strings.Contains(out, "spooled") || pending() != 1 {
		t.Fatalf("daemon down: %v\n%s%s (pending %d)", err, out, errs, pending())
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("spooling took %s", d)
	}

	// Daemon up: reported, under the reporter named.
	st := serveReportSocket(t, sock)
	out, errs, err = runCLIIn(t, msg, args()...)
	if err != nil || !strings.Contains(out, "created campaign") {
		t.Fatalf("daemon up: %v\n%s%s", err, out, errs)
	}
	out, _, _ = runCLIIn(t, msg, args()...)
	if !strings.Contains(out, "repeated by this reporter") {
		t.Errorf("same message again: %s", out)
	}
	out, _, _ = runCLIIn(t, msg, args("--kind", "ham")...)
	if !strings.Contains(out, "withdrew") {
		t.Errorf("out of Junk: %s", out)
	}
	cs, err := st.List(context.Background(), store.Query{})
	if err != nil || len(cs) != 1 || cs[0].SpamReporters != 0 || cs[0].HamReporters != 1 {
		t.Fatalf("campaigns %+v %v", cs, err)
	}

	// Mistakes of the caller are errors; the rest never is.
	tests := []struct {
		name   string
		stdin  []byte
		args   []string
		err    bool
		stderr string
	}{
		{"no reporter", msg, []string{"report", "--socket", sock}, true, ""},
		{"bad kind", msg, args("--kind", "maybe"), true, ""},
		{"paths", msg, args("x.eml"), true, ""},
		{"empty message", nil, args(), false, "empty message"},
		{"too large", msg, args("--max-size", "100"), false, "larger than 100 bytes"},
	}
	for _, tc := range tests {
		_, errs, err := runCLIIn(t, tc.stdin, tc.args...)
		if (err != nil) != tc.err || !strings.Contains(errs, tc.stderr) {
			t.Errorf("%s: err %v, stderr %q", tc.name, err, errs)
		}
	}
}

// A daemon that accepts and never answers: the report is spooled once
// --timeout has passed, and the command exits 0.
func TestCLIReportSocketHungDaemon(t *testing.T) {
	dir := t.TempDir()
	sock, spoolDir := filepath.Join(dir, "report.sock"), t.TempDir()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // read nothing, answer nothing
		}
	}()
	start := time.Now()
	out, errs, err := runCLIIn(t, []byte("Subject: x\r\n\r\nbody\r\n"), "report", "--socket", sock, "--spool", spoolDir,
		"--reporter", "alice", "--timeout", "300ms", "-v")
	if err != nil || !strings.Contains(out, "spooled") {
		t.Fatalf("hung daemon: %v\n%s%s", err, out, errs)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s with --timeout 300ms", d)
	}
	sp, _ := spool.Open(spoolDir, spool.Options{})
	if p, _ := sp.Pending(); len(p) != 1 {
		t.Errorf("pending %v", p)
	}
}
