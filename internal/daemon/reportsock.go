package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/milter"
	"github.com/nddmilter/nddmilter/internal/spool"
	"github.com/nddmilter/nddmilter/internal/store"
)

// resolveIDs maps user (or group) names and numbers to ids.
func resolveIDs(key string, names []string, group bool) ([]uint32, error) {
	ids := make([]uint32, 0, len(names))
	for _, n := range names {
		if v, err := strconv.ParseUint(n, 10, 32); err == nil {
			ids = append(ids, uint32(v))
			continue
		}
		var id string
		if group {
			g, err := user.LookupGroup(n)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			id = g.Gid
		} else {
			u, err := user.Lookup(n)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			id = u.Uid
		}
		v, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: %s has id %q", key, n, id)
		}
		ids = append(ids, uint32(v))
	}
	return ids, nil
}

// reporterIDs resolves api.allow_users and api.allow_groups: who may
// report for any reporter, over the report socket or through the spool.
func reporterIDs(cfg *config.Config) (uids, gids []uint32, err error) {
	uids, err = resolveIDs("api.allow_users", cfg.API.AllowUsers, false)
	if err != nil {
		return nil, nil, err
	}
	gids, err = resolveIDs("api.allow_groups", cfg.API.AllowGroups, true)
	if err != nil {
		return nil, nil, err
	}
	return uids, gids, nil
}

// newSocketHandler builds the report socket's handler over ing.
func newSocketHandler(cfg *config.Config, ing *campaign.Ingester, log *slog.Logger) (http.Handler, error) {
	uids, gids, err := reporterIDs(cfg)
	if err != nil {
		return nil, err
	}
	return api.NewSocketHandler(ing, api.SocketOptions{
		Options: api.Options{MaxBody: cfg.HTTP.MaxBodyBytes, Logger: log,
			RequestTimeout: cfg.HTTP.RequestTimeout.D(), MaxInflight: cfg.HTTP.MaxInflight},
		AllowUIDs: uids, AllowGIDs: gids,
	}), nil
}

// startReportSocket serves the report socket (api.socket) through
// d.sockH; stop closes it and removes the socket file.
func (d *daemon) startReportSocket() (stop func(), err error) {
	cfg := d.cfg
	mode, _ := cfg.API.SocketFileMode() // validated with the configuration
	ln, err := milter.ListenSocket("unix", cfg.API.Socket, milter.SocketOptions{Mode: fs.FileMode(mode), Group: cfg.API.SocketGroup})
	if err != nil {
		return nil, fmt.Errorf("api.socket: %w", err)
	}
	srv := api.NewServer(d.sockH, api.ServerOptions{
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout.D(),
		ReadTimeout:       cfg.HTTP.ReadTimeout.D(),
		WriteTimeout:      cfg.HTTP.WriteTimeout.D(),
		IdleTimeout:       cfg.HTTP.IdleTimeout.D(),
		MaxHeaderBytes:    cfg.HTTP.MaxHeaderBytes,
		MaxBody:           cfg.HTTP.MaxBodyBytes,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	})
	srv.ConnContext = api.SocketConnContext
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("report socket", "err", err)
		}
	}()
	d.log.Info("report socket listening", "socket", cfg.API.Socket, "allow_users", cfg.API.AllowUsers, "allow_groups", cfg.API.AllowGroups)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			d.log.Warn("report socket shutdown", "err", err)
		}
		os.Remove(cfg.API.Socket)
	}, nil
}

// spoolAdmit is the spool's rule for the owner of a report file: the
// report socket's (root, the daemon's own user, api.allow_users), with
// api.allow_groups matched against the owner's primary group in the user
// database, since a file has no process group (a setgid spool gives
// every file the spool's group).
func spoolAdmit(uids, gids []uint32) func(uid uint32) bool {
	self := uint32(os.Getuid())
	return func(uid uint32) bool {
		if uid == 0 || uid == self || slices.Contains(uids, uid) {
			return true
		}
		if len(gids) == 0 {
			return false
		}
		u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
		if err != nil {
			return false
		}
		gid, err := strconv.ParseUint(u.Gid, 10, 32)
		return err == nil && slices.Contains(gids, uint32(gid))
	}
}

// openSpool opens api.spool_dir, creating it (mode 3770: setgid, and
// sticky so that the group cannot rename tmp/, new/ and bad/; group
// api.socket_group) when it does not exist. Only files of the users the
// report socket admits are ingested from it.
func openSpool(cfg *config.Config, log *slog.Logger) (*spool.Spool, error) {
	dir := cfg.API.SpoolDir
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, fmt.Errorf("api.spool_dir: %w", err)
		}
		if cfg.API.SocketGroup != "" {
			gids, err := resolveIDs("api.socket_group", []string{cfg.API.SocketGroup}, true)
			if err != nil {
				return nil, err
			}
			if err := os.Chown(dir, -1, int(gids[0])); err != nil {
				return nil, fmt.Errorf("api.spool_dir: %w", err)
			}
		}
		if err := os.Chmod(dir, fs.ModeSetgid|fs.ModeSticky|0o770); err != nil {
			return nil, fmt.Errorf("api.spool_dir: %w", err)
		}
	}
	uids, gids, err := reporterIDs(cfg)
	if err != nil {
		return nil, err
	}
	sp, err := spool.Open(dir, spool.Options{MaxMessage: cfg.HTTP.MaxBodyBytes, Admit: spoolAdmit(uids, gids), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("api.spool_dir: %w", err)
	}
	return sp, nil
}

// runSpool ingests the spool now and every api.spool_interval until ctx
// ends, through the current engine. Entries the spool refuses are logged
// by it and counted as errors of stage spool_refused.
func (d *daemon) runSpool(ctx context.Context, sp *spool.Spool, every, timeout time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		st, err := sp.Drain(ctx, func(ctx context.Context, r spool.Report) error {
			return d.ingestSpooled(ctx, sp, r, timeout)
		})
		for range st.Refused {
			d.met.Error("spool_refused")
		}
		if p, perr := sp.Pending(); perr == nil {
			d.met.SpoolPending(len(p))
		}
		if err != nil && ctx.Err() == nil {
			d.met.Error("spool")
		}
		// The spool logged the refused directory itself.
		if st.Stored > 0 || (err != nil && ctx.Err() == nil && !errors.Is(err, spool.ErrUnsafe)) {
			lvl := slog.LevelInfo
			if err != nil {
				lvl = slog.LevelWarn
			}
			d.log.Log(ctx, lvl, "spooled reports ingested", "spool", sp.Dir(), "reports", st.Stored,
				"set_aside", st.SetAside, "refused", st.Refused, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ingestSpooled stores one spooled report. Errors of the store that may
// pass (disk full, closing) leave it in the spool; any other sets it
// aside (spool.ErrReject). A report of a reporter over
// reports.reporter_limit is deferred: spooled again behind the others
// (taken then as done), so that it neither blocks them nor is lost; when
// that fails it stays where it is.
func (d *daemon) ingestSpooled(ctx context.Context, sp *spool.Spool, r spool.Report, timeout time.Duration) error {
	kind, err := api.ParseKind(r.Kind)
	if err != nil {
		return fmt.Errorf("%w: %w", spool.ErrReject, err)
	}
	if strings.TrimSpace(r.Reporter) == "" {
		return fmt.Errorf("%w: no reporter", spool.ErrReject)
	}
	if err := campaign.CheckReporter(r.Reporter); err != nil {
		return fmt.Errorf("%w: %w", spool.ErrReject, err)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	o, err := d.ingest.Load().Report(rctx, r.Raw, kind, r.Reporter)
	switch {
	case err == nil:
		d.met.Report(kind)
		d.log.Debug("spooled report", "kind", api.KindName(kind), "campaign", o.Campaign, "duplicate", o.Duplicate, "spooled_at", r.Time)
		return nil
	case errors.Is(err, campaign.ErrRateLimited):
		spooledAt := r.Time
		r.Time = time.Time{} // now: behind the reports waiting
		if _, perr := sp.Put(r); perr != nil {
			return fmt.Errorf("%w (and could not defer it: %w)", err, perr)
		}
		d.log.Info("spooled report deferred: its reporter is over reports.reporter_limit", "err", err, "spooled_at", spooledAt)
		return nil
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), errors.Is(err, store.ErrDiskFull),
		errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrReadOnly):
		return err
	}
	return fmt.Errorf("%w: %w", spool.ErrReject, err)
}
