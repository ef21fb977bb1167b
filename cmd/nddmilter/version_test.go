package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionCmd(t *testing.T) {
	out, errOut, err := runCLI(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	// A test binary carries no commit: the command says how to stamp one.
	if strings.Contains(out, "commit     unknown") != strings.Contains(errOut, "Stamp it") {
		t.Errorf("commit unknown without the stamping hint, or the other way round:\n%s\n%s", out, errOut)
	}
	for _, want := range []string{"nddmilter ", "commit", "go         go", "signatures imatch=1,andd=1", "lexicon    ", "model      "} {
		if !strings.Contains(out, want) {
			t.Errorf("version lacks %q:\n%s", want, out)
		}
	}
	if out, _, err := runCLI(t, "version", "--json"); err != nil || !strings.Contains(out, `"lexicon":"`) {
		t.Errorf("version --json: %v %s", err, out)
	}
}

// TestConfigCheckAsServe: config check reads the files serve reads.
func TestConfigCheckAsServe(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o600)
		return p
	}
	good := write("good.yaml", "store:\n  expiry: 30days\n")
	if out, _, err := runCLI(t, "config", "check", good); err != nil || !strings.Contains(out, "OK (lexicon ") || !strings.Contains(out, "expiry: 30d") {
		t.Errorf("config check of a good file: %v\n%s", err, out)
	}
	for _, c := range []struct{ body, want string }{
		{"signatures:\n  lexicon: " + filepath.Join(dir, "missing.lex") + "\n", "signatures.lexicon"},
		{"andd:\n  model: " + good + "\n", "andd.model"},
		{"http:\n  token_file: " + filepath.Join(dir, "missing") + "\n", "http.token_file"},
		{"http:\n  token: a\n", "at least 16"},
		{"milter:\n  check_timeout: 1ns\n", "at least 10ms"},
		{"store:\n  expiry: 30dayz\n", "d = days"},
	} {
		p := write("bad.yaml", c.body)
		if _, _, err := runCLI(t, "config", "check", p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config check of %q: %v, want %q", c.body, err, c.want)
		}
	}
}
