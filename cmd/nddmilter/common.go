package main

import (
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/daemon"
)

// defaultStoreDir is where the store lives when neither --store nor the
// configuration names one.
const defaultStoreDir = config.DefaultStoreDir

// loadConfig reads --config (embedded defaults without it) and applies
// the --store flag.
func loadConfig(gf *globalFlags) (*config.Config, error) {
	return daemon.LoadConfig(gf.config, gf.store)
}
