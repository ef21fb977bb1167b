package natsd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Sentinel errors of RemoveServer.
var (
	// ErrNoSystemUser: the server has no users, so no system-account user
	// either (an unauthenticated server is a loopback test setup).
	ErrNoSystemUser = errors.New("natsd: removing a server needs users on the embedded server (fleet.embedded.users)")
	// ErrServerAlive: the server to remove is still connected to this one.
	ErrServerAlive = errors.New("natsd: the server is still connected")
	// ErrNotClustered: the server runs alone (cluster_listen "-").
	ErrNotClustered = errors.New("natsd: this server is not clustered (cluster_listen is \"-\"): there is no other server to remove")
	// ErrNotMember: no JetStream cluster member has that name.
	ErrNotMember = errors.New("natsd: not a member of the JetStream cluster")
)

// removeTimeoutHint is said when the meta leader does not answer.
const removeTimeoutHint = "no answer from the JetStream meta leader (is a majority of the servers up?)"

// addSystemUser adds a user of the system account that only this process
// knows (its key is made here and never leaves memory), for the requests
// JetStream takes from the system account alone (RemoveServer). A server
// without users gets none: adding one would make every client
// authenticate.
func addSystemUser(so *server.Options) (nkeys.KeyPair, error) {
	if len(so.Nkeys) == 0 && len(so.Users) == 0 {
		return nil, nil
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("natsd: system user: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("natsd: system user: %w", err)
	}
	// With the global and the system account alone and no authorization
	// block in a configuration file, the server would add a password-less
	// user of the global account (anyone could connect): the options here
	// come from code, and the package marks the block as defined only
	// when it parses one. An empty one keeps the default timeout.
	if err := so.ProcessConfigString("authorization {}"); err != nil {
		return nil, fmt.Errorf("natsd: system user: %w", err)
	}
	sys := server.NewAccount(server.DEFAULT_SYSTEM_ACCOUNT)
	so.Accounts = append(so.Accounts, sys)
	so.SystemAccount = server.DEFAULT_SYSTEM_ACCOUNT
	so.Nkeys = append(so.Nkeys, &server.NkeyUser{Nkey: pub, Account: sys})
	return kp, nil
}

// RemoveServer removes the server named name from the JetStream cluster,
// once it has left for good (a retired host): until then the cluster
// counts it as an offline member, the stream keeps a replica on it and
// places none elsewhere. After the removal JetStream moves that replica
// to a server without one, if there is one (add the new host first). It
// is the request `nats server raft peer-remove` sends, made from this
// process's own system-account user. ErrServerAlive if the server is
// still connected to this one, ErrNotMember if no member has the name.
// While another membership change is in flight or a meta leader is being
// elected it tries again; ctx bounds the whole of it.
func (s *Server) RemoveServer(ctx context.Context, name string) error {
	if s.sys == nil {
		return ErrNoSystemUser
	}
	if s.opt.ClusterListen == "-" {
		return ErrNotClustered
	}
	if name == s.Name() {
		return fmt.Errorf("%w: %s is this server (run the command against another host's daemon)", ErrServerAlive, name)
	}
	if rz, err := s.ns.Routez(nil); err == nil && slices.ContainsFunc(rz.Routes, func(r *server.RouteInfo) bool { return r.RemoteName == name }) {
		return fmt.Errorf("%w: %s (stop its host's daemon for good first)", ErrServerAlive, name)
	}
	pub, err := s.sys.PublicKey()
	if err != nil {
		return fmt.Errorf("natsd: system user: %w", err)
	}
	nc, err := nats.Connect("", nats.InProcessServer(s.ns), nats.Name("nddmilter system"),
		nats.Nkey(pub, s.sys.Sign), nats.NoReconnect())
	if err != nil {
		return fmt.Errorf("natsd: connect as the system user: %w", err)
	}
	defer nc.Close()
	req, err := json.Marshal(server.JSApiMetaServerRemoveRequest{Server: name})
	if err != nil {
		return fmt.Errorf("natsd: remove %s: %w", name, err)
	}
	for {
		err := removeOnce(ctx, nc, name, req)
		if !errors.Is(err, errChangeInFlight) {
			return err
		}
		// Another membership change (a server just joined) is being
		// committed, the leader takes one at a time; or the servers are
		// electing a meta leader.
		select {
		case <-ctx.Done():
			return fmt.Errorf("natsd: remove %s: %s, or another membership change is still in progress: %w", name, removeTimeoutHint, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// errChangeInFlight: the meta leader is committing another membership
// change, or there is no meta leader at the moment.
var errChangeInFlight = errors.New("cluster member change in progress")

func removeOnce(ctx context.Context, nc *nats.Conn, name string, req []byte) error {
	msg, err := nc.RequestWithContext(ctx, server.JSApiRemoveServer, req)
	if errors.Is(err, nats.ErrNoResponders) {
		return errChangeInFlight // no meta leader yet: an election, as after the old leader stopped
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("natsd: remove %s: %s: %w", name, removeTimeoutHint, err)
		}
		return fmt.Errorf("natsd: remove %s: %w", name, err)
	}
	var resp server.JSApiMetaServerRemoveResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("natsd: remove %s: malformed answer: %w", name, err)
	}
	if resp.Error != nil {
		switch resp.Error.ErrCode {
		case uint16(server.JSClusterServerNotMemberErr):
			return fmt.Errorf("%w: %s (`nddmilter fleet status` lists the stream's copies by server name, each host's fleet.node)", ErrNotMember, name)
		case uint16(server.JSClusterServerMemberChangeInflightErr):
			return errChangeInFlight
		}
		return fmt.Errorf("natsd: remove %s: %s", name, resp.Error.Description)
	}
	if !resp.Success {
		return fmt.Errorf("natsd: remove %s: not confirmed", name)
	}
	return nil
}
