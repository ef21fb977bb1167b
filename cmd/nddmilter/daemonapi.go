package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/daemon"
)

// errNoDaemon: a command that goes through the running daemon's API
// found none.
var errNoDaemon = errors.New("no running nddmilter daemon")

// runningAPI is the URL of the API of the daemon holding cfg's store and
// its token: --token (or env NDDMILTER_API_TOKEN) when given, else the
// one daemon.RunningAPI finds; either is "" when unknown.
func runningAPI(cfg *config.Config, af *apiFlags) (url, token string) {
	url, token = daemon.RunningAPI(cfg)
	if t := af.tokenOrEnv(); t != "" {
		token = t
	}
	return url, token
}

// daemonAPI returns the client of the API of the daemon holding cfg's
// store (cause: the store's lock error), found by runningAPI, and says
// on stderr that it is used. A daemon that recorded no URL while nothing
// answers at http.listen (or http.listen is empty) serves no API (`serve
// --http off`); that, and a token that is not known, are errors saying
// what to do.
func daemonAPI(cfg *config.Config, af *apiFlags, stderr io.Writer, cause error) (*api.Client, error) {
	dir := cfg.Store.Dir
	url, tok := runningAPI(cfg, af)
	if url == "" {
		return nil, fmt.Errorf("the store %s is in use by another process, most likely a running `nddmilter serve` "+
			"(Badger allows one process at a time), and that process serves no HTTP API "+
			"(it recorded no %s, and nothing listens at http.listen %q: started with --http off?).\n"+
			"Stop the daemon first, or run it with its HTTP API and retry (or name it: --api URL --token TOKEN).\n(cause: %w)",
			dir, daemon.AddressFile, cfg.HTTP.Listen, cause)
	}
	if tok == "" {
		return nil, fmt.Errorf("the store %s is in use by another process, most likely a running `nddmilter serve` "+
			"(Badger allows one process at a time), and no API token is readable here "+
			"(%s in the store directory, http.token or http.token_file).\nGo through the daemon's API: --api %s --token TOKEN "+
			"(or env NDDMILTER_API_TOKEN), or stop the daemon first.\n(cause: %w)", dir, daemon.TokenFile, url, cause)
	}
	fmt.Fprintf(stderr, "nddmilter: store %s is held by the running daemon; using its API at %s\n", dir, url)
	return &api.Client{BaseURL: url, Token: tok}, nil
}

// fleetAPI returns the client of the API of the daemon that runs this
// configuration's fleet node: --api, else the daemon holding the store
// (fleet status is the running node's).
func fleetAPI(gf *globalFlags, af *apiFlags, stderr io.Writer) (*api.Client, error) {
	if af.url != "" {
		return &api.Client{BaseURL: af.url, Token: af.tokenOrEnv()}, nil
	}
	cfg, err := loadConfig(gf)
	if err != nil {
		return nil, err
	}
	if url, _ := daemon.RunningAPI(cfg); url == "" {
		return nil, fmt.Errorf("%w: no daemon runs on store %s (it recorded no %s, and nothing listens at http.listen %q); "+
			"the fleet commands ask the running daemon: start it (nddmilter serve --config FILE), "+
			"or name its API (--api URL --token TOKEN)", errNoDaemon, cfg.Store.Dir, daemon.AddressFile, cfg.HTTP.Listen)
	}
	return daemonAPI(cfg, af, stderr, errors.New("fleet status is the running daemon's"))
}
