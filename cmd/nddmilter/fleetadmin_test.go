package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
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
	if !natsd.ValidUserKey(pub) || strings.Count(out, "\n") != 1 {
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

// TestFleetInit: a node's key in a new 0600 file, never overwritten, and
// its fleet.nodes entry.
func TestFleetInit(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "mx1.nk")
	out, err := runCmd(t, "fleet", "init", "--node", "mx1", "--seed", seed, "--snapshots")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := runCmd(t, "fleet", "nkey", "--public", seed)
	if err != nil {
		t.Fatal(err)
	}
	if want := "    - {name: mx1, key: " + strings.TrimSpace(pub) + ", snapshots: true}\n"; !strings.Contains(out, want) {
		t.Errorf("fleet init printed %q, want the entry %q", out, want)
	}
	if fi, err := os.Stat(seed); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("seed file: %v %v", fi, err)
	}
	if _, err := runCmd(t, "fleet", "init", "--node", "mx1", "--seed", seed); err == nil || !strings.Contains(err.Error(), "not overwriting") {
		t.Errorf("second run: %v", err)
	}
}

func TestFleetNatsConf(t *testing.T) {
	dir := t.TempDir()
	seed := filepath.Join(dir, "node.nk")
	out, err := runCmd(t, "fleet", "nkey", "--seed", seed)
	if err != nil {
		t.Fatal(err)
	}
	pub := strings.TrimSpace(out)
	out, err = runCmd(t, "fleet", "nats-conf", "--name", "mx1", "--dir", filepath.Join(dir, "js"),
		"--route", "nats-route://127.0.0.1:6223", "--node-nkey", pub, "--monitor", "127.0.0.1:8222")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`server_name: "mx1"`, `nkey: "` + pub + `"`, `"nats-route://127.0.0.1:6223"`, `http: "127.0.0.1:8222"`, "jetstream {"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	// A node of fleet.nodes writes only its own status.
	out, err = runCmd(t, "fleet", "nats-conf", "--dir", filepath.Join(dir, "js"), "--node", "mx2="+pub)
	if err != nil || !strings.Contains(out, `"$KV.NDDMILTER_nodes.mx2"`) || !strings.Contains(out, `deny: [`) || !strings.Contains(out, `"$JS.API.STREAM.MSG.DELETE.>"`) {
		t.Errorf("--node mx2=KEY: %v\n%s", err, out)
	}
	if _, err := runCmd(t, "fleet", "nats-conf", "--dir", dir); err == nil || !strings.Contains(err.Error(), "no users") {
		t.Errorf("a server without users on loopback: %v, want a refusal", err)
	}
	if _, err := runCmd(t, "fleet", "nats-conf", "--dir", dir, "--listen", "0.0.0.0:4222"); err == nil || !strings.Contains(err.Error(), "no users") {
		t.Errorf("open listener without users: %v, want a refusal", err)
	}
	if _, err := runCmd(t, "fleet", "nats-conf", "--dir", dir, "--node-nkey", "SUAXXX"); err == nil || !strings.Contains(err.Error(), "public key") {
		t.Errorf("a seed given as public key: %v, want a clear error", err)
	}
}
