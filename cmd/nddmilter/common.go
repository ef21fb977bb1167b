package main

import (
	"context"
	"io"

	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/daemon"
)

// defaultStoreDir is where the store lives when neither --store nor the
// configuration names one.
const defaultStoreDir = config.DefaultStoreDir

// loadConfig reads --config (embedded defaults without it) and applies
// the --store flag.
func loadConfig(gf *globalFlags) (*config.Config, error) {
	return daemon.LoadConfig(gf.config, gf.store)
}

// backend is where report, check and campaigns act: the store, or a
// running daemon's API (daemon.OpenBackend chooses).
type backend = daemon.Backend

// localBackend is the backend of the local store; rt gives the commands
// that drive the engine directly (report's stream) its engine.
type localBackend struct {
	*daemon.Local
	rt *daemon.Runtime
}

// openBackend opens the store selected by the global flags, or the API of
// --api, or the API of the daemon holding the store (see
// daemon.OpenBackend). With create false (check, campaigns) a store
// directory that does not exist is an error.
func openBackend(ctx context.Context, gf *globalFlags, af *apiFlags, stderr io.Writer, create bool) (backend, error) {
	be, err := daemon.OpenBackend(ctx, daemon.BackendOptions{
		ConfigPath: gf.config,
		StoreDir:   gf.store,
		APIURL:     af.url,
		Token:      af.tokenOrEnv(),
		Create:     create,
		LogOutput:  stderr,
	})
	if l, ok := be.(*daemon.Local); ok {
		return localBackend{Local: l, rt: l.Runtime()}, nil
	}
	return be, err
}
