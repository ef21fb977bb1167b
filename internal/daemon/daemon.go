package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/dashboard"
	"github.com/nddmilter/nddmilter/internal/metrics"
	"github.com/nddmilter/nddmilter/internal/milter"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Options configure Run. The zero value runs the embedded default
// configuration.
type Options struct {
	// ConfigPath is the YAML configuration file, read again on every
	// reload; "" selects the embedded defaults.
	ConfigPath string
	// StoreDir, MilterListen and HTTPListen, when set, override store.dir,
	// milter.listen and http.listen (the command's flags). HTTPListen
	// "off" disables the HTTP listener.
	StoreDir, MilterListen, HTTPListen string
	// LogOutput receives the logs, in the configured format. Default
	// os.Stderr.
	LogOutput io.Writer
}

// Config loads the configuration and applies the overrides of o.
func (o Options) Config() (*config.Config, error) {
	cfg, err := LoadConfig(o.ConfigPath, o.StoreDir)
	if err != nil {
		return nil, err
	}
	if o.MilterListen != "" {
		cfg.Milter.Listen = o.MilterListen
	}
	switch o.HTTPListen {
	case "":
	case "off":
		cfg.HTTP.Listen = ""
	default:
		cfg.HTTP.Listen = o.HTTPListen
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("flags: %w", err)
	}
	return cfg, nil
}

// describeSource names where the configuration came from, for logs.
func (o Options) describeSource() string {
	if o.ConfigPath == "" {
		return "embedded defaults"
	}
	return strings.TrimSpace(o.ConfigPath)
}

func milterOptions(cfg *config.Config, log *slog.Logger, met *metrics.Metrics) milter.Options {
	m := cfg.Milter
	o := milter.Options{
		MaxBodyBytes:     m.MaxBodyBytes,
		CheckTimeout:     m.CheckTimeout.D(),
		IdleTimeout:      m.IdleTimeout.D(),
		OnError:          m.OnError,
		OnOverload:       m.OnOverload,
		MaxSessions:      m.MaxSessions,
		MaxBufferedBytes: m.MaxBufferedBytes,
		HeaderPrefix:     m.HeaderPrefix,
		NoAcceptHeader:   !m.HeaderOnAccept,
		RejectWith:       m.RejectWith,
		RejectText:       m.RejectText,
		TempfailText:     m.TempfailText,
		QuarantineReason: m.QuarantineReason,
		SpamHeaders:      m.SpamHeaders,
		SpamRequired:     tagThreshold(cfg),
		SubjectTag:       m.SubjectTag,
		HashAddresses:    cfg.Log.HashAddresses,
		Overrides:        map[string]string{},
		Logger:           log,
		Metrics:          met,
	}
	if m.MaxBodyBytes == 0 {
		o.MaxBodyBytes = -1 // headers only
	}
	for k, v := range m.Overrides {
		o.Overrides[lower(k)] = v
	}
	r := cfg.Reports
	o.Reports = milter.ReportOptions{
		SpamAddresses:  r.SpamAddresses,
		HamAddresses:   r.HamAddresses,
		Deliver:        r.Deliver,
		MaxAttachments: r.MaxAttachments,
		Timeout:        r.Timeout.D(),
	}
	for _, f := range r.FeedbackLoops {
		o.Reports.FeedbackLoops = append(o.Reports.FeedbackLoops, milter.FeedbackLoop(f))
	}
	return o
}

// milterEngine is what the milter calls: the engine's Checker, and its
// Ingester for the reports sent by mail (milter.Reporter).
type milterEngine struct {
	check  *campaign.Checker
	ingest *campaign.Ingester
}

func newMilterEngine(eng *campaign.Engine) milterEngine {
	return milterEngine{check: eng.Checker, ingest: eng.Ingester}
}

// CheckWith is the Checker's (milter.Checker).
func (m milterEngine) CheckWith(ctx context.Context, raw []byte, o campaign.CheckOptions) (campaign.Verdict, error) {
	return m.check.CheckWith(ctx, raw, o)
}

// CheckEvidence is the Checker's (milter.EvidenceChecker: the delivery
// ledger of zero-hour purge).
func (m milterEngine) CheckEvidence(ctx context.Context, raw []byte, o campaign.CheckOptions) (campaign.Verdict, *pipeline.Message, error) {
	return m.check.CheckEvidence(ctx, raw, o)
}

// ReportAttached is the Ingester's (milter.Reporter).
func (m milterEngine) ReportAttached(ctx context.Context, raw []byte, kind store.Kind, reporter string, max int) (campaign.MailReport, error) {
	return m.ingest.ReportAttached(ctx, raw, kind, reporter, max)
}

// tagThreshold is the campaign-spam probability above which the policy
// acts (the upper end of its accept range), X-Spam-Status's required=.
func tagThreshold(cfg *config.Config) float64 {
	for _, t := range cfg.Policy.WithDefaults().Thresholds() {
		if t.Action == action.Accept {
			return t.To
		}
	}
	return 1
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// apiSwitch serves the /v1 API of the current engine (swapped on reload)
// and counts reports.
type apiSwitch struct {
	h   atomic.Pointer[http.Handler]
	met *metrics.Metrics
}

func (a *apiSwitch) set(h http.Handler) { a.h.Store(&h) }

func (a *apiSwitch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/reports" {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		(*a.h.Load()).ServeHTTP(rec, r)
		if rec.status == http.StatusOK {
			// The handler took the kind, so it parses (junk, not-spam and
			// the other spellings count as spam or ham).
			if kind, err := api.ParseKind(r.URL.Query().Get("kind")); err == nil {
				a.met.Report(kind)
			}
		}
		return
	}
	(*a.h.Load()).ServeHTTP(w, r)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// apiFleet are the fleet's routes of the API (nil funcs: not in a fleet).
type apiFleet struct {
	status       api.FleetStatusFunc
	forget       api.FleetForgetFunc
	removeServer api.FleetRemoveServerFunc
}

func newAPIHandler(cfg *config.Config, eng *campaign.Engine, st api.Maintainer, log *slog.Logger, met *metrics.Metrics, fl apiFleet, purges api.Purges) (http.Handler, error) {
	tok, generated, err := ResolveAPIToken(cfg, true)
	if err != nil {
		return nil, err
	}
	if generated {
		log.Info("generated the /v1 API token (set http.token or http.token_file to choose one)",
			"file", filepath.Join(cfg.Store.Dir, TokenFile))
	}
	tokens, err := scopedTokens(cfg, tok)
	if err != nil {
		return nil, err
	}
	return api.NewHandler(eng, api.Options{Token: tok, Tokens: tokens, MaxBody: cfg.HTTP.MaxBodyBytes, Logger: log,
		RequestTimeout: cfg.HTTP.RequestTimeout.D(), MaxInflight: cfg.HTTP.MaxInflight, Metrics: met, Store: st,
		FleetStatus: fl.status, FleetForget: fl.forget, FleetRemoveServer: fl.removeServer, Purges: purges}), nil
}

// scopedTokens reads the tokens of http.tokens; their secrets must differ
// from each other's and from the api-token admin (one secret, one scope).
func scopedTokens(cfg *config.Config, admin string) ([]api.Token, error) {
	seen := map[string]string{}
	if admin != "" {
		seen[admin] = "api-token"
	}
	out := make([]api.Token, 0, len(cfg.HTTP.Tokens))
	for i, t := range cfg.HTTP.Tokens {
		key := fmt.Sprintf("http.tokens[%d]", i)
		secret, err := t.ReadSecret(key)
		if err != nil {
			return nil, err
		}
		if other, ok := seen[secret]; ok {
			return nil, fmt.Errorf("%s (%s): the same secret as %s: give each token its own", key, t.Name, other)
		}
		seen[secret] = t.Name
		scope, err := api.ParseScope(t.Scope)
		if err != nil {
			return nil, fmt.Errorf("%s.scope: %w", key, err)
		}
		out = append(out, api.Token{Name: t.Name, Secret: secret, Scope: scope, Reporter: t.Reporter})
	}
	return out, nil
}

// dashboardCredentials are the secrets that log in to the dashboard: the
// API token (administrator), the configured passwords, and the admin and
// read tokens of http.tokens with their role.
func dashboardCredentials(cfg *config.Config) ([]dashboard.Credential, error) {
	tok, _, err := ResolveAPIToken(cfg, false)
	if err != nil {
		return nil, err
	}
	admin, read, err := cfg.HTTP.Dashboard.Passwords()
	if err != nil {
		return nil, err
	}
	creds := []dashboard.Credential{
		{Name: "api-token", Secret: tok, Role: dashboard.RoleAdmin},
		{Name: "admin-password", Secret: admin, Role: dashboard.RoleAdmin},
		{Name: "read-password", Secret: read, Role: dashboard.RoleRead},
	}
	tokens, err := scopedTokens(cfg, tok)
	if err != nil {
		return nil, err
	}
	for _, t := range tokens {
		switch t.Scope {
		case api.ScopeAdmin:
			creds = append(creds, dashboard.Credential{Name: "token:" + t.Name, Secret: t.Secret, Role: dashboard.RoleAdmin})
		case api.ScopeRead:
			creds = append(creds, dashboard.Credential{Name: "token:" + t.Name, Secret: t.Secret, Role: dashboard.RoleRead})
		}
	}
	return creds, nil
}

// newDashboard builds the dashboard over eng (nil when it is disabled);
// fleet, when not nil, shows the fleet's nodes on the now page.
func newDashboard(cfg *config.Config, eng *campaign.Engine, fleet dashboard.FleetStatus, purges dashboard.Purges, log *slog.Logger) (*dashboard.Handler, error) {
	if !cfg.HTTP.Dashboard.Enabled {
		return nil, nil
	}
	creds, err := dashboardCredentials(cfg)
	if err != nil {
		return nil, err
	}
	return dashboard.New(eng.Reader, eng.Ingester, dashboard.Options{Credentials: creds, Logger: log, Fleet: fleet, Purges: purges,
		SessionTTL: cfg.HTTP.Dashboard.SessionTTL.D(), SecureCookie: cfg.HTTP.Dashboard.SecureCookie})
}

// daemon is the state of a running daemon.
type daemon struct {
	opts    Options
	cfg     *config.Config // the running configuration, replaced on reload
	log     *slog.Logger
	rt      *Runtime
	met     *metrics.Metrics
	srv     *milter.Server
	apiH    *apiSwitch
	sockH   *apiSwitch                        // the report socket's handler (api.socket)
	ingest  atomic.Pointer[campaign.Ingester] // the current engine's, for the spool's goroutine
	dash    *dashboard.Handler                // nil when disabled
	ready   atomic.Bool
	httpSrv *http.Server // nil without an HTTP listener
	fleet   *fleetMember // nil standalone
	// limiter bounds each reporter's reports (reports.reporter_limit),
	// across reloads: every engine the daemon builds takes it.
	limiter *campaign.ReporterLimiter
	zap     *zapper                         // nil when zero-hour purge is off
	eng     atomic.Pointer[campaign.Engine] // the current engine, for zap's purger
}

// newAPIHandler is the /v1 API over eng, with the fleet's status in a
// fleet.
func (d *daemon) newAPIHandler(cfg *config.Config, eng *campaign.Engine) (http.Handler, error) {
	var fl apiFleet
	if d.fleet != nil {
		fl = apiFleet{status: d.fleet.status, forget: d.fleet.forget, removeServer: d.fleet.removeServer}
	}
	return newAPIHandler(cfg, eng, d.rt.Store, d.log, d.met, fl, d.apiPurges())
}

// Run runs the daemon until ctx ends (then it drains the sessions in
// flight within milter.shutdown_timeout and returns nil) or the milter
// server fails. SIGHUP reloads the configuration, lexicon and model
// without dropping connections; a configuration that does not load keeps
// the running one.
func Run(ctx context.Context, o Options) error {
	if o.LogOutput == nil {
		o.LogOutput = os.Stderr
	}
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	log := NewLogger(cfg, o.LogOutput)
	// Libraries that log through the standard log package (Badger's
	// adapter aside) end up in the same handler.
	slog.SetDefault(log)

	var fm *fleetMember
	if cfg.Fleet.Enabled {
		// The embedded server and the snapshot of an empty store come
		// before the store.
		if fm, err = startFleetServer(cfg, log); err != nil {
			return err
		}
	}
	rt, err := OpenRuntime(cfg, log)
	if err == nil && fm != nil {
		rt, err = fm.start(cfg, rt)
	}
	if err != nil {
		if fm != nil {
			fm.close()
		}
		if rt != nil {
			rt.Close()
		}
		return err
	}
	defer func() {
		switch err := closeWithin(rt.Close, cfg.Milter.ShutdownTimeout.D()); {
		case errors.Is(err, store.ErrDiskFull):
			// Nothing lost: the store left its write-ahead log for the
			// next start rather than write on a full disk (it said so).
		case err != nil:
			log.Error("close store", "store", cfg.Store.Dir, "err", err)
		}
	}()
	if fm != nil {
		defer fm.close() // before the store closes
	} else if seq, err := rt.Store.Applied(ctx); err == nil && seq > 0 {
		log.Warn("the store holds a fleet node's campaign state but fleet.enabled is false: it takes standalone changes from now on, "+
			"and would differ from the fleet's state if it rejoined; a host that rejoins starts from an empty store",
			"store", cfg.Store.Dir, "applied_event", seq)
	}
	d := &daemon{opts: o, cfg: cfg, log: log, rt: rt, met: metrics.New(), fleet: fm,
		limiter: campaign.NewReporterLimiter(cfg.Reports.ReporterLimit.Campaign(), nil)}
	rt.Engine.Ingester.SetReporterLimiter(d.limiter)
	d.met.SetBuildInfo(rt.Versions.Metrics())
	if fm != nil {
		d.met.Registry.MustRegister(fm.node.Collector())
	}
	d.apiH = &apiSwitch{met: d.met}
	d.sockH = &apiSwitch{met: d.met}
	d.ingest.Store(rt.Engine.Ingester)
	d.eng.Store(rt.Engine)
	if err := d.startZap(cfg); err != nil {
		return err
	}
	defer d.stopZap() // after the milter drained, before the store closes
	d.srv, err = milter.New(newMilterEngine(rt.Engine), d.milterOptions(cfg, log, d.met))
	if err != nil {
		return err
	}
	network, addr, _ := config.SplitListen(cfg.Milter.Listen)
	mode, _ := cfg.Milter.SocketFileMode() // validated with the configuration
	ln, err := milter.ListenSocket(network, addr, milter.SocketOptions{Mode: mode, Group: cfg.Milter.SocketGroup})
	if err != nil {
		return err
	}
	h, err := d.newAPIHandler(cfg, rt.Engine)
	if err != nil {
		ln.Close()
		return err
	}
	d.apiH.set(h)
	var fleetView dashboard.FleetStatus
	if fm != nil {
		fleetView = dashboardFleet{fm}
	}
	if d.dash, err = newDashboard(cfg, rt.Engine, fleetView, d.dashboardPurges(), log); err != nil {
		ln.Close()
		return err
	}
	if cfg.HTTP.Listen != "" {
		stop, err := d.startHTTP()
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}
	if cfg.API.Socket != "" {
		sh, err := newSocketHandler(cfg, rt.Engine.Ingester, log)
		if err != nil {
			ln.Close()
			return err
		}
		d.sockH.set(sh)
		stop, err := d.startReportSocket()
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}

	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	if cfg.API.SpoolDir != "" {
		sp, err := openSpool(cfg, log)
		if err != nil {
			ln.Close()
			return err
		}
		go d.runSpool(bg, sp, cfg.API.SpoolInterval.D(), cfg.HTTP.RequestTimeout.D())
	}
	// The store keeps its counts up to date as it writes: Stats is a few
	// reads, whatever the store's size.
	go d.met.RefreshStore(bg, storeMetricsInterval, func(ctx context.Context) (metrics.StoreStats, error) {
		s, err := rt.Store.Stats(ctx)
		return metrics.StoreStats{Campaigns: s.Campaigns, Active: s.Active, Allowed: s.Allowed, Revoked: s.Revoked,
			Keys: s.Keys, DiskBytes: s.DiskBytes,
			DiskFree: s.DiskFree, DiskFull: s.DiskFull, WritesRefused: s.WritesRefused}, err
	}, log)
	if fm != nil {
		go fm.expireLoop(bg, cfg.Store.ExpireInterval.D(), func() *Runtime { return d.rt })
	}
	return d.serve(ctx, ln)
}

// serve serves the milter on ln, reloading on SIGHUP, until ctx ends or
// the server fails.
func (d *daemon) serve(ctx context.Context, ln net.Listener) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	serveErr := make(chan error, 1)
	go func() { serveErr <- d.srv.Serve(ln) }()
	d.ready.Store(true)
	v := d.rt.Versions
	d.log.Info("nddmilter serving", "milter", d.cfg.Milter.Listen, "http", d.cfg.HTTP.Listen,
		"store", d.cfg.Store.Dir, "config", d.opts.describeSource(), "pid", os.Getpid(),
		"version", v.Version, "commit", v.Commit, "lexicon", v.Lexicon, "model", v.Model)

	for {
		select {
		case <-hup:
			d.reload()
			continue
		case err := <-serveErr:
			d.ready.Store(false)
			if err != nil {
				d.log.Error("milter server stopped", "err", err)
			}
			d.shutdown()
			return err
		case <-ctx.Done():
		}
		break
	}
	d.ready.Store(false)
	d.log.Info("shutting down", "sessions", d.srv.Sessions(), "timeout", d.cfg.Milter.ShutdownTimeout.D())
	d.shutdown()
	<-serveErr
	d.log.Info("stopped")
	return nil
}

// startHTTP listens on http.listen and serves /metrics, /healthz, /readyz,
// the /v1 API and the dashboard under /ui/; it records the API's address in the store directory
// for the CLI. stop removes the record.
func (d *daemon) startHTTP() (stop func(), err error) {
	cfg, log := d.cfg, d.log
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", d.met.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", d.readyz)
	// The API and the dashboard answer only the host names they are
	// reached under (DNS rebinding: api.HostCheck).
	hosts := api.NewHostCheck(cfg.HTTP.Listen, cfg.HTTP.AllowedHosts)
	mux.Handle("/v1/", hosts.Handler(d.apiH))
	if d.dash != nil {
		mux.Handle(dashboard.Prefix, hosts.Handler(d.dash))
		mux.Handle("GET /{$}", hosts.Handler(http.RedirectHandler(dashboard.Prefix, http.StatusSeeOther)))
	}
	hln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		hint := ""
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = " (another process listens there — a running nddmilter? Stop it, or set http.listen / --http, \"off\" to disable)"
		}
		return nil, fmt.Errorf("listen http %s: %w%s", cfg.HTTP.Listen, err, hint)
	}
	// Tell the CLI where the API of this store's daemon is.
	addrFile := filepath.Join(cfg.Store.Dir, AddressFile)
	if err := os.WriteFile(addrFile, []byte("http://"+hln.Addr().String()+"\n"), 0o644); err != nil {
		log.Warn("cannot record the API address for the CLI", "file", addrFile, "err", err)
	}
	maxConns := httpConnBudget(cfg.HTTP.MaxConnections, cfg.Milter.MaxSessions, nofileLimit())
	if maxConns < cfg.HTTP.MaxConnections {
		log.Warn("http.max_connections lowered to keep file descriptors for the milter (raise the process's open-files limit, e.g. LimitNOFILE)",
			"max_connections", maxConns, "configured", cfg.HTTP.MaxConnections, "open_files_limit", nofileLimit(),
			"milter.max_sessions", cfg.Milter.MaxSessions)
	}
	met := d.met
	hln = api.LimitListener(hln, api.ConnLimits{
		Max:       maxConns,
		PerAddr:   min(cfg.HTTP.MaxConnectionsPerAddress, maxConns),
		MaxAge:    cfg.HTTP.MaxConnectionAge.D(),
		OnRefused: func(string) { met.Overload("http") },
		Logger:    log,
	})
	d.httpSrv = api.NewServer(mux, api.ServerOptions{
		MaxConnAge:        cfg.HTTP.MaxConnectionAge.D(),
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout.D(),
		ReadTimeout:       cfg.HTTP.ReadTimeout.D(),
		WriteTimeout:      cfg.HTTP.WriteTimeout.D(),
		IdleTimeout:       cfg.HTTP.IdleTimeout.D(),
		MaxHeaderBytes:    cfg.HTTP.MaxHeaderBytes,
		MaxBody:           cfg.HTTP.MaxBodyBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	})
	go func() {
		if err := d.httpSrv.Serve(hln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
		}
	}()
	return func() { os.Remove(addrFile) }, nil
}

// storeMetricsInterval is the period of the store gauges.
const storeMetricsInterval = 5 * time.Second

// readyz answers 200 while the daemon serves and its store answers (its
// counts: a few reads, whatever the store's size).
func (d *daemon) readyz(w http.ResponseWriter, r *http.Request) {
	if !d.ready.Load() {
		http.Error(w, "starting or stopping", http.StatusServiceUnavailable)
		return
	}
	sctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if _, err := d.rt.Store.Stats(sctx); err != nil {
		http.Error(w, "store: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if d.fleet == nil {
		fmt.Fprintln(w, "ready")
		return
	}
	line, ok := d.fleet.readiness(sctx)
	if !ok {
		http.Error(w, line, http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
	fmt.Fprintln(w, line)
}

// ErrCloseTimeout says the store did not close in time: the process exits
// without it (a store whose directory was deleted, or on a disk that
// fails every write, can make Badger retry its flush forever).
var ErrCloseTimeout = errors.New("the store did not close in time")

// closeWithin runs close and waits at most d for it; on timeout it returns
// ErrCloseTimeout and leaves close running, for the process to exit.
// Acknowledged reports are in the store's write-ahead log already (a write
// is acknowledged once Badger committed it, synced), so nothing
// acknowledged is lost when the close is cut short.
func closeWithin(close func() error, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- close() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("%w (%s): exiting without it", ErrCloseTimeout, d)
	}
}

// shutdown stops the milter server (draining its sessions within
// milter.shutdown_timeout) and the HTTP server.
func (d *daemon) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Milter.ShutdownTimeout.D())
	defer cancel()
	if err := d.srv.Shutdown(ctx); err != nil {
		d.log.Warn("milter shutdown", "err", err)
	}
	if d.httpSrv != nil {
		hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer hcancel()
		if err := d.httpSrv.Shutdown(hctx); err != nil {
			d.log.Warn("http shutdown", "err", err)
		}
	}
}

// reload re-reads the configuration, lexicon and model and swaps in a new
// engine; on any error the running configuration stays.
func (d *daemon) reload() {
	log, met, old := d.log, d.met, d.cfg
	log.Info("SIGHUP: reloading", "config", d.opts.describeSource())
	fail := func(err error) {
		met.Reload(false)
		met.Error("reload")
		log.Error("reload failed; keeping the running configuration", "err", err)
	}
	cfg, err := d.opts.Config()
	if err != nil {
		fail(err)
		return
	}
	keepRestartSettings(cfg, old, log)
	keepZapSettings(cfg, old, log)
	eng, vers, err := buildEngine(cfg, d.rt.Store, log)
	if err != nil {
		fail(err)
		return
	}
	eng.Ingester.SetReporterLimiter(d.limiter)
	h, err := d.newAPIHandler(cfg, eng)
	if err != nil {
		fail(err)
		return
	}
	var sh http.Handler
	if cfg.API.Socket != "" {
		if sh, err = newSocketHandler(cfg, eng.Ingester, log); err != nil {
			fail(err)
			return
		}
	}
	var creds []dashboard.Credential
	if d.dash != nil {
		if creds, err = dashboardCredentials(cfg); err != nil {
			fail(err)
			return
		}
	}
	if d.fleet != nil {
		wireFleet(eng, d.fleet.node)
		d.fleet.node.SetSettings(FleetSettings(cfg, vers))
	}
	if err := d.srv.Update(newMilterEngine(eng), d.milterOptions(cfg, log, met)); err != nil {
		fail(err)
		return
	}
	d.apiH.set(h)
	if sh != nil {
		d.sockH.set(sh)
	}
	d.ingest.Store(eng.Ingester)
	d.eng.Store(eng)
	d.limiter.SetLimit(cfg.Reports.ReporterLimit.Campaign())
	if d.dash != nil {
		d.dash.Update(eng.Reader, eng.Ingester, creds)
	}
	d.cfg = cfg
	d.rt.Engine = eng
	d.rt.Versions = vers
	met.SetBuildInfo(vers.Metrics())
	met.Reload(true)
	log.Info("reloaded")
}

// keepRestartSettings gives cfg the running values of the settings that
// change only on restart, warning about those the file changed.
func keepRestartSettings(cfg, old *config.Config, log *slog.Logger) {
	for _, c := range []struct{ key, was, now string }{
		{"milter.listen", old.Milter.Listen, cfg.Milter.Listen},
		{"milter.socket_mode", old.Milter.SocketMode, cfg.Milter.SocketMode},
		{"milter.socket_group", old.Milter.SocketGroup, cfg.Milter.SocketGroup},
		{"http.listen", old.HTTP.Listen, cfg.HTTP.Listen},
		{"http.allowed_hosts", fmt.Sprint(old.HTTP.AllowedHosts), fmt.Sprint(cfg.HTTP.AllowedHosts)},
		{"store.dir", old.Store.Dir, cfg.Store.Dir},
		{"api.socket", old.API.Socket, cfg.API.Socket},
		{"api.socket_mode", old.API.SocketMode, cfg.API.SocketMode},
		{"api.socket_group", old.API.SocketGroup, cfg.API.SocketGroup},
		{"api.spool_dir", old.API.SpoolDir, cfg.API.SpoolDir},
		{"http.dashboard.enabled", fmt.Sprint(old.HTTP.Dashboard.Enabled), fmt.Sprint(cfg.HTTP.Dashboard.Enabled)},
		{"http.dashboard.session_ttl", old.HTTP.Dashboard.SessionTTL.D().String(), cfg.HTTP.Dashboard.SessionTTL.D().String()},
		{"http.dashboard.secure_cookie", fmt.Sprint(old.HTTP.Dashboard.SecureCookie), fmt.Sprint(cfg.HTTP.Dashboard.SecureCookie)},
	} {
		if c.was != c.now {
			log.Warn("setting changes only on restart", "key", c.key, "running", c.was, "file", c.now)
		}
	}
	// The fleet node and its embedded server keep the options they
	// started with; a restarted node resumes from its applied sequence.
	if !reflect.DeepEqual(old.Fleet, cfg.Fleet) {
		log.Warn("setting changes only on restart (a restarted fleet node resumes from its applied sequence)", "key", "fleet")
		cfg.Fleet = old.Fleet
	}
	cfg.Milter.Listen, cfg.HTTP.Listen, cfg.Store.Dir = old.Milter.Listen, old.HTTP.Listen, old.Store.Dir
	cfg.HTTP.AllowedHosts = old.HTTP.AllowedHosts
	cfg.Milter.SocketMode, cfg.Milter.SocketGroup = old.Milter.SocketMode, old.Milter.SocketGroup
	cfg.API.Socket, cfg.API.SocketMode, cfg.API.SocketGroup = old.API.Socket, old.API.SocketMode, old.API.SocketGroup
	cfg.API.SpoolDir, cfg.API.SpoolInterval = old.API.SpoolDir, old.API.SpoolInterval
	od, nd := old.HTTP.Dashboard, &cfg.HTTP.Dashboard
	nd.Enabled, nd.SessionTTL, nd.SecureCookie = od.Enabled, od.SessionTTL, od.SecureCookie
}
