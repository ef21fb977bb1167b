package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestFleetNkey(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "node.nk")
	out, err := runCmd(t, "fleet", "nkey", "--seed", seed)
	if err != nil {
		t.Fatal(err)
	}
	pub := strings.TrimSpace(out)
	if !strings.HasPrefix(pub, "U") || strings.Contains(pub, "SU") {
		t.Fatalf("printed %q: want only the public key", out)
	}
	fi, err := os.Stat(seed)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("seed file mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := runCmd(t, "fleet", "nkey", "--seed", seed); err == nil || !strings.Contains(err.Error(), "not overwriting") {
		t.Errorf("second run on the same file: %v, want a refusal", err)
	}
	out, err = runCmd(t, "fleet", "nkey", "--public", seed)
	if err != nil || strings.TrimSpace(out) != pub {
		t.Errorf("--public: %q, %v; want %q", out, err, pub)
	}
	out, err = runCmd(t, "fleet", "nkey")
	if err != nil || !strings.Contains(out, "seed:   SU") || !strings.Contains(out, "public: U") {
		t.Errorf("without --seed: %q, %v", out, err)
	}
}
