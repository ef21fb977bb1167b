package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/metrics"
	"github.com/nddmilter/nddmilter/internal/milter"
)

type serveFlags struct {
	listen string
	http   string
}

func newServeCmd(gf *globalFlags) *cobra.Command {
	var sf serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the milter daemon (Postfix/Sendmail) with its HTTP API and metrics",
		Long: `Run the milter: Postfix or Sendmail connect to --listen and every message is
checked against the known campaigns. The HTTP listener serves the report
API (/v1/...), Prometheus /metrics, /healthz and /readyz.

Without --config the embedded defaults apply (see config/nddmilter.yaml);
--store, --listen and --http override the file. SIGHUP reloads the
configuration, lexicon and model without dropping connections; SIGTERM or
SIGINT stop the daemon after the sessions in flight.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runServe(cmd.Context(), gf, sf)
		},
	}
	cmd.Flags().StringVar(&sf.listen, "listen", "", "milter socket, inet:HOST:PORT or unix:/path (overrides milter.listen; default "+config.DefaultMilterListen+")")
	cmd.Flags().StringVar(&sf.http, "http", "", "HTTP listener HOST:PORT, \"off\" to disable (overrides http.listen; default "+config.DefaultHTTPListen+")")
	return cmd
}

// serveConfig loads the configuration and applies the flags.
func serveConfig(gf *globalFlags, sf serveFlags) (*config.Config, error) {
	cfg, err := loadConfig(gf)
	if err != nil {
		return nil, err
	}
	if sf.listen != "" {
		cfg.Milter.Listen = sf.listen
	}
	switch sf.http {
	case "":
	case "off":
		cfg.HTTP.Listen = ""
	default:
		cfg.HTTP.Listen = sf.http
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("flags: %w", err)
	}
	return cfg, nil
}

func milterOptions(cfg *config.Config, log *slog.Logger, met *metrics.Metrics) milter.Options {
	m := cfg.Milter
	o := milter.Options{
		MaxBodyBytes:     m.MaxBodyBytes,
		CheckTimeout:     m.CheckTimeout.D(),
		IdleTimeout:      m.IdleTimeout.D(),
		OnError:          m.OnError,
		MaxSessions:      m.MaxSessions,
		MaxBufferedBytes: m.MaxBufferedBytes,
		HeaderPrefix:     m.HeaderPrefix,
		NoAcceptHeader:   !m.HeaderOnAccept,
		RejectWith:       m.RejectWith,
		RejectText:       m.RejectText,
		TempfailText:     m.TempfailText,
		QuarantineReason: m.QuarantineReason,
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
	return o
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
			a.met.Report(r.URL.Query().Get("kind"))
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

func newAPIHandler(cfg *config.Config, eng *campaign.Engine, log *slog.Logger, met *metrics.Metrics) (http.Handler, error) {
	tok, generated, err := resolveAPIToken(cfg, true)
	if err != nil {
		return nil, err
	}
	if generated {
		log.Info("generated the /v1 API token (set http.token or http.token_file to choose one)",
			"file", filepath.Join(cfg.Store.Dir, apiTokenFile))
	}
	return api.NewHandler(eng, api.Options{Token: tok, MaxBody: cfg.HTTP.MaxBodyBytes, Logger: log,
		RequestTimeout: cfg.HTTP.RequestTimeout.D(), MaxInflight: cfg.HTTP.MaxInflight, Metrics: met}), nil
}

func runServe(ctx context.Context, gf *globalFlags, sf serveFlags) error {
	cfg, err := serveConfig(gf, sf)
	if err != nil {
		return err
	}
	log := newLogger(cfg, os.Stderr)
	// Libraries that log through the standard log package (Badger's
	// adapter aside) end up in the same handler.
	slog.SetDefault(log)

	rt, err := openRuntimeWith(cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := rt.Close(); err != nil {
			log.Error("close store", "err", err)
		}
	}()
	met := metrics.New()
	srv, err := milter.New(rt.Engine, milterOptions(cfg, log, met))
	if err != nil {
		return err
	}
	network, addr, _ := config.SplitListen(cfg.Milter.Listen)
	mode, _ := cfg.Milter.SocketFileMode() // validated with the configuration
	ln, err := milter.ListenSocket(network, addr, milter.SocketOptions{Mode: mode, Group: cfg.Milter.SocketGroup})
	if err != nil {
		return err
	}

	var ready atomic.Bool
	apiH := &apiSwitch{met: met}
	h, err := newAPIHandler(cfg, rt.Engine, log, met)
	if err != nil {
		ln.Close()
		return err
	}
	apiH.set(h)
	var httpSrv *http.Server
	if cfg.HTTP.Listen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", met.Handler())
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, "ok")
		})
		mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
			if !ready.Load() {
				http.Error(w, "starting or stopping", http.StatusServiceUnavailable)
				return
			}
			sctx, cancel := context.WithTimeout(r.Context(), time.Second)
			defer cancel()
			if _, err := rt.Store.Stats(sctx); err != nil {
				http.Error(w, "store: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ready")
		})
		mux.Handle("/v1/", apiH)
		hln, err := net.Listen("tcp", cfg.HTTP.Listen)
		if err != nil {
			ln.Close()
			hint := ""
			if errors.Is(err, syscall.EADDRINUSE) {
				hint = " (another process listens there — a running nddmilter? Stop it, or set http.listen / --http, \"off\" to disable)"
			}
			return fmt.Errorf("listen http %s: %w%s", cfg.HTTP.Listen, err, hint)
		}
		// Tell the CLI where the API of this store's daemon is.
		addrFile := filepath.Join(cfg.Store.Dir, apiAddressFile)
		if err := os.WriteFile(addrFile, []byte("http://"+hln.Addr().String()+"\n"), 0o644); err != nil {
			log.Warn("cannot record the API address for the CLI", "file", addrFile, "err", err)
		}
		defer os.Remove(addrFile)
		httpSrv = api.NewServer(mux, api.ServerOptions{
			ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout.D(),
			ReadTimeout:       cfg.HTTP.ReadTimeout.D(),
			WriteTimeout:      cfg.HTTP.WriteTimeout.D(),
			IdleTimeout:       cfg.HTTP.IdleTimeout.D(),
			MaxHeaderBytes:    cfg.HTTP.MaxHeaderBytes,
			MaxBody:           cfg.HTTP.MaxBodyBytes,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		})
		go func() {
			if err := httpSrv.Serve(hln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server", "err", err)
			}
		}()
	}

	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	go met.RefreshStore(bg, 15*time.Second, func(ctx context.Context) (metrics.StoreStats, error) {
		s, err := rt.Store.Stats(ctx)
		return metrics.StoreStats{Campaigns: s.Campaigns, Keys: s.Keys, DiskBytes: s.DiskBytes,
			DiskFree: s.DiskFree, DiskFull: s.DiskFull, WritesRefused: s.WritesRefused}, err
	}, log)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	ready.Store(true)
	log.Info("nddmilter serving", "milter", cfg.Milter.Listen, "http", cfg.HTTP.Listen,
		"store", cfg.Store.Dir, "config", describeSource(gf), "pid", os.Getpid())

	for {
		select {
		case <-hup:
			reload(gf, sf, cfg, rt, srv, apiH, met, log)
			continue
		case err := <-serveErr:
			ready.Store(false)
			if err != nil {
				log.Error("milter server stopped", "err", err)
			}
			shutdown(srv, httpSrv, cfg, log)
			return err
		case <-ctx.Done():
		}
		break
	}
	ready.Store(false)
	log.Info("shutting down", "sessions", srv.Sessions(), "timeout", cfg.Milter.ShutdownTimeout.D())
	shutdown(srv, httpSrv, cfg, log)
	<-serveErr
	log.Info("stopped")
	return nil
}

func shutdown(srv *milter.Server, httpSrv *http.Server, cfg *config.Config, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Milter.ShutdownTimeout.D())
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("milter shutdown", "err", err)
	}
	if httpSrv != nil {
		hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer hcancel()
		if err := httpSrv.Shutdown(hctx); err != nil {
			log.Warn("http shutdown", "err", err)
		}
	}
}

// reload re-reads the configuration, lexicon and model and swaps in a new
// engine; on any error the running configuration stays.
func reload(gf *globalFlags, sf serveFlags, old *config.Config, rt *runtimeEnv, srv *milter.Server, apiH *apiSwitch, met *metrics.Metrics, log *slog.Logger) {
	log.Info("SIGHUP: reloading", "config", describeSource(gf))
	fail := func(err error) {
		met.Reload(false)
		met.Error("reload")
		log.Error("reload failed; keeping the running configuration", "err", err)
	}
	cfg, err := serveConfig(gf, sf)
	if err != nil {
		fail(err)
		return
	}
	for _, c := range []struct{ key, was, now string }{
		{"milter.listen", old.Milter.Listen, cfg.Milter.Listen},
		{"milter.socket_mode", old.Milter.SocketMode, cfg.Milter.SocketMode},
		{"milter.socket_group", old.Milter.SocketGroup, cfg.Milter.SocketGroup},
		{"http.listen", old.HTTP.Listen, cfg.HTTP.Listen},
		{"store.dir", old.Store.Dir, cfg.Store.Dir},
	} {
		if c.was != c.now {
			log.Warn("setting changes only on restart", "key", c.key, "running", c.was, "file", c.now)
		}
	}
	// Settings that need a restart keep their running values.
	cfg.Milter.Listen, cfg.HTTP.Listen, cfg.Store.Dir = old.Milter.Listen, old.HTTP.Listen, old.Store.Dir
	cfg.Milter.SocketMode, cfg.Milter.SocketGroup = old.Milter.SocketMode, old.Milter.SocketGroup
	eng, err := buildEngine(cfg, rt.Store, log)
	if err != nil {
		fail(err)
		return
	}
	h, err := newAPIHandler(cfg, eng, log, met)
	if err != nil {
		fail(err)
		return
	}
	if err := srv.Update(eng, milterOptions(cfg, log, met)); err != nil {
		fail(err)
		return
	}
	apiH.set(h)
	*old = *cfg
	rt.Engine = eng
	met.Reload(true)
	log.Info("reloaded")
}
