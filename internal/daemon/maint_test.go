package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/config"
)

// startDaemon runs the daemon with the options o on loopback (a new
// milter address; a new HTTP address unless o has one; a new store unless
// o.StoreDir; logs discarded unless o.LogOutput) until it is ready, and
// returns its store directory; it stops when the test ends.
func startDaemon(t *testing.T, o Options) string {
	t.Helper()
	if o.StoreDir == "" {
		o.StoreDir = filepath.Join(t.TempDir(), "store")
	}
	storeDir := o.StoreDir
	a := freeAddrs(t, 2)
	o.MilterListen = "inet:" + a[0]
	if o.HTTPListen == "" {
		o.HTTPListen = a[1]
	}
	if o.LogOutput == nil {
		o.LogOutput = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop")
		}
	})
	for i := 0; i < 300; i++ {
		select {
		case err := <-done:
			t.Fatalf("daemon stopped: %v", err)
		default:
		}
		if o.HTTPListen == "off" {
			if _, err := os.Stat(filepath.Join(storeDir, "MANIFEST")); err == nil {
				time.Sleep(100 * time.Millisecond)
				return storeDir
			}
		} else if code, _ := httpGet(t, "http://"+o.HTTPListen+"/readyz"); code == 200 {
			return storeDir
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("daemon not ready")
	return ""
}

func spamText(i int) []byte {
	return []byte(fmt.Sprintf("Subject: Cheap watches %d\r\n\r\nBuy cheap replica watches today %d, finest quality, discreet shipping worldwide, order now while stock lasts.\r\n", i, i))
}

// TestServeBuildInfoAndBackupToken: a running daemon shows its build on
// /metrics, with the ids `nddmilter version` prints, and its API refuses
// a backup without the token. (The command line's online maintenance
// through this API is tested in cmd/nddmilter.)
func TestServeBuildInfoAndBackupToken(t *testing.T) {
	dir := startDaemon(t, Options{})
	url := RunningAPIURL(dir)
	lex, _ := LoadLexicon(&config.Config{})
	want := fmt.Sprintf(`lexicon="%08x"`, lex.ID())
	if _, m := httpGet(t, url+"/metrics"); !strings.Contains(m, "nddmilter_build_info{") || !strings.Contains(m, want) ||
		!strings.Contains(m, `signature_version="imatch=1,andd=1"`) {
		t.Errorf("/metrics lacks nddmilter_build_info with %s", want)
	}
	resp, err := http.Get(url + "/v1/store/backup")
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("backup without a token: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
}

// TestSIGTERMAfterStoreRemoved: a store whose directory was deleted under
// the daemon (dpkg --purge while it ran) made Badger retry its memtable
// flush once a second forever and SIGTERM never ended the process. The
// daemon now exits within milter.shutdown_timeout for the drain plus the
// same bound for the store's close.
func TestSIGTERMAfterStoreRemoved(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	if err := os.WriteFile(cfgPath, []byte("milter:\n  shutdown_timeout: 2s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(dir, "store")
	a := freeAddrs(t, 2)
	httpAddr := a[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{ConfigPath: cfgPath, StoreDir: storeDir, MilterListen: "inet:" + a[1],
			HTTPListen: httpAddr, LogOutput: io.Discard})
	}()
	base := "http://" + httpAddr
	for i := 0; ; i++ {
		if code, _ := httpGet(t, base+"/readyz"); code == 200 {
			break
		}
		if i == 300 {
			t.Fatal("daemon not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A report leaves entries in the memtable for the close to flush.
	tok, err := os.ReadFile(filepath.Join(storeDir, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", base+"/v1/reports?kind=spam&reporter=alice",
		strings.NewReader("Subject: Cheap watches\r\n\r\nBuy cheap replica watches today, finest quality, discreet shipping worldwide.\r\n"))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("report: %v %v", resp, err)
	}
	if err := os.RemoveAll(storeDir); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cancel()
	select {
	case <-done:
		t.Logf("stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not stop within 30 s of SIGTERM after its store was removed")
	}
}

func TestCloseWithin(t *testing.T) {
	if err := closeWithin(func() error { return nil }, time.Second); err != nil {
		t.Errorf("quick close: %v", err)
	}
	hang := make(chan struct{})
	defer close(hang)
	err := closeWithin(func() error { <-hang; return nil }, 10*time.Millisecond)
	if !errors.Is(err, ErrCloseTimeout) {
		t.Errorf("hung close: %v, want ErrCloseTimeout", err)
	}
}
