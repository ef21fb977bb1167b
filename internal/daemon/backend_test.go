package daemon

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/nddmilter/nddmilter/internal/testutil"
)

// TestOpenBackend checks the choice between the store and a running
// daemon's API: the store when it is free, an error for a missing store
// unless creating, the API when the store is locked and a token is known,
// and an error wrapping store.ErrLocked otherwise.
func TestOpenBackend(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")

	if _, err := OpenBackend(ctx, BackendOptions{StoreDir: dir, LogOutput: io.Discard}); err == nil ||
		!strings.Contains(err.Error(), "no store at") {
		t.Fatalf("missing store: %v, want \"no store at\"", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("a read-only backend created %s", dir)
	}
	be, err := OpenBackend(ctx, BackendOptions{StoreDir: dir, Create: true, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	local, ok := be.(*Local)
	if !ok {
		t.Fatalf("free store: got %T, want *Local", be)
	}
	if local.Runtime().Engine == nil || local.Runtime().Config.Store.Dir != dir {
		t.Errorf("local runtime: %+v", local.Runtime())
	}

	// The store is now held (as by a running daemon).
	_, err = OpenBackend(ctx, BackendOptions{StoreDir: dir, LogOutput: io.Discard})
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "--api") {
		t.Errorf("locked store without a token: %v, want ErrLocked and a hint", err)
	}
	if err := os.WriteFile(filepath.Join(dir, TokenFile), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, AddressFile), []byte("http://127.0.0.1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var notice strings.Builder
	be2, err := OpenBackend(ctx, BackendOptions{StoreDir: dir, LogOutput: &notice})
	if err != nil {
		t.Fatalf("locked store with a token file: %v", err)
	}
	r, ok := be2.(Remote)
	if !ok || r.BaseURL != "http://127.0.0.1:1" || r.Token != "tok" {
		t.Errorf("locked store: got %#v, want the recorded API with the token file's token", be2)
	}
	if !strings.Contains(notice.String(), "using its API at http://127.0.0.1:1") {
		t.Errorf("notice: %q", notice.String())
	}
	be3, err := OpenBackend(ctx, BackendOptions{APIURL: "http://127.0.0.1:2", Token: "x"})
	if r, ok := be3.(Remote); err != nil || !ok || r.BaseURL != "http://127.0.0.1:2" {
		t.Errorf("explicit API: %#v, %v", be3, err)
	}
	if err := local.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenBackendFleetStore: the command-line tools never write into a
// fleet node's store alone — with the node's fleet configuration and its
// daemon stopped (ErrFleetOffline), or with a standalone configuration
// on a store that applied a fleet's events (ErrFleetStore) — while a
// store that never was a fleet node's takes reports.
func TestOpenBackendFleetStore(t *testing.T) {
	ctx := context.Background()
	raw := spamgen.NewMessage("Exclusive offer: refinance your mortgage at record low rates",
		strings.Repeat("Dear homeowner, our records indicate that you may qualify for a lower monthly payment. ", 6), false)
	fleetCfg := func(t *testing.T, dir string) string {
		p := filepath.Join(t.TempDir(), "nddmilter.yaml")
		seed, pub := testSeed(t, t.TempDir(), "mx1")
		cfg := "store:\n  dir: " + dir + "\nfleet:\n  enabled: true\n  node: mx1\n  nodes: [{name: mx1, key: " + pub + "}]\n  nats:\n    urls: [nats://127.0.0.1:1]\n    nkey_seed: " + seed + "\n"
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
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
			be0, err := OpenBackend(ctx, BackendOptions{StoreDir: dir, Create: true, LogOutput: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			first, err := be0.Report(ctx, raw, store.KindSpam, "bob")
			if err != nil || first.Campaign == 0 {
				t.Fatalf("first report: %+v %v", first, err)
			}
			if err := be0.Close(); err != nil {
				t.Fatal(err)
			}
			st, err := store.Open(dir, store.Options{Expiry: -1, NoSyncWrites: true})
			if err != nil {
				t.Fatal(err)
			}
			if tt.applied > 0 {
				if err := st.MarkApplied(ctx, tt.applied); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			o := BackendOptions{StoreDir: dir, LogOutput: io.Discard}
			if tt.fleet {
				o = BackendOptions{ConfigPath: fleetCfg(t, dir), LogOutput: io.Discard}
			}
			be, err := OpenBackend(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			_, err = be.Report(ctx, raw, store.KindSpam, "alice")
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("report: %v, want %v", err, tt.want)
			}
			if tt.want != nil {
				if err := be.Delete(ctx, first.Campaign); !errors.Is(err, tt.want) {
					t.Errorf("delete: %v, want %v", err, tt.want)
				}
			}
		})
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
