package store

import (
	"errors"
	"log/slog"
	"time"
)

// STUB — the store engineer replaces this file.

// Options configure the Badger store. Zero values select defaults.
type Options struct {
	Expiry   time.Duration // default 30 days
	ReadOnly bool
	Logger   *slog.Logger
}

// Badger is the Badger-backed Store.
type Badger struct{ Store }

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts Options) (*Badger, error) {
	return nil, errors.New("store.Open: not implemented yet")
}
