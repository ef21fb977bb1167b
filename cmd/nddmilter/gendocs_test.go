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
