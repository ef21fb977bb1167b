package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/fleet"
	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
)

// fleetCheck is what `nddmilter fleet check` verifies of a node's fleet
// settings: the embedded server's options (when it runs one), the client
// options and files, and with connect a real connection: servers reachable,
// credentials accepted, JetStream on, the stream's state.
type fleetCheck struct {
	Embedded *natsd.Options // nil: no embedded server
	Client   natsd.ClientOptions
	Stream   string
	Connect  bool
	Timeout  time.Duration // of the connection probe; default 5s
	// Node and Settings are the node's name and what it would sign and
	// apply with (daemon.FleetSettings): with Connect, compared with the
	// statuses of the fleet's live nodes (nil Settings: not compared).
	Node     string
	Settings map[string]string
	// Warnings are printed first (config.Fleet.PlaintextWarnings).
	Warnings []string
}

// thisConfig names the configuration checked among the nodes in the
// settings it is compared on.
const thisConfig = "this configuration"

// hints say what to do about a probe's failure.
var fleetHints = []struct {
	err  error
	hint string
}{
	{natsd.ErrUnreachable, "check fleet.nats.urls, that the NATS servers run (nats-server, or the other nodes' fleet.embedded) and that their client port is open to this host"},
	{natsd.ErrAuth, "the servers do not accept this node's credentials: add its public key (nddmilter fleet nkey --public SEEDFILE) to the servers' users, or fix fleet.nats.creds/user"},
	{natsd.ErrNoJetStream, "enable JetStream on the NATS servers (a jetstream { store_dir: … } block; nddmilter fleet nats-conf writes one)"},
}

func (c fleetCheck) run(ctx context.Context, w io.Writer) error {
	for _, warn := range c.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if c.Embedded != nil {
		if err := c.Embedded.Validate(); err != nil {
			return fmt.Errorf("fleet.embedded: %w", err)
		}
		o := c.Embedded
		auth := fmt.Sprintf("%d users", len(o.Users))
		fmt.Fprintf(w, "embedded server: OK (listen %s, cluster %s, %d routes, %s, client TLS %v, route TLS %v)\n",
			orDefault(o.Listen, natsd.DefaultListen), orDefault(o.ClusterListen, natsd.DefaultClusterListen),
			len(o.Routes), auth, o.TLS.Enabled(), o.ClusterTLS.Enabled())
	}
	if err := c.Client.Validate(); err != nil {
		return fmt.Errorf("fleet.nats: %w", err)
	}
	fmt.Fprintf(w, "client: OK (%s; %s; TLS %v)\n", strings.Join(c.Client.URLs, ", "), authKind(c.Client), c.Client.TLS.Enabled())
	if !c.Connect {
		return nil
	}
	to := c.Timeout
	if to <= 0 {
		to = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	res, err := natsd.Probe(ctx, c.Client, c.Stream)
	if err != nil {
		for _, h := range fleetHints {
			if errors.Is(err, h.err) {
				return fmt.Errorf("%w\n  hint: %s", err, h.hint)
			}
		}
		return err
	}
	fmt.Fprintf(w, "connected: %s (cluster %q; servers %s), JetStream on, %d streams\n",
		res.Server, res.Cluster, strings.Join(res.Servers, ", "), res.Streams)
	switch {
	case res.Stream != nil:
		st := res.Stream
		leader, replicas := "", 0
		if st.Cluster != nil {
			leader, replicas = st.Cluster.Leader, len(st.Cluster.Replicas)
		}
		fmt.Fprintf(w, "stream %s: %d replicas configured, leader %q and %d followers, %d events, %d bytes, sequences %d..%d\n",
			st.Config.Name, st.Config.Replicas, leader, replicas, st.State.Msgs, st.State.Bytes, st.State.FirstSeq, st.State.LastSeq)
	case errors.Is(res.StreamErr, jetstream.ErrStreamNotFound):
		fmt.Fprintf(w, "stream %s: not created yet (the first node that starts creates it)\n", c.Stream)
	case res.StreamErr != nil:
		return fmt.Errorf("stream %s: %w", c.Stream, res.StreamErr)
	}
	if c.Settings == nil {
		return nil
	}
	return c.compareNodes(ctx, w)
}

// compareNodes reads the statuses of the fleet's nodes and compares the
// configuration's settings with the live nodes': a host that would sign
// or apply differently is refused before it starts. A live node already
// named Node is pointed out (it may be this host's own running daemon).
func (c fleetCheck) compareNodes(ctx context.Context, w io.Writer) error {
	nc, err := c.Client.Connect()
	if err != nil {
		return fmt.Errorf("read the nodes' statuses: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("read the nodes' statuses: %w", err)
	}
	nodes, err := fleet.ReadStatuses(ctx, js, c.Stream)
	if err != nil {
		return fmt.Errorf("read the nodes' statuses: %w", err)
	}
	node := c.Node
	if node == "" { // fleet.node's default, as the node takes it
		node, _ = os.Hostname()
	}
	var live []fleet.Status
	var names []string
	for _, s := range nodes {
		if s.Silent || len(s.Settings) == 0 {
			continue
		}
		live = append(live, s)
		names = append(names, s.Node)
		if s.Node == node {
			fmt.Fprintf(w, "node name %s: a live node publishes its status under it (as of %s): unless that is this host's running daemon, give this host its own fleet.node\n",
				node, s.Time.Local().Format("15:04:05"))
		}
	}
	if len(live) == 0 {
		fmt.Fprintf(w, "nodes: none live with settings to compare (%d known): this node's settings are the first\n", len(nodes))
		return nil
	}
	diff := fleet.SettingsDiffer(append(live, fleet.Status{Node: thisConfig, Settings: c.Settings}))
	if len(diff) > 0 {
		return fmt.Errorf("settings differ from the live nodes' (%s): a node that signs or applies reports differently does not share the fleet's campaign view (docs/FLEET.md, failure modes):\n  %s",
			strings.Join(names, ", "), strings.Join(diff, "\n  "))
	}
	fmt.Fprintf(w, "settings: the same as the %d live nodes' (%s)\n", len(live), strings.Join(names, ", "))
	return nil
}

func authKind(c natsd.ClientOptions) string {
	switch {
	case c.Creds != "":
		return "credentials file " + c.Creds
	case c.NkeySeed != "":
		return "nkey seed " + c.NkeySeed
	case c.User != "":
		return "user " + c.User
	}
	return "no credentials"
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// newFleetCheckCmd is `nddmilter fleet check`.
func newFleetCheckCmd(gf *globalFlags) *cobra.Command {
	var (
		connect bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "check [FILE]",
		Short: "Check the fleet section of a configuration file (with --connect: against the NATS servers)",
		Long: `Check FILE's (or --config's) fleet section beyond what config check does: the
embedded server's options (listeners, routes, users, TLS files readable and
valid; an open listener without users or an unauthenticated route listener
beyond loopback is refused) and the node's connection options (URLs, the
credentials, nkey seed or password file, TLS files). With --connect it also
connects once to the NATS servers and says whether they are reachable,
accept this node's credentials and run JetStream, and what the fleet's
stream holds, and compares the settings this node would sign and apply
reports with (lexicon, model, signature, revocation and expiry settings)
with those of the fleet's live nodes; each failure comes with a hint.
The exit status is 1 on any problem.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := gf.config
			if len(args) == 1 {
				path = args[0]
			}
			if path == "" {
				return fmt.Errorf("fleet check: name a file (or use --config)")
			}
			cfg, err := daemon.LoadConfig(path, gf.store)
			if err != nil {
				return err
			}
			fc := cfg.Fleet
			if !fc.Enabled {
				return fmt.Errorf("fleet check: %s: fleet.enabled is false (a standalone daemon)", path)
			}
			c := fleetCheck{Stream: fc.Stream, Connect: connect, Timeout: timeout, Node: fc.Node, Warnings: fc.PlaintextWarnings()}
			if connect {
				vers, err := daemon.CheckConfig(cfg)
				if err != nil {
					return fmt.Errorf("fleet check: %s: %w", path, err)
				}
				c.Settings = daemon.FleetSettings(cfg, vers)
			}
			embedded := ""
			if fc.Embedded.Enabled {
				o := fc.Server(cfg.Store.Dir)
				c.Embedded = &o
				scheme := "nats://"
				if o.TLS.Enabled() {
					scheme = "tls://"
				}
				embedded = scheme + orDefault(o.Listen, natsd.DefaultListen)
			}
			c.Client = fc.Client(embedded)
			if err := c.run(cmd.Context(), cmd.OutOrStdout()); err != nil {
				return fmt.Errorf("fleet check: %s: %w", path, err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&connect, "connect", false, "connect to the NATS servers (reachable, credentials accepted, JetStream, the stream) and compare this node's settings with the live nodes'")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "bound on the --connect probe")
	return cmd
}
