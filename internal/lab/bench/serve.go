package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/lab/djmilter"
	"github.com/nddmilter/nddmilter/internal/milter"
)

// ServeOptions configure Serve (the flags of `nddlab bench serve`).
type ServeOptions struct {
	// Daemon is run as `nddmilter serve` runs it (ConfigPath, StoreDir,
	// MilterListen, HTTPListen).
	Daemon daemon.Options
	// Server is the milter protocol server facing the MTA: "own" (the
	// daemon's), "d--j" or "d--j-buffered" (github.com/d--j/go-milter
	// relaying every connection to the daemon's own server, see
	// internal/lab/djmilter).
	Server string
}

// Serve runs the daemon until ctx ends. With a d--j server, the daemon's
// own server listens on a private unix socket and the d--j server on the
// milter address (milter.listen or Daemon.MilterListen), relaying to it;
// its negotiation lines go to standard error in the configured log format.
func Serve(ctx context.Context, o ServeOptions) error {
	switch o.Server {
	case "own":
		return daemon.Run(ctx, o.Daemon)
	case "d--j", "d--j-buffered":
	default:
		return fmt.Errorf("bench serve: --server %q: want own, d--j or d--j-buffered", o.Server)
	}
	cfg, err := o.Daemon.Config()
	if err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	network, addr, err := config.SplitListen(cfg.Milter.Listen)
	if err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	mode, err := cfg.Milter.SocketFileMode()
	if err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	dir, err := os.MkdirTemp("", "nddlab-bench-serve-")
	if err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	defer os.RemoveAll(dir)
	own := filepath.Join(dir, "own.sock")
	ln, err := milter.ListenSocket(network, addr, milter.SocketOptions{Mode: mode, Group: cfg.Milter.SocketGroup})
	if err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	front := djmilter.NewRelay("unix", own, djmilter.Options{
		Buffered: o.Server == "d--j-buffered",
		Logger:   daemon.NewLogger(cfg, os.Stderr),
	})
	served := make(chan error, 1)
	go func() { served <- front.Serve(ln) }()

	do := o.Daemon
	do.MilterListen = "unix:" + own
	err = daemon.Run(ctx, do)
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(err, front.Shutdown(sctx), <-served)
}
