package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/spamgen"
	"github.com/nddmilter/nddmilter/internal/spool"
	"github.com/nddmilter/nddmilter/internal/store"
)

// The report socket and the spool as the Dovecot pipe uses them: a
// report spooled while the daemon was down is stored when it starts, and
// one sent over the socket is stored at once, under the reporter named.
func TestReportSocketAndSpool(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peer credentials are read on Linux only")
	}
	dir := t.TempDir()
	sock, spoolDir, storeDir := filepath.Join(dir, "report.sock"), filepath.Join(dir, "spool"), filepath.Join(dir, "store")
	if err := os.Mkdir(spoolDir, 0o770); err != nil {
		t.Fatal(err)
	}
	sp, err := spool.Open(spoolDir, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spooled := spamgen.NewMessage("Claim your free luxury chronograph today", "Congratulations! Your address was chosen among our loyal customers to receive a genuine Swiss luxury chronograph, absolutely free of charge, as part of our anniversary celebration. To claim it, confirm your shipping details and cover a small handling fee. Quantities are strictly limited and unclaimed prizes go to the next winner on our waiting list.", false)
	if _, err := sp.Put(spool.Report{Kind: "spam", Reporter: "carol@example.org", Raw: spooled}); err != nil {
		t.Fatal(err)
	}
	// Files that are not reports are set aside, never retried.
	if _, err := sp.Put(spool.Report{Kind: "maybe", Reporter: "x", Raw: spooled}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spoolDir, "new", "1.garbage"), []byte("not a report"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("milter:\n  listen: inet:%s\nhttp:\n  listen: \"\"\napi:\n  socket: %s\n  spool_dir: %s\n  spool_interval: 1s\nstore:\n  dir: %s\nreports:\n  realm: example.org\n",
		freeAddr(t), sock, spoolDir, storeDir)
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{ConfigPath: cfgPath, LogOutput: io.Discard}) }()
	defer func() {
		cancel()
		<-done
	}()

	c := api.NewSocketClient(sock, 5*time.Second)
	var o api.Outcome
	deadline := time.Now().Add(15 * time.Second)
	for {
		o, err = c.Report(ctx, spooled, store.KindSpam, "dave@example.org")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("report over the socket: %v", err)
	}
	// The spooled report is ingested at start: the socket's report joins
	// its campaign, or created it and the spooled one joins.
	for time.Now().Before(deadline) {
		if p, _ := sp.Pending(); len(p) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p, _ := sp.Pending(); len(p) != 0 {
		t.Fatalf("spool not ingested: %v", p)
	}
	if bad, _ := os.ReadDir(filepath.Join(spoolDir, "bad")); len(bad) != 2 {
		t.Errorf("set aside: %v, want the 2 files that are not reports", bad)
	}
	if o.Campaign == 0 {
		t.Fatalf("outcome %+v", o)
	}
	// Both reporters are on the campaign (the daemon holds the store:
	// read it through the socket's outcome of a repeat).
	o2, err := c.Report(ctx, spooled, store.KindSpam, "carol@example.org")
	if err != nil || !o2.Duplicate || o2.Campaign != o.Campaign {
		t.Fatalf("carol's report again: %+v %v (her spooled report was not stored?)", o2, err)
	}
	// Red-team finding 8: the spool and the socket normalize reporter
	// ids with reports.realm: " CAROL " is carol@example.org, the same
	// reporter (her repeat of the same message counts once).
	o3, err := c.Report(ctx, spooled, store.KindSpam, " CAROL ")
	if err != nil || !o3.Duplicate || o3.Campaign != o.Campaign {
		t.Fatalf("report as \" CAROL \": %+v %v, want a duplicate of carol@example.org's", o3, err)
	}
}

func TestCheckConfigReportSocket(t *testing.T) {
	tests := []struct {
		users string
		ok    bool
	}{
		{"[root]", true},
		{"[\"0\"]", true},
		{"[no-such-user-ndd]", false},
	}
	for _, tc := range tests {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte("api:\n  socket: /run/x.sock\n  allow_users: "+tc.users+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(path, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := CheckConfig(cfg); (err == nil) != tc.ok {
			t.Errorf("allow_users %s: %v", tc.users, err)
		}
	}
}
