package config

import (
	"net"
	"net/url"
	"strconv"

	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
)

// The fleet's security settings: TLS files, the users an embedded NATS
// server admits, route authentication. The fleet section (fleet.nats,
// fleet.embedded) uses these types; docs/FLEET.md "Security" explains them.

// FleetTLS names PEM files. On a client (fleet.nats.tls): ca verifies the
// servers, cert and key are the client certificate when servers require
// one. On a server (fleet.embedded.tls, cluster_tls): cert and key are the
// server's, ca verifies the peers' certificates. Empty: no TLS.
type FleetTLS struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// Verify (fleet.embedded.tls only) requires a client certificate
	// signed by ca from every client. Routes (cluster_tls) always verify.
	Verify bool `yaml:"verify"`
}

// Natsd is the TLS of natsd.
func (t FleetTLS) Natsd() natsd.TLS {
	return natsd.TLS{CA: t.CA, Cert: t.Cert, Key: t.Key, Verify: t.Verify}
}

// FleetUser is one identity an embedded server admits: a public nkey
// (`nddmilter fleet nkey` prints one), or a user and a password file.
type FleetUser struct {
	Nkey         string `yaml:"nkey"`
	User         string `yaml:"user"`
	PasswordFile string `yaml:"password_file"`
	// Role: node (default; publishes events; the keys of fleet.nodes are
	// node users by themselves, with narrower permissions), read (reads
	// the stream, cannot publish) or admin (anything: repairs).
	Role string `yaml:"role"`
}

// FleetServerSecurity are fleet.embedded's security keys: who may connect
// (besides the keys of fleet.nodes) and how connections are protected.
type FleetServerSecurity struct {
	Users []FleetUser `yaml:"users"`
	// TLS of client connections, ClusterTLS of routes (mutual TLS: ca,
	// cert and key).
	TLS        FleetTLS `yaml:"tls"`
	ClusterTLS FleetTLS `yaml:"cluster_tls"`
	// ClusterUser and ClusterPasswordFile authenticate routes between the
	// servers (each requires them and sends them).
	ClusterUser         string `yaml:"cluster_user"`
	ClusterPasswordFile string `yaml:"cluster_password_file"`
	// MaxStoreBytes bounds JetStream's disk use; 0: the server's default
	// (a share of the free disk).
	MaxStoreBytes int64 `yaml:"max_store_bytes"`
	// MaxPayloadBytes bounds one NATS message, so one event: a report
	// event holds its reports' evidence (a few KB each, never the
	// messages), batched up to this bound. 0: the server's default, 1 MiB.
	// At most 64 MiB.
	MaxPayloadBytes int64 `yaml:"max_payload_bytes"`
}

// Validate checks the keys' values (not the files they name: `nddmilter
// fleet check` reads those). prefix is the section's key, e.g.
// "fleet.embedded".
func (s FleetServerSecurity) Validate(prefix string) error {
	for i, u := range s.Users {
		k := join(prefix, "users") + "[" + strconv.Itoa(i) + "]"
		switch {
		case u.Nkey != "" && u.User != "":
			return bad(k, "set nkey or user, not both")
		case u.Nkey == "" && u.User == "":
			return bad(k, "set nkey (a public user key, `nddmilter fleet nkey`) or user and password_file")
		case u.Nkey != "" && !natsd.ValidUserKey(u.Nkey):
			return bad(k+".nkey", "%q is not a public user nkey (it starts with U; `nddmilter fleet nkey` makes one)", u.Nkey)
		case u.User != "" && u.PasswordFile == "":
			return bad(k+".password_file", "user %q needs a password_file", u.User)
		case u.Nkey != "" && u.PasswordFile != "":
			return bad(k+".password_file", "an nkey user has no password")
		}
		if err := oneOf(k+".role", u.Role, "", string(natsd.RoleNode), string(natsd.RoleRead), string(natsd.RoleAdmin)); err != nil {
			return err
		}
	}
	if err := s.TLS.validate(join(prefix, "tls"), true); err != nil {
		return err
	}
	if err := s.ClusterTLS.validate(join(prefix, "cluster_tls"), true); err != nil {
		return err
	}
	if s.ClusterTLS != (FleetTLS{}) && (s.ClusterTLS.CA == "" || s.ClusterTLS.Cert == "" || s.ClusterTLS.Key == "") {
		return bad(join(prefix, "cluster_tls"), "ca, cert and key are all needed (routes use mutual TLS)")
	}
	if (s.ClusterUser == "") != (s.ClusterPasswordFile == "") {
		return bad(join(prefix, "cluster_user"), "cluster_user and cluster_password_file go together")
	}
	if s.MaxPayloadBytes < 0 || s.MaxPayloadBytes > 64<<20 {
		return bad(join(prefix, "max_payload_bytes"), "must be 0 (the server's 1 MiB) to 64 MiB")
	}
	if s.MaxStoreBytes < 0 {
		return bad(join(prefix, "max_store_bytes"), "must be >= 0 (0: the server's default)")
	}
	return nil
}

// validate checks a TLS block; server: the side that listens.
func (t FleetTLS) validate(key string, server bool) error {
	if t == (FleetTLS{}) {
		return nil
	}
	if (t.Cert == "") != (t.Key == "") {
		return bad(key, "cert and key go together")
	}
	if server && t.Cert == "" {
		return bad(key, "a server needs cert and key")
	}
	if t.Verify && (!server || t.CA == "") {
		return bad(key+".verify", "verify is for a server's tls and needs ca")
	}
	return nil
}

// ValidateClientTLS checks the TLS block of a client (fleet.nats.tls).
func (t FleetTLS) ValidateClientTLS(key string) error { return t.validate(key, false) }

// NatsdServer fills a natsd.Options' security fields from s.
func (s FleetServerSecurity) NatsdServer(o *natsd.Options) {
	for _, u := range s.Users {
		o.Users = append(o.Users, natsd.User{Nkey: u.Nkey, Name: u.User, PasswordFile: u.PasswordFile, Role: natsd.Role(u.Role)})
	}
	o.TLS = s.TLS.Natsd()
	o.ClusterTLS = s.ClusterTLS.Natsd()
	o.ClusterUser, o.ClusterPasswordFile = s.ClusterUser, s.ClusterPasswordFile
	o.MaxStore = s.MaxStoreBytes
	o.MaxPayload = int32(s.MaxPayloadBytes)
}

// PlaintextWarnings name the fleet's connections that would travel in
// plain text beyond loopback: the embedded server's client listener
// without tls, its route listener without cluster_tls (a route user and
// password authenticates but does not encrypt), and server URLs of
// fleet.nats without TLS. The events (reports' evidence, reporter
// hashes), statuses and credentials of password users cross the network
// on them. None for a disabled fleet. `config check`, `fleet check` and
// the daemon at start print them.
func (f Fleet) PlaintextWarnings() []string {
	if !f.Enabled {
		return nil
	}
	var ws []string
	if e := f.Embedded; e.Enabled {
		if h := listenHost(e.Listen, natsd.DefaultListen); !loopbackHost(h) && e.TLS.Cert == "" {
			ws = append(ws, "fleet.embedded.listen "+e.Listen+" is not loopback and has no tls: the fleet's events and statuses travel in plain text (set fleet.embedded.tls)")
		}
		if e.ClusterListen != "-" {
			if h := listenHost(e.ClusterListen, natsd.DefaultClusterListen); !loopbackHost(h) && e.ClusterTLS.Cert == "" {
				ws = append(ws, "fleet.embedded.cluster_listen "+e.ClusterListen+" is not loopback and has no cluster_tls: the stream is replicated in plain text (set fleet.embedded.cluster_tls)")
			}
		}
	}
	tlsClient := f.NATS.TLS != (FleetTLS{})
	for _, u := range f.NATS.URLs {
		p, err := url.Parse(u)
		if err != nil || p.Scheme == "tls" || p.Scheme == "wss" || tlsClient || loopbackHost(p.Hostname()) {
			continue
		}
		ws = append(ws, "fleet.nats.urls "+u+" is not loopback and not TLS: this node's events and credentials travel in plain text (use tls:// and fleet.nats.tls)")
	}
	return ws
}

func listenHost(addr, def string) string {
	if addr == "" {
		addr = def
	}
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// loopbackHost: a loopback address or localhost ("" and 0.0.0.0 listen
// everywhere).
func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
