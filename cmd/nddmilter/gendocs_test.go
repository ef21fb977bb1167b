//go:build gendocs

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenDocs: the hidden gendocs command writes a man page per command,
// dated SOURCE_DATE_EPOCH (the package build is reproducible). Run it with
// go test -tags gendocs ./cmd/nddmilter (.ci/run does).
func TestGenDocs(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000") // Nov 2023
	dir := t.TempDir()
	root := newRootCmd()
	root.SetArgs([]string{"gendocs", dir})
	root.SetOut(&bytes.Buffer{})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nddmilter.1", "nddmilter-serve.1", "nddmilter-store-backup.1"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"Nov 2023"`) {
			t.Errorf("%s: not dated by SOURCE_DATE_EPOCH: %.200s", name, b)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "nddmilter.1"))
	if strings.Contains(string(b), "gendocs") {
		t.Error("nddmilter.1 lists the hidden gendocs command")
	}
}

// TestCLIPageCurrent: docs/CLI.md is what gendocs --markdown writes from
// the commands' help, so the page never drifts from the binary. After
// changing a command's help, regenerate it:
// go run -tags gendocs ./cmd/nddmilter gendocs --markdown docs/CLI.md
func TestCLIPageCurrent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "CLI.md")
	root := newRootCmd()
	root.SetArgs([]string{"gendocs", "--markdown", out})
	root.SetOut(&bytes.Buffer{})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", cliPage))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what gendocs --markdown writes; regenerate it: go run -tags gendocs ./cmd/nddmilter gendocs --markdown %s", cliPage, cliPage)
	}
	for _, s := range []string{"## nddmilter serve\n", "## nddmilter store restore\n", "--config string"} {
		if !bytes.Contains(got, []byte(s)) {
			t.Errorf("the page lacks %q", s)
		}
	}
	if bytes.Contains(got, []byte("gendocs DIR")) || bytes.Contains(got, []byte("completion bash")) {
		t.Error("the page lists a hidden command or a completion subcommand")
	}
}
