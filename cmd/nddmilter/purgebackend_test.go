package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/store"
)

// With zap on, the daemon serves what the purge took back through its
// API, and the command line's purge backend goes through it while the
// daemon holds the ledger: an unknown campaign is not found, a known one
// shows its (empty) purge and can have it undone.
func TestZapPurgesServed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := filepath.Join(dir, "doveadm.key")
	if err := os.WriteFile(key, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(dir, "store")
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	cfg := fmt.Sprintf("store:\n  dir: %s\nzap:\n  mode: log\n  doveadm:\n    url: http://127.0.0.1:1/doveadm/v1\n    api_key_file: %s\n", storeDir, key)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, daemon.Options{ConfigPath: cfgPath, StoreDir: storeDir})
	gf := &globalFlags{config: cfgPath}
	be, err := openBackend(ctx, gf, &apiFlags{}, io.Discard, false)
	if err != nil {
		t.Fatal(err)
	}
	out, err := be.Report(ctx, spamText(1), store.KindSpam, "r1")
	if err != nil || out.Campaign == 0 {
		t.Fatalf("report: %+v, %v", out, err)
	}
	var notice strings.Builder
	cmd := &cobra.Command{}
	cmd.SetContext(ctx)
	cmd.SetErr(&notice)
	pb, err := openPurges(cmd, gf, &apiFlags{})
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	if _, ok := pb.(remotePurges); !ok || !strings.Contains(notice.String(), "using its API") {
		t.Fatalf("purges of a held ledger: %T %q", pb, notice.String())
	}
	p, err := pb.Purge(ctx, out.Campaign, 10)
	if err != nil || p.Campaign != out.Campaign || p.TotalJobs != 0 || !p.Triggered.IsZero() {
		t.Fatalf("purge of a campaign never triggered: %+v, %v", p, err)
	}
	if _, err := pb.Purge(ctx, out.Campaign+100, 10); !api.IsNotFound(err) {
		t.Errorf("purge of an unknown campaign: %v, want 404", err)
	}
	if _, err := pb.UndoPurge(ctx, out.Campaign+100); !api.IsNotFound(err) {
		t.Errorf("undo of an unknown campaign: %v, want 404", err)
	}
	a, err := pb.UndoPurge(ctx, out.Campaign)
	if err != nil || a.UndoJobs != 0 {
		t.Fatalf("undo: %+v, %v", a, err)
	}
	if p, err := pb.Purge(ctx, out.Campaign, 10); err != nil || p.HeldBy != "API token api-token" || p.Undone.IsZero() {
		t.Errorf("purge after the undo: %+v, %v", p, err)
	}
}
