package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
}

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
	if c.Embedded != nil {
		if err := c.Embedded.Validate(); err != nil {
			return fmt.Errorf("fleet.embedded: %w", err)
		}
		o := c.Embedded
		auth := "no authentication (loopback only)"
		if len(o.Users) > 0 {
			auth = fmt.Sprintf("%d users", len(o.Users))
		}
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
