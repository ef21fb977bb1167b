package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/lab/bench"
	"github.com/nddmilter/nddmilter/internal/store"
)

func runStoreCmd(t *testing.T, gf *globalFlags, args ...string) (string, error) {
	t.Helper()
	cmd := newStoreCmd(gf)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestStoreCommands builds a small store with the lab's bench store
// (2,200 signatures, plus 10 from the timed single reports; the options
// are nddlab bench store's defaults), then runs stats, verify, backup,
// restore and compact on it.
func TestStoreCommands(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	var buf bytes.Buffer
	err := bench.Store(context.Background(), bench.StoreOptions{Signatures: 2200, Dir: src,
		IMatchKeys: 6, ANDDKeys: 5, Batch: 1000, Workers: 4, Repeat: 0.1,
		Lookups: 200, LookupKeys: 16, SingleReports: 10, Warm: true}, &buf)
	out := buf.String()
	if err != nil {
		t.Fatalf("bench store: %v\n%s", err, out)
	}
	for _, want := range []string{"ingestion", "bytes/signature", "lookup known", "p99", "report single"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench store output lacks %q:\n%s", want, out)
		}
	}
	gf := &globalFlags{store: src}
	steps := []struct {
		gf   *globalFlags
		args []string
		want string
	}{
		{gf, []string{"stats"}, "signatures  2210"},
		{gf, []string{"verify"}, "OK: no problems"},
		{gf, []string{"backup", filepath.Join(tmp, "b.bak")}, "backed up"},
		{&globalFlags{store: filepath.Join(tmp, "restored")}, []string{"restore", filepath.Join(tmp, "b.bak")}, "2210 signatures"},
		{&globalFlags{store: filepath.Join(tmp, "restored")}, []string{"compact"}, "compacted"},
		{&globalFlags{store: filepath.Join(tmp, "restored")}, []string{"verify", "--json"}, `"problems":0`},
	}
	for _, s := range steps {
		out, err := runStoreCmd(t, s.gf, s.args...)
		if err != nil {
			t.Fatalf("store %v: %v\n%s", s.args, err, out)
		}
		if !strings.Contains(out, s.want) {
			t.Errorf("store %v: output lacks %q:\n%s", s.args, s.want, out)
		}
	}
	if _, err := runStoreCmd(t, &globalFlags{store: filepath.Join(tmp, "restored")}, "restore", filepath.Join(tmp, "b.bak")); err == nil {
		t.Error("restore into a non-empty store succeeded")
	}
	if got := storeDir(&globalFlags{}); got != defaultStoreDir {
		t.Errorf("storeDir default %q", got)
	}
	// A store held by another process (the daemon) is named as such.
	held, err := store.Open(src, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := runStoreCmd(t, gf, "compact"); !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "nddmilter serve running") {
		t.Errorf("compact of a held store: %v", err)
	}
}

// TestStoreOnline runs store backup, stats and verify while a daemon
// holds the store: they go through its API by themselves; restore of the
// online backup works, and a garbage file is refused leaving nothing.
func TestStoreOnline(t *testing.T) {
	tmp := t.TempDir()
	dir := startDaemon(t, daemon.Options{StoreDir: filepath.Join(tmp, "store")})
	gf := &globalFlags{store: dir}
	bak := filepath.Join(tmp, "online.bak")
	for _, s := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", bak}, "using its API"},
		{[]string{"stats"}, "campaigns   0"},
		{[]string{"verify"}, "OK: no problems"},
	} {
		out, err := runStoreCmd(t, gf, s.args...)
		if err != nil || !strings.Contains(out, s.want) {
			t.Errorf("store %v with the daemon running: %v\n%s", s.args, err, out)
		}
	}
	if out, err := runStoreCmd(t, &globalFlags{store: filepath.Join(tmp, "r")}, "restore", bak); err != nil {
		t.Errorf("restore of the online backup: %v\n%s", err, out)
	}
	garbage := filepath.Join(tmp, "garbage.bak")
	os.WriteFile(garbage, bytes.Repeat([]byte("\xff\x01garbage"), 100), 0o644)
	if _, err := runStoreCmd(t, &globalFlags{store: filepath.Join(tmp, "g")}, "restore", garbage); !errors.Is(err, store.ErrBadBackup) {
		t.Errorf("restore of garbage: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(tmp, "g*")); len(m) != 1 { // garbage.bak only
		t.Errorf("left behind: %v", m)
	}
}
