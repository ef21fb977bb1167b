// Package daemon runs nddmilter: it builds the store and the engine the
// configuration describes, serves the milter and the HTTP API (Run),
// reloads on SIGHUP and drains on SIGTERM. For the command-line tools it
// opens the same store and engine (OpenRuntime; OpenToolRuntime over a
// fleet node's store without its daemon) and finds the API of the daemon
// that holds a store (RunningAPI); the tools choose between the two.
package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/buildinfo"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/metrics"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/store"
)

// LoadConfig reads the configuration file at path (the embedded defaults
// when path is "") and applies storeDir over store.dir when it is set.
func LoadConfig(path, storeDir string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if storeDir != "" {
		cfg.Store.Dir = storeDir
	}
	return cfg, nil
}

// NewLogger builds the logger the configuration asks for, writing to w.
func NewLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	switch cfg.Log.Level {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	ho := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

// StoreOptions maps the configuration to the store's options. In a
// fleet, expiry is a replicated decision (internal/fleet), never the
// store's own.
func StoreOptions(cfg *config.Config, log *slog.Logger) store.Options {
	o := store.Options{
		Expiry:         cfg.Store.Expiry.D(),
		ExpiryInterval: cfg.Store.ExpireInterval.D(),
		MinFreeBytes:   cfg.Store.MinFreeBytes,
		Logger:         log,
	}
	if cfg.Fleet.Enabled {
		o.Expiry = -1
	}
	return o
}

// EngineOptions maps the configuration to the engine's options.
func EngineOptions(cfg *config.Config) campaign.Options {
	return campaign.Options{
		Tokens: mime.TokenOptions{
			MinLen:    cfg.Signatures.Tokens.MinLen,
			MaxDigits: cfg.Signatures.Tokens.MaxDigits,
			MaxLen:    cfg.Signatures.Tokens.MaxLen,
		},
		IMatch: imatchbag.Options{
			K:         cfg.Signatures.K,
			MinTerms:  cfg.Signatures.MinTerms,
			MinRatio:  cfg.Signatures.MinRatio,
			MinUnique: cfg.Signatures.MinUnique,
		},
		DisableANDD:     !cfg.ANDD.Enabled,
		ANDDExactCosine: cfg.ANDD.ExactCosine,
		Policy:          cfg.Policy,
		Expiry:          cfg.Store.Expiry.D(),
		ReporterRealm:   cfg.Reports.Realm,
	}
}

// LoadLexicon reads signatures.lexicon, or the embedded lexicon.
func LoadLexicon(cfg *config.Config) (*imatchbag.Lexicon, error) {
	if cfg.Signatures.Lexicon == "" {
		lex, err := imatchbag.DefaultLexicon()
		if err != nil {
			return nil, fmt.Errorf("embedded lexicon: %w", err)
		}
		return lex, nil
	}
	f, err := os.Open(cfg.Signatures.Lexicon)
	if err != nil {
		return nil, fmt.Errorf("signatures.lexicon: %w", err)
	}
	lex, err := imatchbag.ReadLexiconFile(f)
	if err != nil {
		return nil, fmt.Errorf("signatures.lexicon %s: %w", cfg.Signatures.Lexicon, err)
	}
	return lex, nil
}

// LoadModel reads andd.model, or the embedded model; nil when ANDD is off.
func LoadModel(cfg *config.Config) (*andd.Model, error) {
	if !cfg.ANDD.Enabled {
		return nil, nil
	}
	if cfg.ANDD.Model == "" {
		m, err := andd.DefaultModel()
		if err != nil {
			return nil, fmt.Errorf("embedded model: %w", err)
		}
		return m, nil
	}
	f, err := os.Open(cfg.ANDD.Model)
	if err != nil {
		return nil, fmt.Errorf("andd.model: %w", err)
	}
	defer f.Close()
	m, err := andd.ReadModel(f)
	if err != nil {
		return nil, fmt.Errorf("andd.model %s: %w", cfg.ANDD.Model, err)
	}
	return m, nil
}

// BuildEngine loads the lexicon and the model the configuration names and
// builds an engine over st. The daemon calls it again on SIGHUP.
func BuildEngine(cfg *config.Config, st store.Store, log *slog.Logger) (*campaign.Engine, error) {
	eng, _, err := buildEngine(cfg, st, log)
	return eng, err
}

// buildEngine is BuildEngine, also telling the versions of what it loaded.
func buildEngine(cfg *config.Config, st store.Store, log *slog.Logger) (*campaign.Engine, Versions, error) {
	lex, err := LoadLexicon(cfg)
	if err != nil {
		return nil, Versions{}, err
	}
	model, err := LoadModel(cfg)
	if err != nil {
		return nil, Versions{}, err
	}
	eng, err := campaign.New(st, lex, model, EngineOptions(cfg), log)
	if err != nil {
		return nil, Versions{}, fmt.Errorf("build engine: %w", err)
	}
	return eng, NewVersions(lex, model), nil
}

// Versions names the running build and what its signatures depend on.
type Versions struct {
	buildinfo.Info
	// SignatureVersion lists the signature wire formats, e.g.
	// "imatch=1,andd=1".
	SignatureVersion string `json:"signature_version"`
	// Lexicon is the lexicon's id (8 hex digits); Model the ANDD model's
	// (the first 8 hex digits of the SHA-256 of its JSON), or "off".
	Lexicon string `json:"lexicon"`
	Model   string `json:"model"`
}

// NewVersions describes this build with lex and model (nil: ANDD off).
func NewVersions(lex *imatchbag.Lexicon, model *andd.Model) Versions {
	v := Versions{
		Info:             buildinfo.Get(),
		SignatureVersion: fmt.Sprintf("imatch=%d,andd=%d", imatchbag.SignatureVersion, andd.SketchVersion),
		Lexicon:          fmt.Sprintf("%08x", lex.ID()),
		Model:            "off",
	}
	if model != nil {
		h := sha256.New()
		if _, err := model.WriteTo(h); err == nil {
			v.Model = hex.EncodeToString(h.Sum(nil))[:8]
		}
	}
	return v
}

// Metrics returns v as the labels of nddmilter_build_info.
func (v Versions) Metrics() metrics.BuildInfo {
	return metrics.BuildInfo{Version: v.Version, Commit: v.Commit, GoVersion: v.GoVersion,
		SignatureVersion: v.SignatureVersion, Lexicon: v.Lexicon, Model: v.Model}
}

// Runtime is what works on a store: the effective configuration, the
// store and the engine over it.
type Runtime struct {
	Config   *config.Config
	Store    *store.Badger
	Engine   *campaign.Engine
	Log      *slog.Logger
	Versions Versions // of the engine's lexicon and model
}

// OpenRuntime opens the store of cfg and builds the engine over it. When
// another process holds the store, the error wraps store.ErrLocked.
func OpenRuntime(cfg *config.Config, log *slog.Logger) (*Runtime, error) {
	if err := CheckStoreOwner(cfg.Store.Dir); err != nil {
		return nil, err
	}
	st, err := store.Open(cfg.Store.Dir, StoreOptions(cfg, log))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", cfg.Store.Dir, err)
	}
	eng, vers, err := buildEngine(cfg, st, log)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &Runtime{Config: cfg, Store: st, Engine: eng, Log: log, Versions: vers}, nil
}

// Close releases the store.
func (r *Runtime) Close() error { return r.Store.Close() }
