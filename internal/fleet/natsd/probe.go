package natsd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Probe errors, for `nddmilter fleet check --connect` to say what is wrong.
var (
	// ErrUnreachable: no server of the URLs answered.
	ErrUnreachable = errors.New("natsd: no NATS server reachable")
	// ErrAuth: a server refused the credentials.
	ErrAuth = errors.New("natsd: NATS refused the credentials")
	// ErrNoJetStream: connected, but JetStream is not enabled for this user.
	ErrNoJetStream = errors.New("natsd: JetStream not available")
)

// ProbeResult is what one connection attempt learned about the cluster.
type ProbeResult struct {
	Server    string   // the server connected to
	Cluster   string   // its cluster name ("" when not clustered)
	Servers   []string // client URLs the server announced (the cluster's)
	Streams   int      // streams of the account
	Stream    *jetstream.StreamInfo
	StreamErr error // why Stream is nil (jetstream.ErrStreamNotFound: not created yet)
}

// Probe connects once (no retries) with c, asks JetStream for the
// account's information and the named stream's (when stream is not
// empty), and closes. Errors wrap ErrUnreachable, ErrAuth or
// ErrNoJetStream.
func Probe(ctx context.Context, c ClientOptions, stream string) (*ProbeResult, error) {
	opts, err := c.NatsOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.RetryOnFailedConnect(false), nats.MaxReconnects(0))
	url := strings.Join(c.URLs, ",")
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization") {
			return nil, fmt.Errorf("%w: %s: %w", ErrAuth, url, err)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, url, err)
	}
	defer nc.Close()
	res := &ProbeResult{Server: nc.ConnectedUrlRedacted(), Cluster: nc.ConnectedClusterName(), Servers: nc.DiscoveredServers()}
	if len(res.Servers) == 0 {
		res.Servers = nc.Servers()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoJetStream, err)
	}
	ai, err := js.AccountInfo(ctx)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrNoJetStream, err)
	}
	res.Streams = ai.Streams
	if stream != "" {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			res.StreamErr = err
		} else {
			res.Stream = st.CachedInfo()
		}
	}
	return res, nil
}

// InProcess is the nats.go option connecting a client to this server
// without a socket (a node talking to its own embedded server).
func (s *Server) InProcess() nats.Option { return nats.InProcessServer(s.ns) }
