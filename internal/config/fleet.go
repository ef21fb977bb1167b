package config

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
)

// Fleet is the fleet section: several mail servers sharing one campaign
// view through a NATS JetStream stream (docs/FLEET.md). Disabled (the
// default), the daemon is standalone.
type Fleet struct {
	Enabled bool `yaml:"enabled"`
	// Node names this node; default the host name.
	Node     string        `yaml:"node"`
	NATS     FleetNATS     `yaml:"nats"`
	Embedded FleetEmbedded `yaml:"embedded"`
	// Stream is the JetStream stream of campaign events. Default NDDMILTER.
	Stream string `yaml:"stream"`
	// Replicas of the stream and its buckets. Default 3.
	Replicas int `yaml:"replicas"`
	// HitsEvery is how often the node publishes its hit counts. Default 2s.
	HitsEvery Duration `yaml:"hits_every"`
	// SnapshotEvery is how often a snapshot of the store is stored in the
	// fleet for new or wiped nodes. Default 1h.
	SnapshotEvery Duration `yaml:"snapshot_every"`
	// MaxClockOffset is how far this host's clock may be from the median
	// of the nodes' clocks before the node stops publishing expiry
	// decisions, which would delete campaigns on every node by a wrong
	// clock, and dates its events by the others' clocks. Default 1m.
	MaxClockOffset Duration `yaml:"max_clock_offset"`
	// Nodes are the fleet's nodes and their public nkeys: every event is
	// signed by its node's key and applied only when it verifies against
	// this list (docs/FLEET.md, Security). Required; the same list on
	// every node. With embedded.enabled each key is also a user of the
	// embedded server, allowed what a node needs and no more.
	Nodes []FleetNode `yaml:"nodes"`
	// SigningSeed is the file of this node's nkey seed, which signs its
	// events and snapshots. Default: nats.nkey_seed.
	SigningSeed string `yaml:"signing_seed"`
	// AcceptUnsigned accepts, during a rolling upgrade from a build that
	// did not sign, the unsigned events of the nodes it names that the
	// stream stored before until. Default: none.
	AcceptUnsigned FleetUnsigned `yaml:"accept_unsigned"`
}

// FleetNode is one node of the fleet (fleet.nodes).
type FleetNode struct {
	// Name is the node's fleet.node.
	Name string `yaml:"name"`
	// Key is its public nkey (U…; `nddmilter fleet nkey --public SEED`).
	Key string `yaml:"key"`
	// Snapshots: the node stores the fleet's snapshots and purges the
	// stream after them; a new node restores only a snapshot signed by
	// such a node. At least one node should have it.
	Snapshots bool `yaml:"snapshots"`
}

// FleetUnsigned is fleet.accept_unsigned, the upgrade window.
type FleetUnsigned struct {
	Nodes []string `yaml:"nodes"`
	// Until is an RFC 3339 time, e.g. 2026-12-01T00:00:00Z.
	Until string `yaml:"until"`
}

// End is Until as a time (zero when empty or invalid: validate refuses
// the latter).
func (u FleetUnsigned) End() time.Time {
	t, _ := time.Parse(time.RFC3339, u.Until)
	return t
}

// Signing is the seed file that signs this node's events.
func (f Fleet) Signing() string {
	if f.SigningSeed != "" {
		return f.SigningSeed
	}
	return f.NATS.NkeySeed
}

// FleetNATS is the node's connection to the fleet's NATS servers.
type FleetNATS struct {
	// URLs of an external cluster; empty with embedded.enabled: the
	// embedded server.
	URLs         []string `yaml:"urls"`
	Creds        string   `yaml:"creds"`
	NkeySeed     string   `yaml:"nkey_seed"`
	User         string   `yaml:"user"`
	PasswordFile string   `yaml:"password_file"`
	TLS          FleetTLS `yaml:"tls"`
}

// FleetEmbedded runs a JetStream server inside the daemon.
type FleetEmbedded struct {
	Enabled       bool     `yaml:"enabled"`
	Listen        string   `yaml:"listen"`
	ClusterListen string   `yaml:"cluster_listen"`
	ClusterName   string   `yaml:"cluster_name"`
	Routes        []string `yaml:"routes"`
	// Dir is JetStream's directory; default "nats" beside store.dir.
	Dir                 string `yaml:"dir"`
	FleetServerSecurity `yaml:",inline"`
}

// Default values of the fleet section.
const (
	DefaultFleetStream   = "NDDMILTER"
	DefaultFleetReplicas = 3
)

func defaultFleet() Fleet {
	return Fleet{
		Stream:         DefaultFleetStream,
		Replicas:       DefaultFleetReplicas,
		HitsEvery:      Duration(2 * time.Second),
		SnapshotEvery:  Duration(time.Hour),
		MaxClockOffset: Duration(time.Minute),
		NATS:           FleetNATS{URLs: []string{}},
		Nodes:          []FleetNode{},
		AcceptUnsigned: FleetUnsigned{Nodes: []string{}},
		Embedded: FleetEmbedded{
			Routes:              []string{},
			FleetServerSecurity: FleetServerSecurity{Users: []FleetUser{}},
			Listen:              natsd.DefaultListen,
			ClusterListen:       natsd.DefaultClusterListen,
			ClusterName:         natsd.DefaultClusterName,
		},
	}
}

// validate checks the fleet section (the files it names are read by
// `nddmilter fleet check` and at start).
func (f Fleet) validate() error {
	if !f.Enabled {
		return nil
	}
	if strings.ContainsAny(f.Node, " \t\r\n.*>") {
		return bad("fleet.node", "%q: no spaces, dots, * or >", f.Node)
	}
	if f.Stream == "" || strings.ContainsAny(f.Stream, " \t\r\n.*>/\\") {
		return bad("fleet.stream", "%q is not a stream name", f.Stream)
	}
	if f.Replicas < 1 || f.Replicas > 5 {
		return bad("fleet.replicas", "must be 1 to 5 (3 survives the loss of one server)")
	}
	if f.HitsEvery < Duration(100*time.Millisecond) {
		return bad("fleet.hits_every", "%s is too short: must be at least 100ms", f.HitsEvery)
	}
	if f.SnapshotEvery < Duration(time.Minute) {
		return bad("fleet.snapshot_every", "%s is too short: must be at least 1m", f.SnapshotEvery)
	}
	if f.MaxClockOffset < Duration(time.Second) {
		return bad("fleet.max_clock_offset", "%s is too short: must be at least 1s (NTP keeps hosts within milliseconds)", f.MaxClockOffset)
	}
	if err := f.validateNodes(); err != nil {
		return err
	}
	if len(f.NATS.URLs) == 0 && !f.Embedded.Enabled {
		return bad("fleet.nats.urls", "no NATS server: list the cluster's URLs, or enable fleet.embedded")
	}
	n := 0
	for _, s := range []string{f.NATS.Creds, f.NATS.NkeySeed, f.NATS.User} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return bad("fleet.nats", "set one of creds, nkey_seed and user")
	}
	if (f.NATS.User == "") != (f.NATS.PasswordFile == "") {
		return bad("fleet.nats.user", "user and password_file go together")
	}
	if err := f.NATS.TLS.ValidateClientTLS("fleet.nats.tls"); err != nil {
		return err
	}
	if f.Embedded.Enabled {
		if err := f.Embedded.Validate("fleet.embedded"); err != nil {
			return err
		}
		// With nats.urls empty the node connects to its own server, over
		// TLS when that server has it: without a CA it cannot verify the
		// server's certificate and never connects.
		if len(f.NATS.URLs) == 0 && f.Embedded.TLS.Cert != "" && f.NATS.TLS.CA == "" {
			return bad("fleet.nats.tls.ca", "empty while fleet.embedded.tls serves TLS: the node connects to its own server over TLS and needs the CA that signed its certificate")
		}
		if len(f.NATS.URLs) == 0 && f.Embedded.TLS.Verify && (f.NATS.TLS.Cert == "" || f.NATS.TLS.Key == "") {
			return bad("fleet.nats.tls.cert", "empty while fleet.embedded.tls.verify requires client certificates: the node connecting to its own server needs cert and key")
		}
		single := f.Embedded.ClusterListen == "-"
		if !single && len(f.Embedded.Routes) == 0 {
			// The server refuses to start JetStream in a cluster of none.
			return bad("fleet.embedded.routes", "empty: a cluster needs the route URLs of its servers (nats-route://HOST:6222 each); for a single server set cluster_listen: \"-\" and replicas: 1")
		}
		if single && f.Replicas > 1 {
			return bad("fleet.replicas", "%d replicas need a cluster of as many servers: a single embedded server (cluster_listen: \"-\") takes replicas: 1", f.Replicas)
		}
	}
	return nil
}

// validateNodes checks fleet.nodes, the signing key and the upgrade
// window.
func (f Fleet) validateNodes() error {
	if len(f.Nodes) == 0 {
		return bad("fleet.nodes", "empty: list every node's name and public key (nddmilter fleet init prints this node's entry); events are applied only when signed by a listed node")
	}
	names, keys := map[string]bool{}, map[string]bool{}
	for i, n := range f.Nodes {
		k := "fleet.nodes[" + strconv.Itoa(i) + "]"
		switch {
		case n.Name == "" || strings.ContainsAny(n.Name, " \t\r\n.*>"):
			return bad(k+".name", "%q is not a node name", n.Name)
		case !natsd.ValidUserKey(n.Key):
			return bad(k+".key", "%q is not a public user nkey (it starts with U; `nddmilter fleet nkey --public SEED` prints it)", n.Key)
		case names[n.Name]:
			return bad(k+".name", "node %s is listed twice", n.Name)
		case keys[n.Key]:
			return bad(k+".key", "this key is listed twice: each node has its own")
		}
		names[n.Name], keys[n.Key] = true, true
	}
	if f.Signing() == "" {
		return bad("fleet.signing_seed", "no signing key: set fleet.nats.nkey_seed (or signing_seed when the node authenticates otherwise); nddmilter fleet init makes one")
	}
	if u := f.AcceptUnsigned; len(u.Nodes) > 0 || u.Until != "" {
		if len(u.Nodes) == 0 || u.Until == "" {
			return bad("fleet.accept_unsigned", "nodes and until go together (the older builds' nodes, and when the upgrade ends)")
		}
		if _, err := time.Parse(time.RFC3339, u.Until); err != nil {
			return bad("fleet.accept_unsigned.until", "%q: want an RFC 3339 time, e.g. 2026-12-01T00:00:00Z", u.Until)
		}
		for _, n := range u.Nodes {
			if !names[n] {
				return bad("fleet.accept_unsigned.nodes", "%s is not in fleet.nodes", n)
			}
		}
	}
	return nil
}

// Client is the node's NATS connection options; embedded is the client
// URL of the embedded server when fleet.nats.urls is empty.
func (f Fleet) Client(embedded string) natsd.ClientOptions {
	urls := f.NATS.URLs
	if len(urls) == 0 && embedded != "" {
		urls = []string{embedded}
	}
	return natsd.ClientOptions{
		URLs: urls, Creds: f.NATS.Creds, NkeySeed: f.NATS.NkeySeed,
		User: f.NATS.User, PasswordFile: f.NATS.PasswordFile, TLS: f.NATS.TLS.Natsd(),
		Name: "nddmilter " + f.Node,
	}
}

// Server is the embedded server's options; storeDir is store.dir (its
// JetStream directory defaults to "nats" beside it).
func (f Fleet) Server(storeDir string) natsd.Options {
	e := f.Embedded
	dir := e.Dir
	if dir == "" {
		dir = filepath.Join(filepath.Dir(filepath.Clean(storeDir)), "nats")
	}
	o := natsd.Options{
		Name: f.Node, Listen: e.Listen, ClusterListen: e.ClusterListen, ClusterName: e.ClusterName,
		Routes: e.Routes, Dir: dir, Stream: f.Stream,
	}
	// The fleet's nodes are the server's node users, each allowed what
	// its node needs (natsd.Permissions); an embedded.users entry with
	// one of their keys is left out.
	nodeKeys := map[string]bool{}
	for _, n := range f.Nodes {
		o.Users = append(o.Users, natsd.User{Nkey: n.Key, Role: natsd.RoleNode, Node: n.Name, Snapshots: n.Snapshots})
		nodeKeys[n.Key] = true
	}
	e.Users = slices.DeleteFunc(slices.Clone(e.Users), func(u FleetUser) bool { return u.Nkey != "" && nodeKeys[u.Nkey] })
	e.NatsdServer(&o)
	return o
}
