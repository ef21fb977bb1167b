package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/store"
)

// defaultStoreDir is where the store lives when neither --store nor the
// configuration names one.
const defaultStoreDir = "nddmilter-data"

// runtimeEnv is what the commands that work on a store need: the store
// and the engine over it. (The daemon engineer extends this with the
// effective configuration.)
type runtimeEnv struct {
	Store  *store.Badger
	Engine *campaign.Engine
	Log    *slog.Logger
}

// openRuntime opens the store and builds the engine from the global flags
// (and, later, the configuration file).
func openRuntime(ctx context.Context, gf *globalFlags) (*runtimeEnv, error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	dir := gf.store
	if dir == "" {
		dir = defaultStoreDir
	}
	st, err := store.Open(dir, store.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("load lexicon: %w", err)
	}
	model, err := andd.DefaultModel()
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("load model: %w", err)
	}
	eng, err := campaign.New(st, lex, model, campaign.Options{}, log)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("build engine: %w", err)
	}
	return &runtimeEnv{Store: st, Engine: eng, Log: log}, nil
}

// Close releases the store.
func (r *runtimeEnv) Close() error { return r.Store.Close() }
