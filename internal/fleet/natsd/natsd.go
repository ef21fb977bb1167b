// Package natsd runs the NATS JetStream server a fleet node can embed
// (fleet.embedded) and builds the client connection options a node uses to
// reach its fleet's NATS cluster, embedded or external (fleet.nats).
//
// The server is github.com/nats-io/nats-server/v2 used as a library: one
// client listener, one cluster (route) listener, JetStream with its own
// directory. Three nodes listing each other's cluster addresses as routes
// form a JetStream cluster with a Raft meta group, which the fleet's R3
// stream needs.
//
// Security: every client connection authenticates (an nkey signs the
// server's nonce, or a user and password) and a user's role bounds the
// subjects it may publish to; a connection without credentials is refused,
// so it cannot read or publish events. A server without Users does not
// start, also on loopback. Client and route connections can use TLS (routes
// with mutual TLS), and routes can authenticate with a user and password.
package natsd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Defaults of the zero Options.
const (
	DefaultListen        = "127.0.0.1:4222"
	DefaultClusterListen = "127.0.0.1:6222"
	DefaultClusterName   = "nddmilter"
	// DefaultStream is the fleet's stream (fleet.stream); its events are
	// published to subjects under its name (NDDMILTER.events).
	DefaultStream = "NDDMILTER"
	// DefaultReadyTimeout bounds Start's wait for the client listener.
	DefaultReadyTimeout = 10 * time.Second
)

// Sentinel errors.
var (
	// ErrConfig marks invalid options (wrapped with the detail).
	ErrConfig = errors.New("natsd: invalid options")
	// ErrNotReady is returned when the server or JetStream did not become
	// ready in time.
	ErrNotReady = errors.New("natsd: not ready")
)

// Role is what an authenticated user may do.
type Role string

const (
	// RoleNode may publish fleet events, use the JetStream API and the
	// snapshot object store: a fleet node. The default.
	RoleNode Role = "node"
	// RoleRead may read the stream (consumers, stream info) but not publish
	// events: monitoring, `nddmilter fleet status` from another host.
	RoleRead Role = "read"
	// RoleAdmin may do anything in the fleet's account: an operator's
	// key, for repairs such as taking an event out of the stream (`nats
	// stream rmm`). No node needs it.
	RoleAdmin Role = "admin"
)

// User is one identity allowed to connect: an nkey, or a user name with a
// password file. Exactly one of Nkey and Name is set.
type User struct {
	// Nkey is a user's public nkey (starts with "U"; `nddmilter fleet nkey`).
	Nkey string
	// Name and PasswordFile: a user and the file holding its password
	// (plain, or a bcrypt hash starting with "$2").
	Name         string
	PasswordFile string
	// Role: RoleNode when empty.
	Role Role
	// Node is the fleet node a RoleNode nkey belongs to (fleet.nodes):
	// it may then write only that node's status; Snapshots lets it store
	// snapshots and purge the stream. Empty: a node user of an older
	// configuration, allowed every node's subjects.
	Node      string
	Snapshots bool
}

// TLS names PEM files. CA verifies the peer; Cert and Key are this side's
// certificate. The zero value means no TLS.
type TLS struct {
	CA   string
	Cert string
	Key  string
	// Verify (server side) requires and verifies a client certificate
	// signed by CA. Route TLS always verifies.
	Verify bool
}

// Enabled reports whether any TLS file is set.
func (t TLS) Enabled() bool { return t.CA != "" || t.Cert != "" || t.Key != "" }

// Options of an embedded server. The zero value plus Dir and Users is a
// server on loopback with the default ports.
type Options struct {
	// Name identifies the server in the cluster; default: the host name
	// followed by the client port.
	Name string
	// Listen is the client address host:port; default DefaultListen. Port 0
	// picks a free port (ClientURL tells which).
	Listen string
	// ClusterListen is the route address; default DefaultClusterListen.
	// "-" disables clustering (a single server).
	ClusterListen string
	// ClusterName: default DefaultClusterName. Every server of a cluster
	// has the same.
	ClusterName string
	// Routes are the other servers' route URLs (nats-route://host:port).
	// Listing this server's own address is harmless.
	Routes []string
	// ClusterUser and ClusterPasswordFile authenticate routes: each server
	// requires them from the others and sends them to the Routes it dials.
	ClusterUser         string
	ClusterPasswordFile string
	// Dir is the JetStream storage directory (required).
	Dir string
	// MaxStore and MaxMemory bound JetStream's file and memory storage in
	// bytes; 0 lets the server choose (a share of the disk and memory).
	MaxStore  int64
	MaxMemory int64
	// MaxPayload bounds one message in bytes; 0: the server's 1 MiB.
	MaxPayload int32
	// Users who may connect (at least one: there is no anonymous
	// access, also on loopback).
	Users []User
	// Stream is the fleet's stream name (fleet.stream): a RoleNode user may
	// publish events to the subjects Stream+".>". Default DefaultStream.
	Stream string
	// TLS of client connections; ClusterTLS of routes (mutual: CA, Cert and
	// Key all needed).
	TLS        TLS
	ClusterTLS TLS
	// ReadyTimeout bounds Start's wait; default DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// Logger receives the server's notices, warnings and errors; nil: none.
	Logger *slog.Logger
}

// Server is a running embedded NATS server.
type Server struct {
	ns  *server.Server
	opt Options
	sys nkeys.KeyPair // this process's system-account user; nil without Users
}

// Start validates the options, starts the server and waits until it
// accepts client connections. It does not wait for the JetStream cluster
// (that needs a quorum of servers): see WaitJetStream.
func Start(opt Options) (*Server, error) {
	sopts, err := opt.serverOptions()
	if err != nil {
		return nil, err
	}
	sys, err := addSystemUser(sopts)
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("natsd: new server: %w", err)
	}
	var next server.Logger
	if opt.Logger != nil {
		next = &slogAdapter{l: opt.Logger}
	}
	fc := newFatalCatcher(next)
	ns.SetLoggerV2(fc, false, false, false)
	ns.Start()
	wait := opt.ReadyTimeout
	if wait <= 0 {
		wait = DefaultReadyTimeout
	}
	if err := waitReady(ns, fc, wait); err != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, err
	}
	return &Server{ns: ns, opt: opt, sys: sys}, nil
}

// readyPoll is how long each readiness check of waitReady waits.
const readyPoll = 50 * time.Millisecond

// waitReady waits until the server accepts connections on every listener
// it was given (clients, routes), at most wait. A fatal line from the
// server (it could not listen) ends the wait at once and is the error.
func waitReady(ns *server.Server, fc *fatalCatcher, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		select {
		case <-fc.fatal:
			msg := fc.err()
			if strings.Contains(msg, "address already in use") {
				msg += " (another process listens there: free the port or change the listen address)"
			}
			return fmt.Errorf("%w: %s", ErrNotReady, msg)
		default:
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w: the client and route listeners are not up after %v", ErrNotReady, wait)
		}
		if ns.ReadyForConnections(min(readyPoll, left)) {
			return nil
		}
	}
}

// ClientURL is the URL clients connect to (nats:// or tls://).
func (s *Server) ClientURL() string {
	u := s.ns.ClientURL()
	if s.opt.TLS.Enabled() {
		u = strings.Replace(u, "nats://", "tls://", 1)
	}
	return u
}

// ClusterAddr is the route listener's address, nil without clustering.
func (s *Server) ClusterAddr() net.Addr {
	if a := s.ns.ClusterAddr(); a != nil {
		return a
	}
	return nil
}

// Name is the server's name in the cluster.
func (s *Server) Name() string { return s.ns.Name() }

// JetStreamReady reports whether JetStream is enabled and, when clustered,
// this server knows a current meta leader (the cluster can take stream
// operations).
func (s *Server) JetStreamReady() bool {
	return s.ns.JetStreamEnabled() && s.ns.JetStreamIsCurrent()
}

// IsStreamLeader reports whether this server leads the named stream of the
// global account (the account users of Options belong to).
func (s *Server) IsStreamLeader(stream string) bool {
	return s.ns.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream)
}

// WaitJetStream waits until JetStreamReady, or ctx ends (ErrNotReady).
func (s *Server) WaitJetStream(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !s.JetStreamReady() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: JetStream of %s: %w", ErrNotReady, s.Name(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Shutdown stops the server and waits for it, at most until ctx ends. In a
// cluster, the remaining servers carry on (a leader it held is re-elected).
func (s *Server) Shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("natsd: shutdown of %s: %w", s.Name(), ctx.Err())
	}
}

// Validate checks the options without starting anything.
func (o Options) Validate() error {
	_, err := o.serverOptions()
	return err
}

func cfgErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
}

// serverOptions turns Options into the server's options, checking them.
func (o Options) serverOptions() (*server.Options, error) {
	if o.Dir == "" {
		return nil, cfgErr("dir: the JetStream directory is required")
	}
	listen := o.Listen
	if listen == "" {
		listen = DefaultListen
	}
	host, port, err := splitHostPort(listen)
	if err != nil {
		return nil, cfgErr("listen %q: %v", listen, err)
	}
	name := o.Name
	if name == "" {
		h, _ := os.Hostname()
		name = h
		if port > 0 {
			name = fmt.Sprintf("%s-%d", h, port)
		}
	}
	if port == 0 {
		// The server reads 0 as its default port; -1 picks a free one.
		port = server.RANDOM_PORT
	}
	so := &server.Options{
		ServerName: name,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   o.Dir,
		// The daemon owns signals and the process' logging.
		NoSigs:             true,
		NoLog:              o.Logger == nil,
		JetStreamMaxStore:  o.MaxStore,
		JetStreamMaxMemory: o.MaxMemory,
		MaxPayload:         o.MaxPayload,
	}
	if o.MaxStore < 0 || o.MaxMemory < 0 || o.MaxPayload < 0 {
		return nil, cfgErr("max_store, max_memory and max_payload must not be negative")
	}
	if err := o.addUsers(so); err != nil {
		return nil, err
	}
	if o.TLS.Enabled() {
		if o.TLS.Cert == "" || o.TLS.Key == "" {
			return nil, cfgErr("tls: cert and key are both needed for the client listener")
		}
		if o.TLS.Verify && o.TLS.CA == "" {
			return nil, cfgErr("tls: verify needs ca (the CA that signs client certificates)")
		}
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: o.TLS.Cert, KeyFile: o.TLS.Key, CaFile: o.TLS.CA, Verify: o.TLS.Verify})
		if err != nil {
			return nil, cfgErr("tls: %v", err)
		}
		so.TLSConfig = tc
		so.TLS = true
		so.TLSVerify = o.TLS.Verify
		so.TLSTimeout = 2
	}
	if err := o.addCluster(so); err != nil {
		return nil, err
	}
	if len(o.Users) == 0 {
		// Not even on loopback: any local process could read the stream
		// and publish to it.
		return nil, cfgErr("no users: every client must authenticate, also on loopback (list the fleet's nodes in fleet.nodes; nddmilter fleet init makes a node's key)")
	}
	return so, nil
}

func (o Options) addUsers(so *server.Options) error {
	for i, u := range o.Users {
		perms, err := Permissions(u, o.Stream)
		if err != nil {
			return cfgErr("users[%d]: %v", i, err)
		}
		switch {
		case u.Nkey != "" && u.Name != "":
			return cfgErr("users[%d]: set nkey or user, not both", i)
		case u.Nkey != "":
			if !ValidUserKey(u.Nkey) {
				return cfgErr("users[%d]: nkey %q is not a user public key (it starts with U; `nddmilter fleet nkey` makes one)", i, u.Nkey)
			}
			so.Nkeys = append(so.Nkeys, &server.NkeyUser{Nkey: u.Nkey, Permissions: perms})
		case u.Name != "":
			pw, err := readSecret(u.PasswordFile)
			if err != nil {
				return cfgErr("users[%d] (%s): password_file: %v", i, u.Name, err)
			}
			so.Users = append(so.Users, &server.User{Username: u.Name, Password: pw, Permissions: perms})
		default:
			return cfgErr("users[%d]: set nkey or user", i)
		}
	}
	return nil
}

func (o Options) addCluster(so *server.Options) error {
	if o.ClusterListen == "-" {
		if len(o.Routes) > 0 {
			return cfgErr("routes need cluster_listen")
		}
		return nil
	}
	cl := o.ClusterListen
	if cl == "" {
		cl = DefaultClusterListen
	}
	host, port, err := splitHostPort(cl)
	if err != nil {
		return cfgErr("cluster_listen %q: %v", cl, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	name := o.ClusterName
	if name == "" {
		name = DefaultClusterName
	}
	so.Cluster = server.ClusterOpts{Name: name, Host: host, Port: port, NoAdvertise: false}
	var pw string
	if o.ClusterUser != "" {
		if pw, err = readSecret(o.ClusterPasswordFile); err != nil {
			return cfgErr("cluster_password_file: %v", err)
		}
		so.Cluster.Username, so.Cluster.Password = o.ClusterUser, pw
	} else if o.ClusterPasswordFile != "" {
		return cfgErr("cluster_password_file needs cluster_user")
	}
	if !isLoopback(host) && o.ClusterUser == "" && !o.ClusterTLS.Enabled() {
		return cfgErr("cluster_listen %q is not a loopback address and routes are not authenticated: set cluster_tls (mutual TLS) or cluster_user", cl)
	}
	if o.ClusterTLS.Enabled() {
		if o.ClusterTLS.CA == "" || o.ClusterTLS.Cert == "" || o.ClusterTLS.Key == "" {
			return cfgErr("cluster_tls: ca, cert and key are all needed (routes use mutual TLS)")
		}
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: o.ClusterTLS.Cert, KeyFile: o.ClusterTLS.Key, CaFile: o.ClusterTLS.CA, Verify: true})
		if err != nil {
			return cfgErr("cluster_tls: %v", err)
		}
		// A server is both client and server of routes: it verifies the
		// servers it dials with the same CA (as the server's own config
		// parser does).
		tc.ClientAuth = tls.RequireAndVerifyClientCert
		tc.RootCAs = tc.ClientCAs
		so.Cluster.TLSConfig = tc
		so.Cluster.TLSTimeout = 2
	}
	for _, r := range o.Routes {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			return cfgErr("route %q: want nats-route://host:port", r)
		}
		if u.Scheme != "nats-route" && u.Scheme != "nats" && u.Scheme != "tls" {
			return cfgErr("route %q: scheme %q, want nats-route", r, u.Scheme)
		}
		if _, _, err := splitHostPort(u.Host); err != nil {
			return cfgErr("route %q: %v", r, err)
		}
		if u.User == nil && o.ClusterUser != "" {
			u.User = url.UserPassword(o.ClusterUser, pw)
		}
		so.Routes = append(so.Routes, u)
	}
	return nil
}

// Permissions are what user u may publish and subscribe to in the fleet
// of stream ("" for DefaultStream).
//
// A node (RoleNode) publishes events to the stream's subjects, uses the
// JetStream API for consumers and reads, acks and flow control, and reads
// the buckets. No node may delete a stream message, a stream, the
// account's streams or restore one. A node named in u.Node (fleet.nodes)
// writes only its own status ($KV.<stream>_nodes.<its key>); unless
// u.Snapshots, it may neither store snapshots ($O.<stream>_snapshot.>),
// purge a stream nor change a stream's settings (it creates what does
// not exist yet). A node user without Node (an older configuration) may
// write every bucket. A reader (RoleRead) only asks for information and
// consumes; an admin (RoleAdmin) may do anything. All receive replies on
// _INBOX.>.
func Permissions(u User, stream string) (*server.Permissions, error) {
	if stream == "" {
		stream = DefaultStream
	}
	sub := &server.SubjectPermission{Allow: []string{"_INBOX.>", "$JS.FC.>"}}
	switch u.Role {
	case RoleNode, "":
		pub := []string{"$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "_INBOX.>", EventSubjects(stream)}
		deny := []string{"$JS.API.STREAM.MSG.DELETE.>", "$JS.API.STREAM.DELETE.>", "$JS.API.ACCOUNT.PURGE.>",
			"$JS.API.STREAM.RESTORE.>", "$JS.API.STREAM.PEER.REMOVE.>"}
		switch {
		case u.Node == "":
			pub = append(pub, "$O.>", "$KV.>")
		case u.Snapshots:
			pub = append(pub, "$O."+stream+"_snapshot.>", "$KV."+stream+"_nodes.>")
		default:
			pub = append(pub, "$KV."+stream+"_nodes."+StatusKey(u.Node))
			deny = append(deny, "$JS.API.STREAM.PURGE.>", "$JS.API.STREAM.UPDATE.>")
		}
		sub.Allow = append(sub.Allow, "$O.>", "$KV.>", EventSubjects(stream))
		return &server.Permissions{Publish: &server.SubjectPermission{Allow: pub, Deny: deny}, Subscribe: sub}, nil
	case RoleRead:
		pub := []string{"$JS.API.INFO", "$JS.API.STREAM.INFO.>", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST",
			"$JS.API.STREAM.MSG.GET.>", "$JS.API.DIRECT.GET.>", "$JS.API.CONSUMER.>", "$JS.ACK.>", "$JS.FC.>", "_INBOX.>"}
		return &server.Permissions{Publish: &server.SubjectPermission{Allow: pub}, Subscribe: sub}, nil
	case RoleAdmin:
		return &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}}, Subscribe: &server.SubjectPermission{Allow: []string{">"}}}, nil
	}
	return nil, fmt.Errorf("role %q: want %q, %q or %q", u.Role, RoleNode, RoleRead, RoleAdmin)
}

// StatusKey is a node's key in the fleet's status bucket: its name with
// every character but letters, digits, - and _ replaced by _.
func StatusKey(node string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, node)
}

// EventSubjects are the subjects of a stream's events: stream+".>"
// (DefaultStream when stream is empty).
func EventSubjects(stream string) string {
	if stream == "" {
		stream = DefaultStream
	}
	return stream + ".>"
}

func splitHostPort(hp string) (string, int, error) {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("port %q", p)
	}
	if h == "" {
		h = "0.0.0.0"
	}
	return h, n, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// readSecret reads a one-line secret file (trailing newline dropped).
func readSecret(path string) (string, error) {
	if path == "" {
		return "", errors.New("no file given")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}
