package natsd

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// ClientOptions are a node's connection to its fleet's NATS cluster (the
// fleet.nats section). At most one of Creds, NkeySeed and User is set; none
// connects without credentials (only to an unauthenticated server).
type ClientOptions struct {
	// URLs of the cluster's servers (nats://host:port or tls://host:port);
	// the client picks one and fails over to the others.
	URLs []string
	// Creds is a NATS user credentials file (JWT and nkey seed, as nsc
	// writes it).
	Creds string
	// NkeySeed is a file holding a user nkey seed (`nddmilter fleet nkey`).
	NkeySeed string
	// User and PasswordFile: user and password authentication.
	User         string
	PasswordFile string
	// TLS: CA verifies the servers' certificates; Cert and Key are the
	// client certificate when servers require one. Any of them turns TLS on.
	TLS TLS
	// Name is the connection's name in the server's monitoring.
	Name string
	// ReconnectWait between attempts to reach a server; default 1s. The
	// connection retries forever (a fleet node outlives NATS outages) and
	// its first connection may fail: it keeps trying in the background.
	ReconnectWait time.Duration
	// Timeout of one connection attempt; default 2s.
	Timeout time.Duration
	// Logger receives disconnections, reconnections and async errors; nil:
	// none.
	Logger *slog.Logger
}

// Validate checks the options and that the files they name are readable.
func (c ClientOptions) Validate() error {
	_, err := c.NatsOptions()
	return err
}

// NatsOptions are the nats.go options of the connection. Connect with
// nats.Connect(strings.Join(c.URLs, ","), opts...) or use Connect.
func (c ClientOptions) NatsOptions() ([]nats.Option, error) {
	if len(c.URLs) == 0 {
		return nil, cfgErr("nats.urls: no server URL")
	}
	for _, s := range c.URLs {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, cfgErr("nats.urls: %q: want nats://host:port or tls://host:port", s)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return nil, cfgErr("nats.urls: %q: scheme %q, want nats or tls", s, u.Scheme)
		}
		if _, _, err := splitHostPort(u.Host); err != nil {
			return nil, cfgErr("nats.urls: %q: %v", s, err)
		}
	}
	n := 0
	for _, s := range []string{c.Creds, c.NkeySeed, c.User} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return nil, cfgErr("nats: set one of creds, nkey_seed and user")
	}
	wait, timeout := c.ReconnectWait, c.Timeout
	if wait <= 0 {
		wait = time.Second
	}
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	opts := []nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(wait),
		nats.Timeout(timeout),
		nats.RetryOnFailedConnect(true),
	}
	if c.Name != "" {
		opts = append(opts, nats.Name(c.Name))
	}
	switch {
	case c.Creds != "":
		if err := readable(c.Creds); err != nil {
			return nil, cfgErr("nats.creds: %v", err)
		}
		opts = append(opts, nats.UserCredentials(c.Creds))
	case c.NkeySeed != "":
		seed, err := readSecret(c.NkeySeed)
		if err != nil {
			return nil, cfgErr("nats.nkey_seed: %v", err)
		}
		if _, err := UserSeedPublicKey([]byte(seed)); err != nil {
			return nil, cfgErr("nats.nkey_seed %s: %v", c.NkeySeed, err)
		}
		o, err := nats.NkeyOptionFromSeed(c.NkeySeed)
		if err != nil {
			return nil, cfgErr("nats.nkey_seed: %v", err)
		}
		opts = append(opts, o)
	case c.User != "":
		pw, err := readSecret(c.PasswordFile)
		if err != nil {
			return nil, cfgErr("nats.password_file: %v", err)
		}
		opts = append(opts, nats.UserInfo(c.User, pw))
	case c.PasswordFile != "":
		return nil, cfgErr("nats.password_file needs nats.user")
	}
	if c.TLS.Enabled() {
		if (c.TLS.Cert == "") != (c.TLS.Key == "") {
			return nil, cfgErr("nats.tls: cert and key go together")
		}
		if c.TLS.CA != "" {
			if err := readable(c.TLS.CA); err != nil {
				return nil, cfgErr("nats.tls.ca: %v", err)
			}
			opts = append(opts, nats.RootCAs(c.TLS.CA))
		}
		if c.TLS.Cert != "" {
			if err := readable(c.TLS.Cert); err != nil {
				return nil, cfgErr("nats.tls.cert: %v", err)
			}
			if err := readable(c.TLS.Key); err != nil {
				return nil, cfgErr("nats.tls.key: %v", err)
			}
			opts = append(opts, nats.ClientCert(c.TLS.Cert, c.TLS.Key))
		}
		opts = append(opts, nats.Secure())
	}
	if l := c.Logger; l != nil {
		opts = append(opts,
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				if err != nil { // nil: closed by this process
					l.Warn("fleet: disconnected from NATS", "err", err)
				}
			}),
			nats.ReconnectHandler(func(nc *nats.Conn) {
				l.Info("fleet: reconnected to NATS", "server", nc.ConnectedUrlRedacted())
			}),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				l.Warn("fleet: NATS error", "err", err)
			}))
	}
	return opts, nil
}

// Connect validates the options and connects. With RetryOnFailedConnect
// the connection comes back even when no server answers yet; it connects
// in the background.
func (c ClientOptions) Connect() (*nats.Conn, error) {
	opts, err := c.NatsOptions()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(strings.Join(c.URLs, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("natsd: connect %s: %w", strings.Join(c.URLs, ","), err)
	}
	return nc, nil
}

// NewUserKey makes a user nkey pair: the seed (secret, for the node's
// nkey_seed file) and the public key (for the servers' users list).
func NewUserKey() (seed []byte, public string, err error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, "", fmt.Errorf("natsd: create nkey: %w", err)
	}
	defer kp.Wipe()
	s, err := kp.Seed()
	if err != nil {
		return nil, "", fmt.Errorf("natsd: nkey seed: %w", err)
	}
	// Wipe zeroes the key pair's own copy of the seed.
	seed = append([]byte(nil), s...)
	if public, err = kp.PublicKey(); err != nil {
		return nil, "", fmt.Errorf("natsd: nkey public key: %w", err)
	}
	return seed, public, nil
}

// ErrNotUserSeed is returned for a seed that is not a user nkey seed.
var ErrNotUserSeed = errors.New("not a user nkey seed (it starts with SU)")

// UserSeedPublicKey is the public key of a user nkey seed.
func UserSeedPublicKey(seed []byte) (string, error) {
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotUserSeed, err)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotUserSeed, err)
	}
	if !nkeys.IsValidPublicUserKey(pub) {
		return "", ErrNotUserSeed
	}
	return pub, nil
}

func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// ReadUserSeed reads a user nkey seed file (`nddmilter fleet nkey
// --seed`) into a key pair that signs.
func ReadUserSeed(path string) (nkeys.KeyPair, error) {
	seed, err := readSecret(path)
	if err != nil {
		return nil, err
	}
	if _, err := UserSeedPublicKey([]byte(seed)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(seed)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return kp, nil
}
