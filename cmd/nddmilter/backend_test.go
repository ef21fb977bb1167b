package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

// freeAddr returns a loopback TCP address nothing listens at.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startDaemon runs `nddmilter serve` in-process with the options o on
// loopback (a new milter address; a new HTTP address unless o has one;
// a new store unless o.StoreDir; logs discarded unless o.LogOutput)
// until it has opened its store and, unless --http off, recorded its
// API's address; it returns the store directory and stops when the test
// ends.
func startDaemon(t *testing.T, o daemon.Options) string {
	t.Helper()
	if o.StoreDir == "" {
		o.StoreDir = filepath.Join(t.TempDir(), "store")
	}
	o.MilterListen = "inet:" + freeAddr(t)
	if o.HTTPListen == "" {
		o.HTTPListen = freeAddr(t)
	}
	if o.LogOutput == nil {
		o.LogOutput = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, o) }()
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
			if _, err := os.Stat(filepath.Join(o.StoreDir, "MANIFEST")); err == nil {
				time.Sleep(100 * time.Millisecond)
				return o.StoreDir
			}
		} else if daemon.RunningAPIURL(o.StoreDir) != "" {
			return o.StoreDir
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("daemon not ready")
	return ""
}

func spamText(i int) []byte {
	return []byte(fmt.Sprintf("Subject: Cheap watches %d\r\n\r\nBuy cheap replica watches today %d, finest quality, discreet shipping worldwide, order now while stock lasts.\r\n", i, i))
}

// TestOpenBackend checks the choice between the store and a running
// daemon's API: the store when it is free, an error for a missing store
// unless creating, the API when the store is locked and a token is known,
// and an error wrapping store.ErrLocked otherwise.
func TestOpenBackend(t *testing.T) {
	ctx := context.Background()
	t.Setenv("NDDMILTER_API_TOKEN", "")
	dir := filepath.Join(t.TempDir(), "store")
	gf := &globalFlags{store: dir}

	if _, err := openBackend(ctx, gf, &apiFlags{}, io.Discard, false); err == nil ||
		!strings.Contains(err.Error(), "no store at") {
		t.Fatalf("missing store: %v, want \"no store at\"", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("a read-only backend created %s", dir)
	}
	be, err := openBackend(ctx, gf, &apiFlags{}, io.Discard, true)
	if err != nil {
		t.Fatal(err)
	}
	local, ok := be.(localBackend)
	if !ok {
		t.Fatalf("free store: got %T, want localBackend", be)
	}
	if local.rt.Engine == nil || local.rt.Config.Store.Dir != dir {
		t.Errorf("local runtime: %+v", local.rt)
	}

	// The store is now held (as by a running daemon).
	_, err = openBackend(ctx, gf, &apiFlags{}, io.Discard, false)
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "--api") {
		t.Errorf("locked store without a token: %v, want ErrLocked and a hint", err)
	}
	if err := os.WriteFile(filepath.Join(dir, daemon.TokenFile), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, daemon.AddressFile), []byte("http://127.0.0.1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var notice strings.Builder
	be2, err := openBackend(ctx, gf, &apiFlags{}, &notice, false)
	if err != nil {
		t.Fatalf("locked store with a token file: %v", err)
	}
	r, ok := be2.(remoteBackend)
	if !ok || r.BaseURL != "http://127.0.0.1:1" || r.Token != "tok" {
		t.Errorf("locked store: got %#v, want the recorded API with the token file's token", be2)
	}
	if !strings.Contains(notice.String(), "using its API at http://127.0.0.1:1") {
		t.Errorf("notice: %q", notice.String())
	}
	be3, err := openBackend(ctx, gf, &apiFlags{token: "given"}, io.Discard, false)
	if r, ok := be3.(remoteBackend); err != nil || !ok || r.Token != "given" {
		t.Errorf("locked store with --token: %#v, %v", be3, err)
	}
	be4, err := openBackend(ctx, &globalFlags{}, &apiFlags{url: "http://127.0.0.1:2", token: "x"}, io.Discard, false)
	if r, ok := be4.(remoteBackend); err != nil || !ok || r.BaseURL != "http://127.0.0.1:2" {
		t.Errorf("explicit API: %#v, %v", be4, err)
	}
	if err := local.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenBackendNewStoreNotice: a report that creates a store says so and
// where (a relative store.dir depends on the current directory; issue 16).
func TestOpenBackendNewStoreNotice(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	var notice strings.Builder
	be, err := openBackend(context.Background(), &globalFlags{store: dir}, &apiFlags{}, &notice, true)
	if err != nil {
		t.Fatal(err)
	}
	be.Close()
	if !strings.Contains(notice.String(), "no store at "+dir+": creating a new one (configuration: embedded defaults;") {
		t.Errorf("notice %q, want it to name the new store %s", notice.String(), dir)
	}
	notice.Reset()
	be, err = openBackend(context.Background(), &globalFlags{store: dir}, &apiFlags{}, &notice, true)
	if err != nil {
		t.Fatal(err)
	}
	be.Close()
	if strings.Contains(notice.String(), "creating") {
		t.Errorf("existing store: notice %q", notice.String())
	}
}

// TestCLIReportFleetStore: `nddmilter report` on a store that applied a
// fleet's events, with a standalone configuration, reports nothing and
// says why (daemon.ErrFleetStore; daemon's TestOpenToolRuntimeFleetStore
// has the other cases).
func TestCLIReportFleetStore(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "store")
	st, err := store.Open(dir, store.Options{Expiry: -1, NoSyncWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.MarkApplied(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	msg := filepath.Join(tmp, "m.eml")
	raw := spamgen.NewMessage("Exclusive offer: refinance your mortgage at record low rates",
		strings.Repeat("Dear homeowner, our records indicate that you may qualify for a lower monthly payment. ", 6), false)
	if err := os.WriteFile(msg, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(t, "--store", dir, "report", "--reporter", "alice", msg)
	if err == nil || err.Error() != "1 of 1 messages could not be reported" {
		t.Errorf("report into a fleet store: %v", err)
	}
	if !strings.Contains(errOut, daemon.ErrFleetStore.Error()+" (it applied the fleet's events up to 5)") {
		t.Errorf("stderr lacks why:\n%s", errOut)
	}
	if !strings.Contains(out, "errors:") {
		t.Errorf("summary:\n%s", out)
	}
}

// TestOnlineMaintenance backs up, counts and verifies a store held by a
// running daemon through its API (found from the store directory alone),
// while reports keep arriving through the same API; the backup restores
// into a consistent store. A repair is refused while the daemon runs.
func TestOnlineMaintenance(t *testing.T) {
	ctx := context.Background()
	t.Setenv("NDDMILTER_API_TOKEN", "")
	dir := startDaemon(t, daemon.Options{})
	gf := &globalFlags{store: dir}
	be, err := openBackend(ctx, gf, &apiFlags{}, io.Discard, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := be.(remoteBackend); !ok {
		t.Fatalf("backend of a held store: %T", be)
	}
	for i := 0; i < 20; i++ {
		if _, err := be.Report(ctx, spamText(i), store.KindSpam, fmt.Sprint("r", i)); err != nil {
			t.Fatal(err)
		}
	}
	var notice strings.Builder
	m, gotDir, err := openMaintenance(gf, &apiFlags{}, &notice, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(remoteMaintenance); !ok || gotDir != dir || !strings.Contains(notice.String(), "using its API") {
		t.Fatalf("maintenance of a held store: %T %s %q", m, gotDir, notice.String())
	}
	// Reports go on during the backup.
	stop := make(chan struct{})
	fed := make(chan error, 1)
	go func() {
		for i := 100; ; i++ {
			select {
			case <-stop:
				fed <- nil
				return
			default:
			}
			if _, err := be.Report(ctx, spamText(i), store.KindSpam, "late"); err != nil {
				fed <- err
				return
			}
			if i > 400 {
				fed <- nil
				return
			}
		}
	}()
	var buf bytes.Buffer
	if _, err := m.Backup(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	close(stop)
	if err := <-fed; err != nil {
		t.Fatal(err)
	}
	st, err := m.Stats(ctx)
	if err != nil || st.Campaigns < 1 || st.Keys == 0 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	v, err := m.Verify(ctx, false)
	if err != nil || v.Problems() != 0 || v.Campaigns != st.Campaigns {
		t.Fatalf("verify: %+v %v", v, err)
	}
	if _, err := m.Verify(ctx, true); !errors.Is(err, store.ErrLocked) {
		t.Errorf("repair through the API: %v, want ErrLocked", err)
	}
	if _, _, err := openMaintenance(gf, &apiFlags{}, io.Discard, true); !errors.Is(err, store.ErrLocked) ||
		!strings.Contains(err.Error(), "stop it first") {
		t.Errorf("writable maintenance of a held store: %v", err)
	}
	res, err := store.Restore(ctx, filepath.Join(t.TempDir(), "restored"), &buf, store.Options{})
	if err != nil || res.Problems() != 0 || res.Campaigns < 1 {
		t.Fatalf("restore of the online backup: %+v %v", res, err)
	}
}

// TestHTTPOff: a daemon started with --http off serves no API, and the
// command line says so instead of trying http.listen.
func TestHTTPOff(t *testing.T) {
	ctx := context.Background()
	t.Setenv("NDDMILTER_API_TOKEN", "")
	cfgPath := filepath.Join(t.TempDir(), "nddmilter.yaml")
	listen := freeAddr(t) // nothing listens there
	if err := os.WriteFile(cfgPath, []byte("http:\n  listen: "+listen+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := startDaemon(t, daemon.Options{ConfigPath: cfgPath, HTTPListen: "off"})
	gf := &globalFlags{config: cfgPath, store: dir}
	_, err := openBackend(ctx, gf, &apiFlags{}, io.Discard, false)
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "serves no HTTP API") || !strings.Contains(err.Error(), "--http off") {
		t.Errorf("backend of a daemon with --http off: %v", err)
	}
	_, _, err = openMaintenance(gf, &apiFlags{}, io.Discard, false)
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "serves no HTTP API") {
		t.Errorf("maintenance of a daemon with --http off: %v", err)
	}
}

// The fleet commands with no daemon running say so (errNoDaemon), not
// that the store is held.
func TestFleetAPINoDaemon(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	cfg := fmt.Sprintf("http:\n  listen: %s\nstore:\n  dir: %s\n", freeAddr(t), filepath.Join(dir, "store"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := fleetAPI(&globalFlags{config: cfgPath}, &apiFlags{}, io.Discard)
	if !errors.Is(err, errNoDaemon) || !strings.Contains(err.Error(), "nddmilter serve") {
		t.Fatalf("fleetAPI with no daemon: %v", err)
	}
	_, err = runCmd(t, "--config", cfgPath, "fleet", "status")
	if !errors.Is(err, errNoDaemon) {
		t.Errorf("fleet status with no daemon: %v", err)
	}
}
