package daemon

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/store"
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
