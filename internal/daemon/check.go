package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/milter"
	"github.com/nddmilter/nddmilter/internal/store"
)

// CheckConfig checks cfg as serve would before it listens, with the same
// code: the values (config.Validate), the lexicon and the model files
// and the engine built from them (over an in-memory store), the milter's
// options, the API token (http.token, or the first line of
// http.token_file), the report socket's users and groups
// (api.allow_users, api.allow_groups) and that store.dir, when it exists,
// is a directory.
// It opens neither the store nor a listener, and returns the versions
// the engine would run with.
func CheckConfig(cfg *config.Config) (Versions, error) {
	if err := cfg.Validate(); err != nil {
		return Versions{}, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mem, err := store.Open("", store.Options{InMemory: true, Expiry: -1, GCInterval: -1, Logger: log})
	if err != nil {
		return Versions{}, fmt.Errorf("in-memory store: %w", err)
	}
	defer mem.Close()
	eng, vers, err := buildEngine(cfg, mem, log)
	if err != nil {
		return Versions{}, err
	}
	if _, err := milter.New(newMilterEngine(eng), milterOptions(cfg, log, nil)); err != nil {
		return Versions{}, fmt.Errorf("milter: %w", err)
	}
	if _, err := cfg.HTTP.ReadToken(); err != nil {
		return Versions{}, err
	}
	if cfg.API.Socket != "" {
		if _, err := newSocketHandler(cfg, eng.Ingester, log); err != nil {
			return Versions{}, err
		}
	}
	if fi, err := os.Stat(cfg.Store.Dir); err == nil && !fi.IsDir() {
		return Versions{}, fmt.Errorf("store.dir %s: not a directory", cfg.Store.Dir)
	}
	return vers, nil
}
