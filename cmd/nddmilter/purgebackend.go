package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/nddmilter/nddmilter/internal/zap"
)

// purgeBackend is where `campaigns purges` and `campaigns undo-purge`
// act: the delivery ledger itself while no daemon has it open, or the
// running daemon's API.
type purgeBackend interface {
	// Purge returns what zero-hour purge took back of campaign id, with
	// its latest limit jobs (negative: the most).
	Purge(ctx context.Context, id store.CampaignID, limit int) (api.Purge, error)
	// UndoPurge moves back what the campaign's purge moved, without
	// allowing the campaign.
	UndoPurge(ctx context.Context, id store.CampaignID) (api.UndoneAnswer, error)
	Close() error
}

// localPurges works on the ledger while the daemon is stopped: an undo
// queues its jobs, which the daemon runs when it starts.
type localPurges struct{ l *ledger.Ledger }

// Purge reads campaign id's purge from the ledger; a campaign the ledger
// knows nothing of is store.ErrNotFound.
func (p localPurges) Purge(ctx context.Context, id store.CampaignID, limit int) (api.Purge, error) {
	if limit < 0 {
		limit = api.MaxPurgeJobs
	}
	pu, err := p.known(id, limit)
	if err != nil {
		return api.Purge{}, err
	}
	return api.NewPurge(pu), nil
}

func (p localPurges) known(id store.CampaignID, limit int) (ledger.Purge, error) {
	pu, err := p.l.Purge(uint64(id), limit)
	if err != nil {
		return pu, err
	}
	if pu.Total == 0 && pu.Mark == (ledger.Mark{}) {
		return pu, fmt.Errorf("campaign %d: zero-hour purge never took it up: %w", id, store.ErrNotFound)
	}
	return pu, nil
}

// UndoPurge queues the moving back of what campaign id's purge moved.
func (p localPurges) UndoPurge(ctx context.Context, id store.CampaignID) (api.UndoneAnswer, error) {
	if _, err := p.known(id, 0); err != nil {
		return api.UndoneAnswer{}, err
	}
	who := fmt.Sprintf("the command line (uid %d)", os.Getuid())
	n, err := zap.UndoPurge(ctx, p.l, uint64(id), who, time.Now(), nil)
	return api.UndoneAnswer{Campaign: id, UndoJobs: n}, err
}

// Close closes the ledger.
func (p localPurges) Close() error { return p.l.Close() }

// remotePurges goes through a running daemon's API.
type remotePurges struct{ *api.Client }

// Close does nothing.
func (remotePurges) Close() error { return nil }

// errZapOff is wrapped by openPurges's error when the configuration names
// no zap backend (and no API URL is given).
var errZapOff = errors.New("zero-hour purge is off: the configuration names no zap backend (docs/ZAP.md)")

// openPurges opens the delivery ledger of the configuration, or the API
// of --api, or, when the running daemon holds the ledger, that daemon's
// API as openBackend finds it.
func openPurges(cmd *cobra.Command, gf *globalFlags, af *apiFlags) (purgeBackend, error) {
	if af.url != "" {
		return remotePurges{&api.Client{BaseURL: af.url, Token: af.tokenOrEnv()}}, nil
	}
	stderr := cmd.ErrOrStderr()
	cfg, err := loadConfig(gf)
	if err != nil {
		return nil, err
	}
	if !cfg.Zap.Enabled() {
		return nil, fmt.Errorf("%w (configuration: %s)", errZapOff, configName(gf.config))
	}
	dir := cfg.Zap.LedgerDir(cfg.Store.Dir)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no delivery ledger at %s: the daemon has not run with zero-hour purge on", dir)
	}
	// Root on the package's ledger (owned by nddmilter) goes through the
	// running daemon's API, never into the ledger itself.
	ownerErr := daemon.CheckStoreOwner(dir)
	if ownerErr == nil {
		// No eviction while the command runs: it only reads, or queues
		// undo jobs.
		l, err := ledger.Open(dir, ledger.Options{Window: cfg.Zap.Window.D(), MaxBytes: cfg.Zap.MaxBytes,
			EvictInterval: 24 * time.Hour, Logger: daemon.NewLogger(cfg, stderr)})
		if err == nil {
			return localPurges{l}, nil
		}
		if !errors.Is(err, ledger.ErrLocked) {
			return nil, err
		}
		ownerErr = err
	} else if daemon.RunningAPIURL(cfg.Store.Dir) == "" {
		return nil, ownerErr
	}
	c, err := daemonAPI(cfg, af, stderr, ownerErr)
	if err != nil {
		return nil, err
	}
	return remotePurges{c}, nil
}
