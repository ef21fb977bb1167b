package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/nddmilter/nddmilter/internal/testutil"
)

// TestOpenToolRuntimeFleetStore: a command-line tool's engine never
// writes into a fleet node's store alone — with the node's fleet
// configuration and its daemon stopped (ErrFleetOffline), or with a
// standalone configuration on a store that applied a fleet's events
// (ErrFleetStore) — while a store that never was a fleet node's takes
// reports.
func TestOpenToolRuntimeFleetStore(t *testing.T) {
	ctx := context.Background()
	raw := spamgen.NewMessage("Exclusive offer: refinance your mortgage at record low rates",
		strings.Repeat("Dear homeowner, our records indicate that you may qualify for a lower monthly payment. ", 6), false)
	fleetCfg := func(t *testing.T, dir string) *config.Config {
		p := filepath.Join(t.TempDir(), "nddmilter.yaml")
		seed, pub := testSeed(t, t.TempDir(), "mx1")
		cfg := "store:\n  dir: " + dir + "\nfleet:\n  enabled: true\n  node: mx1\n  nodes: [{name: mx1, key: " + pub + "}]\n  nats:\n    urls: [nats://127.0.0.1:1]\n    nkey_seed: " + seed + "\n"
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := LoadConfig(p, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name    string
		applied uint64 // the fleet event the store applied (0: none)
		fleet   bool   // the configuration has fleet.enabled
		want    error  // nil: the report is taken
	}{
		{"standalone store, standalone configuration", 0, false, nil},
		{"fleet store, its fleet configuration, no daemon", 5, true, ErrFleetOffline},
		{"fleet store, standalone configuration", 5, false, ErrFleetStore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A campaign, reported while the store was standalone.
			dir := filepath.Join(t.TempDir(), "store")
			standalone, err := LoadConfig("", dir)
			if err != nil {
				t.Fatal(err)
			}
			rt0, err := OpenToolRuntime(ctx, standalone, log)
			if err != nil {
				t.Fatal(err)
			}
			first, err := rt0.Engine.Ingester.Report(ctx, raw, store.KindSpam, "bob")
			if err != nil || first.Campaign == 0 {
				t.Fatalf("first report: %+v %v", first, err)
			}
			if err := rt0.Close(); err != nil {
				t.Fatal(err)
			}
			if tt.applied > 0 {
				st, err := store.Open(dir, store.Options{Expiry: -1, NoSyncWrites: true})
				if err != nil {
					t.Fatal(err)
				}
				if err := st.MarkApplied(ctx, tt.applied); err != nil {
					t.Fatal(err)
				}
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
			}
			cfg := standalone
			if tt.fleet {
				cfg = fleetCfg(t, dir)
			}
			rt, err := OpenToolRuntime(ctx, cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			_, err = rt.Engine.Ingester.Report(ctx, raw, store.KindSpam, "alice")
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("report: %v, want %v", err, tt.want)
			}
			if tt.want != nil {
				if err := rt.Engine.Ingester.Delete(ctx, first.Campaign); !errors.Is(err, tt.want) {
					t.Errorf("delete: %v, want %v", err, tt.want)
				}
			}
		})
	}
}

// TestRunningAPI: the API of the daemon on a store is at the address it
// recorded in the store directory, else at http.listen when something
// listens there, else nowhere; its token is the configuration's, else
// the store directory's token file.
func TestRunningAPI(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg, err := LoadConfig("", dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.Listen = freeAddr(t) // nothing listens there
	if url, tok := RunningAPI(cfg); url != "" || tok != "" {
		t.Errorf("no daemon: %q %q, want nothing", url, tok)
	}
	cfg.HTTP.Listen = ln.Addr().String()
	if url, _ := RunningAPI(cfg); url != "http://"+ln.Addr().String() {
		t.Errorf("something at http.listen: %q", url)
	}
	if err := os.WriteFile(filepath.Join(dir, AddressFile), []byte("http://127.0.0.1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, TokenFile), []byte("file-tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if url, tok := RunningAPI(cfg); url != "http://127.0.0.1:1" || tok != "file-tok" {
		t.Errorf("recorded address and token file: %q %q", url, tok)
	}
	cfg.HTTP.Token = "cfg-tok-0123456789"
	if _, tok := RunningAPI(cfg); tok != "cfg-tok-0123456789" {
		t.Errorf("http.token: %q", tok)
	}
}

// TestServeStandaloneOnFleetStore: a standalone daemon started on a store
// that applied a fleet's events serves, and says in its log that the
// store now leaves the fleet's state.
func TestServeStandaloneOnFleetStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st, err := store.Open(dir, store.Options{Expiry: -1, NoSyncWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.MarkApplied(context.Background(), 7); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.LockedBuffer{}
	startDaemon(t, Options{StoreDir: dir, LogOutput: logs}) // standalone: the embedded defaults
	if !strings.Contains(logs.String(), "the store holds a fleet node's campaign state but fleet.enabled is false") ||
		!strings.Contains(logs.String(), "applied_event=7") {
		t.Errorf("log without the warning:\n%s", logs.String())
	}
}
