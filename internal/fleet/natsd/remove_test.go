package natsd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestRemoveServer: a server that left for good is removed from the
// JetStream cluster, and the stream's replica on it moves to the server
// added in its place, which catches up. A server still connected, an
// unknown name and a server without users (no system user) are refused.
// The servers require client certificates: the system user's in-process
// connection is not held to them.
func TestRemoveServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 4-server cluster")
	}
	pki := newPKI(t)
	srvTLS := TLS{CA: pki.CA, Cert: pki.ServerCert, Key: pki.ServerKey, Verify: true}
	cliTLS := TLS{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}
	nodeSeed, nodePub := userKey(t)
	users := []User{{Nkey: nodePub}}
	var servers []*Server
	var routes []string
	withFreePorts(t, 3, func(cp []int) error {
		routes = nil
		for _, p := range cp {
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
		}
		servers = nil
		for i, p := range cp {
			s, err := Start(Options{Name: fmt.Sprintf("n%d", i), Listen: "127.0.0.1:0", ClusterListen: fmt.Sprintf("127.0.0.1:%d", p),
				Routes: routes, Dir: t.TempDir(), Users: users, TLS: srvTLS})
			if err != nil {
				shutdownAll(servers)
				return fmt.Errorf("server %d: %w", i, err)
			}
			servers = append(servers, s)
		}
		return nil
	})
	t.Cleanup(func() { shutdownAll(servers) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.WaitJetStream(ctx); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := ClientOptions{URLs: []string{servers[0].ClientURL()}, NkeySeed: nodeSeed, TLS: cliTLS}.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var st jetstream.Stream
	for i := 0; ; i++ { // the meta leader may still be settling
		actx, acancel := context.WithTimeout(ctx, 3*time.Second)
		st, err = js.CreateStream(actx, jetstream.StreamConfig{Name: "NDDMILTER", Subjects: []string{"NDDMILTER.>"}, Replicas: 3})
		acancel()
		if err == nil {
			break
		}
		if i == 5 {
			t.Fatalf("create stream: %v", err)
		}
	}
	for i := range 5 {
		if _, err := js.Publish(ctx, "NDDMILTER.events", []byte("r"), jetstream.WithMsgID(fmt.Sprint("id-", i))); err != nil {
			t.Fatal(err)
		}
	}

	// Refused: a server still connected (this one, or another), a name
	// no member has.
	for _, name := range []string{"n0", "n1"} {
		if err := servers[0].RemoveServer(ctx, name); !errors.Is(err, ErrServerAlive) {
			t.Errorf("remove %s while it runs: %v, want ErrServerAlive", name, err)
		}
	}
	if err := servers[0].RemoveServer(ctx, "nope"); !errors.Is(err, ErrNotMember) {
		t.Errorf("remove an unknown server: %v, want ErrNotMember", err)
	}

	// n2 leaves for good, n3 takes its place, n2 is removed.
	if err := servers[2].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	servers = servers[:2]
	n3, err := Start(Options{Name: "n3", Listen: "127.0.0.1:0", ClusterListen: "127.0.0.1:0", Routes: routes, Dir: t.TempDir(), Users: users, TLS: srvTLS})
	if err != nil {
		t.Fatal(err)
	}
	servers = append(servers, n3)
	if err := n3.WaitJetStream(ctx); err != nil {
		t.Fatal(err)
	}
	for { // n0 sees n2 gone
		err = servers[0].RemoveServer(ctx, "n2")
		if !errors.Is(err, ErrServerAlive) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("remove n2, stopped: %v", err)
	}
	var members []string
	for ctx.Err() == nil {
		info, err := st.Info(ctx)
		if err == nil && info.Cluster != nil {
			members = []string{info.Cluster.Leader}
			current := true
			for _, r := range info.Cluster.Replicas {
				members = append(members, r.Name)
				current = current && r.Current && !r.Offline
			}
			slices.Sort(members)
			if slices.Equal(members, []string{"n0", "n1", "n3"}) && current && info.State.Msgs == 5 {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("the stream's replicas are %v, want n0, n1, n3 all current", members)
	}

	// A server alone has no cluster to remove a server from.
	for _, tt := range []struct {
		opt  Options
		want error
	}{
		{Options{Listen: "127.0.0.1:0", ClusterListen: "-", Users: users}, ErrNotClustered},
	} {
		tt.opt.Dir = t.TempDir()
		alone, err := Start(tt.opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := alone.RemoveServer(ctx, "n2"); !errors.Is(err, tt.want) {
			t.Errorf("remove on a server alone (%d users): %v, want %v", len(tt.opt.Users), err, tt.want)
		}
		shutdownAll([]*Server{alone})
	}
}
