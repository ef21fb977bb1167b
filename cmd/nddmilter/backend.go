package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/store"
)

// backend is where report, check and campaigns act: the store itself
// (localBackend), or a running daemon's API (remoteBackend); openBackend
// chooses.
type backend interface {
	Report(ctx context.Context, raw []byte, kind store.Kind, reporter string) (api.Outcome, error)
	Check(ctx context.Context, raw []byte, record bool) (campaign.Verdict, error)
	List(ctx context.Context, q api.ListQuery) ([]api.Summary, error)
	// Watch returns a page of the false-positive watch.
	Watch(ctx context.Context, limit, offset int) ([]api.Watched, error)
	Get(ctx context.Context, id store.CampaignID) (api.Detail, error)
	Delete(ctx context.Context, id store.CampaignID) error
	Allow(ctx context.Context, id store.CampaignID, undo bool) (api.Summary, error)
	// newReportSink returns where `nddmilter report` sends its messages
	// (batch: reports per store transaction, where the backend has one).
	newReportSink(ctx context.Context, kind store.Kind, reporter string, batch int,
		onResult func(name string, o api.Outcome, err error)) reportSink
	Close() error
}

// openBackend opens the store selected by the global flags, or the API of
// --api, or, when the store is locked by a running daemon (or belongs to
// the daemon's user while this runs as root) and an API token is known
// (--token, or the configuration's, or the store directory's token
// file), that daemon's API, at the URL it recorded in the store
// directory or at http.listen. With create false (check, campaigns) a
// store directory that does not exist is an error, so that a mistyped
// store directory does not silently answer "accept" for everything.
func openBackend(ctx context.Context, gf *globalFlags, af *apiFlags, stderr io.Writer, create bool) (backend, error) {
	if af.url != "" {
		return remoteBackend{&api.Client{BaseURL: af.url, Token: af.tokenOrEnv()}}, nil
	}
	cfg, err := loadConfig(gf)
	if err != nil {
		return nil, err
	}
	if !create {
		if err := requireStore(cfg.Store.Dir); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(cfg.Store.Dir); errors.Is(err, fs.ErrNotExist) {
		// Not silent: a relative store.dir (the default) depends on the
		// current directory, and a new store is not the daemon's.
		abs, _ := filepath.Abs(cfg.Store.Dir)
		fmt.Fprintf(stderr, "nddmilter: no store at %s: creating a new one (configuration: %s; store.dir in --config, or --store, names the daemon's)\n",
			abs, configName(gf.config))
	}
	rt, err := daemon.OpenToolRuntime(ctx, cfg, daemon.NewLogger(cfg, stderr))
	if err == nil {
		return localBackend{rt}, nil
	}
	// Root on the package's store (owned by nddmilter) goes through the
	// running daemon's API, never into the store itself.
	if errors.Is(err, daemon.ErrStoreOwner) && daemon.RunningAPIURL(cfg.Store.Dir) == "" {
		return nil, err
	}
	if !errors.Is(err, store.ErrLocked) && !errors.Is(err, daemon.ErrStoreOwner) {
		return nil, err
	}
	c, err := daemonAPI(cfg, af, stderr, err)
	if err != nil {
		return nil, err
	}
	return remoteBackend{c}, nil
}

// localBackend works on the store directory, through the engine of a
// runtime the backend owns.
type localBackend struct{ rt *daemon.Runtime }

// Report reports one message.
func (l localBackend) Report(ctx context.Context, raw []byte, kind store.Kind, reporter string) (api.Outcome, error) {
	o, err := l.rt.Engine.Ingester.Report(ctx, raw, kind, reporter)
	return api.NewOutcome(kind, o), err
}

// Check checks one message; with record, a match is counted as the
// milter counts it.
func (l localBackend) Check(ctx context.Context, raw []byte, record bool) (campaign.Verdict, error) {
	if record {
		return l.rt.Engine.Checker.Check(ctx, raw)
	}
	return l.rt.Engine.Checker.Evaluate(ctx, raw)
}

// List lists a page of campaigns.
func (l localBackend) List(ctx context.Context, q api.ListQuery) ([]api.Summary, error) {
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
func (l localBackend) Watch(ctx context.Context, limit, offset int) ([]api.Watched, error) {
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
func (l localBackend) Get(ctx context.Context, id store.CampaignID) (api.Detail, error) {
	return api.GetDetail(ctx, l.rt.Engine.Reader, id)
}

// Delete deletes a campaign.
func (l localBackend) Delete(ctx context.Context, id store.CampaignID) error {
	if _, err := l.rt.Engine.Reader.Get(ctx, id); err != nil {
		return err // names the campaign already
	}
	if err := l.rt.Engine.Ingester.Delete(ctx, id); err != nil {
		return fmt.Errorf("delete campaign %d: %w", id, err)
	}
	return nil
}

// Allow marks a campaign allowed (undo: active again).
func (l localBackend) Allow(ctx context.Context, id store.CampaignID, undo bool) (api.Summary, error) {
	c, err := l.rt.Engine.Ingester.Allow(ctx, id, !undo)
	if err != nil {
		return api.Summary{}, err // names the campaign already
	}
	return api.NewSummary(c), nil
}

// newReportSink streams the reports into the store: parsed and signed on
// every core ahead of the store, applied in order, batch messages per
// transaction.
func (l localBackend) newReportSink(ctx context.Context, kind store.Kind, reporter string, batch int,
	onResult func(name string, o api.Outcome, err error)) reportSink {
	return newStreamSink(ctx, l.rt.Engine.Ingester, kind, reporter, batch, onResult)
}

// Close closes the store.
func (l localBackend) Close() error { return l.rt.Close() }

// remoteBackend goes through a running daemon's API.
type remoteBackend struct{ *api.Client }

// newReportSink sends the reports one per request (the daemon applies
// each at once); batch does not apply.
func (r remoteBackend) newReportSink(ctx context.Context, kind store.Kind, reporter string, _ int,
	onResult func(name string, o api.Outcome, err error)) reportSink {
	return &apiSink{ctx: ctx, be: r, kind: kind, reporter: reporter, onResult: onResult}
}

// Close does nothing: the API holds no resource.
func (remoteBackend) Close() error { return nil }

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
