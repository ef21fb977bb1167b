package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/nddmilter/nddmilter/internal/config"
)

// What the command-line tools need of the daemon to choose where they
// act (the choice itself is theirs): a runtime over the store when no
// daemon holds it, else the running daemon's API.

// OpenToolRuntime opens the store of cfg and builds the engine over it,
// as OpenRuntime does, for a command-line tool working on the store
// while no daemon runs. Over a fleet node's store the engine's writes
// are refused and its hits dropped, so that the store never leaves the
// fleet's state: with ErrFleetOffline under the node's configuration
// (fleet.enabled), with ErrFleetStore under a standalone configuration
// on a store that applied a fleet's events (the daemon stopped, --config
// forgotten). Errors are OpenRuntime's (store.ErrLocked, ErrStoreOwner).
func OpenToolRuntime(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Runtime, error) {
	rt, err := OpenRuntime(cfg, log)
	if err != nil {
		return nil, err
	}
	if cfg.Fleet.Enabled {
		offline(rt.Engine, offlineFleet{})
	} else if seq, err := rt.Store.Applied(ctx); err == nil && seq > 0 {
		offline(rt.Engine, offlineFleet{err: fmt.Errorf("%w (it applied the fleet's events up to %d)", ErrFleetStore, seq)})
	}
	return rt, nil
}

// RunningAPI finds the HTTP API of the daemon running on cfg's store.
// url is the address the daemon recorded in the store directory
// (AddressFile), else http.listen when something listens there, else "".
// token is http.token or http.token_file, else the store directory's
// TokenFile, else "" (a token that cannot be read counts as none).
func RunningAPI(cfg *config.Config) (url, token string) {
	token, _, _ = ResolveAPIToken(cfg, false)
	return findAPIURL(cfg), token
}

// findAPIURL returns the URL of the running daemon's API: the address
// it recorded in its store directory, else http.listen when something
// listens there; "" when neither.
func findAPIURL(cfg *config.Config) string {
	if url := RunningAPIURL(cfg.Store.Dir); url != "" {
		return url
	}
	if cfg.HTTP.Listen != "" {
		if c, err := net.DialTimeout("tcp", cfg.HTTP.Listen, time.Second); err == nil {
			c.Close()
			return "http://" + cfg.HTTP.Listen
		}
	}
	return ""
}

// CheckStoreOwner returns ErrStoreOwner, saying what to do instead, when
// this process runs as root and the store directory dir exists and
// belongs to another user (the package's nddmilter): OpenRuntime checks
// it, and so must a tool that opens the store for writing by itself.
func CheckStoreOwner(dir string) error {
	return checkStoreOwner(dir, os.Geteuid(), fileOwner)
}
