package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nddmilter/nddmilter/internal/config"
)

// TokenFile is the file, inside the store directory, holding the API
// token that Run generates when the configuration sets none. The CLI
// reads it to reach a running daemon without any configuration.
const TokenFile = "api-token"

// AddressFile, inside the store directory, holds the URL of the running
// daemon's HTTP API; Run writes it at start and removes it at exit.
const AddressFile = "api-address"

// DefaultAPIURL is the URL of the daemon's API with the default http.listen.
const DefaultAPIURL = "http://" + config.DefaultHTTPListen

// RunningAPIURL returns the URL recorded by a daemon serving the store in
// dir, or "".
func RunningAPIURL(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, AddressFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ResolveAPIToken returns the token of the /v1 API: http.token or
// http.token_file when set, else the token kept in the store directory.
// With generate, a missing token file is created (32 random bytes, hex,
// mode 0600) and generated reports it.
func ResolveAPIToken(cfg *config.Config, generate bool) (tok string, generated bool, err error) {
	tok, err = cfg.HTTP.ReadToken()
	if err != nil || tok != "" {
		return tok, false, err
	}
	path := filepath.Join(cfg.Store.Dir, TokenFile)
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
