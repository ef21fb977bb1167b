package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Backend is where report, check and campaigns act: the store directly
// (Local), or a running daemon's API (Remote).
type Backend interface {
	Report(ctx context.Context, raw []byte, kind store.Kind, reporter string) (api.Outcome, error)
	Check(ctx context.Context, raw []byte, record bool) (campaign.Verdict, error)
	List(ctx context.Context, q api.ListQuery) ([]api.Summary, error)
	// Watch returns a page of the false-positive watch.
	Watch(ctx context.Context, limit, offset int) ([]api.Watched, error)
	Get(ctx context.Context, id store.CampaignID) (api.Detail, error)
	Delete(ctx context.Context, id store.CampaignID) error
	Allow(ctx context.Context, id store.CampaignID, undo bool) (api.Summary, error)
	Close() error
}

// Local works on the store directory.
type Local struct{ rt *Runtime }

// NewLocal returns the backend of an open runtime; Close closes it.
func NewLocal(rt *Runtime) *Local { return &Local{rt: rt} }

// Runtime returns the store and engine the backend works on.
func (l *Local) Runtime() *Runtime { return l.rt }

// Report reports one message.
func (l *Local) Report(ctx context.Context, raw []byte, kind store.Kind, reporter string) (api.Outcome, error) {
	o, err := l.rt.Engine.Ingester.Report(ctx, raw, kind, reporter)
	return api.NewOutcome(kind, o), err
}

// Check checks one message; with record, a match is counted as the
// milter counts it.
func (l *Local) Check(ctx context.Context, raw []byte, record bool) (campaign.Verdict, error) {
	if record {
		return l.rt.Engine.Checker.Check(ctx, raw)
	}
	return l.rt.Engine.Checker.Evaluate(ctx, raw)
}

// List lists a page of campaigns.
func (l *Local) List(ctx context.Context, q api.ListQuery) ([]api.Summary, error) {
	cs, err := l.rt.Engine.Reader.List(ctx, q.Query(time.Now()))
	if err != nil {
		return nil, err
	}
	out := make([]api.Summary, len(cs))
	for i := range cs {
		out[i] = api.NewSummary(&cs[i])
	}
	return out, nil
}

// Watch returns a page of the false-positive watch.
func (l *Local) Watch(ctx context.Context, limit, offset int) ([]api.Watched, error) {
	ws, err := l.rt.Engine.Reader.FalsePositiveWatch(ctx, campaign.WatchOptions{Limit: limit, Offset: offset})
	if err != nil {
		return nil, err
	}
	out := make([]api.Watched, len(ws))
	for i := range ws {
		out[i] = api.NewWatched(&ws[i])
	}
	return out, nil
}

// Get returns one campaign in detail.
func (l *Local) Get(ctx context.Context, id store.CampaignID) (api.Detail, error) {
	return api.GetDetail(ctx, l.rt.Engine.Reader, id)
}

// Delete deletes a campaign.
func (l *Local) Delete(ctx context.Context, id store.CampaignID) error {
	if _, err := l.rt.Engine.Reader.Get(ctx, id); err != nil {
		return err // names the campaign already
	}
	if err := l.rt.Engine.Ingester.Delete(ctx, id); err != nil {
		return fmt.Errorf("delete campaign %d: %w", id, err)
	}
	return nil
}

// Allow marks a campaign allowed (undo: active again).
func (l *Local) Allow(ctx context.Context, id store.CampaignID, undo bool) (api.Summary, error) {
	c, err := l.rt.Engine.Ingester.Allow(ctx, id, !undo)
	if err != nil {
		return api.Summary{}, err // names the campaign already
	}
	return api.NewSummary(c), nil
}

// Close closes the store.
func (l *Local) Close() error { return l.rt.Close() }

// Remote goes through a running daemon's API.
type Remote struct{ *api.Client }

// Close does nothing: the API holds no resource.
func (Remote) Close() error { return nil }

// BackendOptions select a backend. Zero values: the embedded default
// configuration, its store directory, no API.
type BackendOptions struct {
	// ConfigPath and StoreDir are as for LoadConfig.
	ConfigPath, StoreDir string
	// APIURL, when set, selects the daemon's API at this URL without
	// trying the store.
	APIURL string
	// Token is the API's bearer token. When the store is locked and Token
	// is "", the configuration's http.token or http.token_file, then the
	// token file in the store directory, are used.
	Token string
	// Create lets a store directory that does not exist be created (report);
	// otherwise it is an error (check, campaigns), so that a mistyped
	// store directory does not silently answer "accept" for everything.
	Create bool
	// LogOutput receives the engine's logs and the notice that the daemon's
	// API is used because the store is locked. Default os.Stderr.
	LogOutput io.Writer
}

// OpenBackend opens the store, or the daemon's API when o.APIURL is set or
// when the store is locked by a running daemon and an API token is known
// (o.Token, or the configuration's, or the store directory's token file);
// the URL is then the one the daemon recorded in the store directory, or
// that of http.listen.
func OpenBackend(ctx context.Context, o BackendOptions) (Backend, error) {
	if o.APIURL != "" {
		return Remote{&api.Client{BaseURL: o.APIURL, Token: o.Token}}, nil
	}
	if o.LogOutput == nil {
		o.LogOutput = os.Stderr
	}
	cfg, err := LoadConfig(o.ConfigPath, o.StoreDir)
	if err != nil {
		return nil, err
	}
	if !o.Create {
		if err := requireStore(cfg.Store.Dir); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(cfg.Store.Dir); errors.Is(err, fs.ErrNotExist) {
		// Not silent: a relative store.dir (the default) depends on the
		// current directory, and a new store is not the daemon's.
		abs, _ := filepath.Abs(cfg.Store.Dir)
		fmt.Fprintf(o.LogOutput, "nddmilter: no store at %s: creating a new one (configuration: %s; store.dir in --config, or --store, names the daemon's)\n",
			abs, configName(o.ConfigPath))
	}
	rt, err := OpenRuntime(cfg, NewLogger(cfg, o.LogOutput))
	if err == nil {
		if cfg.Fleet.Enabled {
			offline(rt.Engine, offlineFleet{})
		} else if seq, err := rt.Store.Applied(ctx); err == nil && seq > 0 {
			// A fleet node's store opened with a standalone configuration
			// (the daemon stopped, --config forgotten): a write would make
			// it differ from the fleet's state.
			offline(rt.Engine, offlineFleet{err: fmt.Errorf("%w (it applied the fleet's events up to %d)", ErrFleetStore, seq)})
		}
		return NewLocal(rt), nil
	}
	// Root on the package's store (owned by nddmilter) goes through the
	// running daemon's API, never into the store itself.
	if errors.Is(err, ErrStoreOwner) && RunningAPIURL(cfg.Store.Dir) == "" {
		return nil, err
	}
	if !errors.Is(err, store.ErrLocked) && !errors.Is(err, ErrStoreOwner) {
		return nil, err
	}
	c, err := daemonAPI(cfg, o, err)
	if err != nil {
		return nil, err
	}
	return Remote{c}, nil
}

// daemonAPI returns the client of the API of the daemon holding cfg's
// store (cause: the store's lock error): at the URL the daemon recorded in
// the store directory, else at http.listen when something listens there,
// with the token o.Token, the configuration's or the store directory's.
// A daemon that recorded no URL while nothing answers at http.listen (or
// http.listen is empty) serves no API, `serve --http off`: that is an
// error saying so.
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

func daemonAPI(cfg *config.Config, o BackendOptions, cause error) (*api.Client, error) {
	dir, tok := cfg.Store.Dir, o.Token
	if tok == "" {
		tok, _, _ = ResolveAPIToken(cfg, false)
	}
	url := findAPIURL(cfg)
	if url == "" {
		return nil, fmt.Errorf("the store %s is in use by another process, most likely a running `nddmilter serve` "+
			"(Badger allows one process at a time), and that process serves no HTTP API "+
			"(it recorded no %s, and nothing listens at http.listen %q: started with --http off?).\n"+
			"Stop the daemon first, or run it with its HTTP API and retry (or name it: --api URL --token TOKEN).\n(cause: %w)",
			dir, AddressFile, cfg.HTTP.Listen, cause)
	}
	if tok == "" {
		return nil, fmt.Errorf("the store %s is in use by another process, most likely a running `nddmilter serve` "+
			"(Badger allows one process at a time), and no API token is readable here "+
			"(%s in the store directory, http.token or http.token_file).\nGo through the daemon's API: --api %s --token TOKEN "+
			"(or env NDDMILTER_API_TOKEN), or stop the daemon first.\n(cause: %w)", dir, TokenFile, url, cause)
	}
	fmt.Fprintf(o.LogOutput, "nddmilter: store %s is held by the running daemon; using its API at %s\n", dir, url)
	return &api.Client{BaseURL: url, Token: tok}, nil
}

// Maintenance is what the store commands backup, stats and verify act on:
// the store itself, or the running daemon's API (a consistent online
// backup while the daemon keeps filtering). *store.Badger implements it.
type Maintenance interface {
	Backup(ctx context.Context, w io.Writer) (uint64, error)
	Stats(ctx context.Context) (store.Stats, error)
	Verify(ctx context.Context, repair bool) (store.VerifyResult, error)
	Close() error
}

// RemoteMaintenance goes through a running daemon's API; it verifies
// without repairing (a repair needs the daemon stopped).
type RemoteMaintenance struct{ *api.Client }

// Stats returns the daemon's store counts.
func (r RemoteMaintenance) Stats(ctx context.Context) (store.Stats, error) {
	return r.Client.StoreStats(ctx)
}

// Verify verifies the daemon's store; repair is refused.
func (r RemoteMaintenance) Verify(ctx context.Context, repair bool) (store.VerifyResult, error) {
	if repair {
		return store.VerifyResult{}, fmt.Errorf("verify --repair needs the store to itself: stop the daemon first (%w)", store.ErrLocked)
	}
	return r.Client.Verify(ctx)
}

// Close does nothing.
func (RemoteMaintenance) Close() error { return nil }

// OpenMaintenance opens the store of the configuration (without background
// expiry or garbage collection, so that maintenance never deletes
// anything by itself; read-only unless writable), or, when a running
// daemon holds it, that daemon's API as OpenBackend finds it. The store
// must exist. o.Create is ignored.
func OpenMaintenance(ctx context.Context, o BackendOptions, writable bool) (Maintenance, string, error) {
	if o.LogOutput == nil {
		o.LogOutput = os.Stderr
	}
	cfg, err := LoadConfig(o.ConfigPath, o.StoreDir)
	if err != nil {
		return nil, "", err
	}
	dir := cfg.Store.Dir
	if o.APIURL != "" {
		return RemoteMaintenance{&api.Client{BaseURL: o.APIURL, Token: o.Token}}, dir, nil
	}
	if err := requireStore(dir); err != nil {
		return nil, dir, err
	}
	if writable { // root writing into the package's store would lock its daemon out
		if err := checkStoreOwner(dir, os.Geteuid(), fileOwner); err != nil {
			return nil, dir, err
		}
	}
	opts := StoreOptions(cfg, NewLogger(cfg, o.LogOutput))
	opts.ReadOnly, opts.Expiry, opts.GCInterval = !writable, -1, -1
	st, err := store.Open(dir, opts)
	if err == nil {
		return st, dir, nil
	}
	if !errors.Is(err, store.ErrLocked) {
		return nil, dir, err
	}
	if writable {
		return nil, dir, fmt.Errorf("%w (is nddmilter serve running on it? stop it first)", err)
	}
	c, err := daemonAPI(cfg, o, err)
	if err != nil {
		return nil, dir, err
	}
	return RemoteMaintenance{c}, dir, nil
}

// configName names a configuration file for messages: its path, or the
// embedded defaults.
func configName(path string) string {
	if path == "" {
		return "embedded defaults"
	}
	return path
}

// requireStore fails when the store directory does not exist, saying how
// to get one.
func requireStore(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no store at %s: feed junk reports first (nddmilter report), "+
				"or name the store with --store DIR or store.dir in --config", dir)
		}
		return fmt.Errorf("store %s: %w", dir, err)
	}
	return nil
}
