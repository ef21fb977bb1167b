package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/store"
)

// defaultStoreDir is where the store lives when neither --store nor the
// configuration names one.
const defaultStoreDir = config.DefaultStoreDir

// runtimeEnv is what the commands that work on a store need: the
// effective configuration, the store and the engine over it.
type runtimeEnv struct {
	Cfg    *config.Config
	Store  *store.Badger
	Engine *campaign.Engine
	Log    *slog.Logger
}

// loadConfig reads --config (embedded defaults without it) and applies
// the --store flag.
func loadConfig(gf *globalFlags) (*config.Config, error) {
	cfg, err := config.Load(gf.config)
	if err != nil {
		return nil, err
	}
	if gf.store != "" {
		cfg.Store.Dir = gf.store
	}
	return cfg, nil
}

// newLogger builds the logger the configuration asks for, writing to w.
func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
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

// storeOptions maps the configuration to the store's options.
func storeOptions(cfg *config.Config, log *slog.Logger) store.Options {
	return store.Options{
		Expiry:         cfg.Store.Expiry.D(),
		ExpiryInterval: cfg.Store.ExpireInterval.D(),
		MinFreeBytes:   cfg.Store.MinFreeBytes,
		Logger:         log,
	}
}

// engineOptions maps the configuration to the engine's options.
func engineOptions(cfg *config.Config) campaign.Options {
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
		DisableANDD: !cfg.ANDD.Enabled,
		Policy:      cfg.Policy,
		Expiry:      cfg.Store.Expiry.D(),
	}
}

// loadConfigLexicon reads signatures.lexicon, or the embedded lexicon.
func loadConfigLexicon(cfg *config.Config) (*imatchbag.Lexicon, error) {
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

// loadConfigModel reads andd.model, or the embedded model; nil when ANDD is off.
func loadConfigModel(cfg *config.Config) (*andd.Model, error) {
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

// buildEngine loads the lexicon and the model the configuration names and
// builds an engine over st. The daemon calls it again on SIGHUP.
func buildEngine(cfg *config.Config, st store.Store, log *slog.Logger) (*campaign.Engine, error) {
	lex, err := loadConfigLexicon(cfg)
	if err != nil {
		return nil, err
	}
	model, err := loadConfigModel(cfg)
	if err != nil {
		return nil, err
	}
	eng, err := campaign.New(st, lex, model, engineOptions(cfg), log)
	if err != nil {
		return nil, fmt.Errorf("build engine: %w", err)
	}
	return eng, nil
}

// openRuntime loads the configuration (--config, or the embedded
// defaults; --store overrides store.dir), opens the store and builds the
// engine. Logs go to stderr in the configured format.
func openRuntime(ctx context.Context, gf *globalFlags) (*runtimeEnv, error) {
	cfg, err := loadConfig(gf)
	if err != nil {
		return nil, err
	}
	log := newLogger(cfg, os.Stderr)
	return openRuntimeWith(cfg, log)
}

// openRuntimeWith opens the store and builds the engine for cfg.
func openRuntimeWith(cfg *config.Config, log *slog.Logger) (*runtimeEnv, error) {
	st, err := store.Open(cfg.Store.Dir, storeOptions(cfg, log))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", cfg.Store.Dir, err)
	}
	eng, err := buildEngine(cfg, st, log)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &runtimeEnv{Cfg: cfg, Store: st, Engine: eng, Log: log}, nil
}

// Close releases the store.
func (r *runtimeEnv) Close() error { return r.Store.Close() }

// describeSource names where the configuration came from, for logs.
func describeSource(gf *globalFlags) string {
	if gf.config == "" {
		return "embedded defaults"
	}
	return strings.TrimSpace(gf.config)
}

// apiTokenFile is the file, inside the store directory, holding the API
// token that `serve` generates when the configuration sets none. The CLI
// reads it to reach a running daemon without any configuration.
const apiTokenFile = "api-token"

// apiAddressFile, inside the store directory, holds the URL of the running
// daemon's HTTP API; `serve` writes it at start and removes it at exit.
const apiAddressFile = "api-address"

// runningAPIURL returns the URL recorded by a daemon serving the store in
// dir, or "".
func runningAPIURL(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, apiAddressFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// resolveAPIToken returns the token of the /v1 API: http.token or
// http.token_file when set, else the token kept in the store directory.
// With generate, a missing token file is created (32 random bytes, hex,
// mode 0600) and generated reports it.
func resolveAPIToken(cfg *config.Config, generate bool) (tok string, generated bool, err error) {
	tok, err = cfg.HTTP.ReadToken()
	if err != nil || tok != "" {
		return tok, false, err
	}
	path := filepath.Join(cfg.Store.Dir, apiTokenFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if tok = strings.TrimSpace(string(b)); tok != "" {
			return tok, false, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("read API token: %w", err)
	}
	if !generate {
		return "", false, nil
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", false, fmt.Errorf("generate API token: %w", err)
	}
	tok = hex.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("write API token %s: %w", path, err)
	}
	return tok, true, nil
}

// requireStore fails when the store directory named by --store or the
// configuration does not exist, saying how to get one.
func requireStore(gf *globalFlags) error {
	cfg, err := loadConfig(gf)
	if err != nil {
		return err
	}
	if _, err := os.Stat(cfg.Store.Dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no store at %s: feed junk reports first (nddmilter report), "+
				"or name the store with --store DIR or store.dir in --config", cfg.Store.Dir)
		}
		return fmt.Errorf("store %s: %w", cfg.Store.Dir, err)
	}
	return nil
}
