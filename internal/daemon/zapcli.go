package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/nddmilter/nddmilter/internal/zap"
)

// PurgeBackend is where `campaigns purges` and `campaigns undo-purge`
// act: the delivery ledger itself while no daemon has it open, or the
// running daemon's API.
type PurgeBackend interface {
	// Purge returns what zero-hour purge took back of campaign id, with
	// its latest limit jobs (negative: the most).
	Purge(ctx context.Context, id store.CampaignID, limit int) (api.Purge, error)
	// UndoPurge moves back what the campaign's purge moved, without
	// allowing the campaign.
	UndoPurge(ctx context.Context, id store.CampaignID) (api.UndoneAnswer, error)
	Close() error
}

// LocalPurges works on the ledger while the daemon is stopped: an undo
// queues its jobs, which the daemon runs when it starts.
type LocalPurges struct{ l *ledger.Ledger }

// Purge reads campaign id's purge from the ledger; a campaign the ledger
// knows nothing of is store.ErrNotFound.
func (p LocalPurges) Purge(ctx context.Context, id store.CampaignID, limit int) (api.Purge, error) {
	if limit < 0 {
		limit = api.MaxPurgeJobs
	}
	pu, err := p.known(id, limit)
	if err != nil {
		return api.Purge{}, err
	}
	return api.NewPurge(pu), nil
}

func (p LocalPurges) known(id store.CampaignID, limit int) (ledger.Purge, error) {
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
func (p LocalPurges) UndoPurge(ctx context.Context, id store.CampaignID) (api.UndoneAnswer, error) {
	if _, err := p.known(id, 0); err != nil {
		return api.UndoneAnswer{}, err
	}
	who := fmt.Sprintf("the command line (uid %d)", os.Getuid())
	n, err := zap.UndoPurge(ctx, p.l, uint64(id), who, time.Now(), nil)
	return api.UndoneAnswer{Campaign: id, UndoJobs: n}, err
}

// Close closes the ledger.
func (p LocalPurges) Close() error { return p.l.Close() }

// RemotePurges goes through a running daemon's API.
type RemotePurges struct{ *api.Client }

// Close does nothing.
func (RemotePurges) Close() error { return nil }

// ErrZapOff is wrapped by OpenPurges's error when the configuration names
// no zap backend (and no API URL is given).
var ErrZapOff = errors.New("zero-hour purge is off: the configuration names no zap backend (docs/ZAP.md)")

// OpenPurges opens the delivery ledger of the configuration, or, when
// the running daemon holds it (or o.APIURL is set), that daemon's API as
// OpenBackend finds it. o.Create is ignored.
func OpenPurges(ctx context.Context, o BackendOptions) (PurgeBackend, error) {
	if o.APIURL != "" {
		return RemotePurges{&api.Client{BaseURL: o.APIURL, Token: o.Token}}, nil
	}
	if o.LogOutput == nil {
		o.LogOutput = os.Stderr
	}
	cfg, err := LoadConfig(o.ConfigPath, o.StoreDir)
	if err != nil {
		return nil, err
	}
	if !cfg.Zap.Enabled() {
		return nil, fmt.Errorf("%w (configuration: %s)", ErrZapOff, configName(o.ConfigPath))
	}
	dir := cfg.Zap.LedgerDir(cfg.Store.Dir)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no delivery ledger at %s: the daemon has not run with zero-hour purge on", dir)
	}
	// Root on the package's ledger (owned by nddmilter) goes through the
	// running daemon's API, never into the ledger itself.
	ownerErr := checkStoreOwner(dir, os.Geteuid(), fileOwner)
	if ownerErr == nil {
		// No eviction while the command runs: it only reads, or queues
		// undo jobs.
		l, err := ledger.Open(dir, ledger.Options{Window: cfg.Zap.Window.D(), MaxBytes: cfg.Zap.MaxBytes,
			EvictInterval: 24 * time.Hour, Logger: NewLogger(cfg, o.LogOutput)})
		if err == nil {
			return LocalPurges{l}, nil
		}
		if !errors.Is(err, ledger.ErrLocked) {
			return nil, err
		}
		ownerErr = err
	} else if RunningAPIURL(cfg.Store.Dir) == "" {
		return nil, ownerErr
	}
	c, err := daemonAPI(cfg, o, ownerErr)
	if err != nil {
		return nil, err
	}
	return RemotePurges{c}, nil
}
