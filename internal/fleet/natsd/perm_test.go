package natsd

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNodePermissions: with the fleet's nodes as users, a node's key
// publishes events and its own status, but cannot delete a stream
// message, purge or change the stream, delete it, write another node's
// status or replace the snapshot; only the snapshot node stores
// snapshots. A server without users is refused, also on loopback, and a
// client without credentials cannot connect.
func TestNodePermissions(t *testing.T) {
	if _, err := Start(Options{Listen: "127.0.0.1:0", ClusterListen: "-", Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no users") {
		t.Fatalf("a server without users on loopback: %v", err)
	}
	adminSeed, adminPub := userKey(t)
	otherSeed, otherPub := userKey(t)
	s, err := Start(Options{Listen: "127.0.0.1:0", ClusterListen: "-", Dir: t.TempDir(), Users: []User{
		{Nkey: adminPub, Node: "mx1", Snapshots: true}, {Nkey: otherPub, Node: "mx2"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitJetStream(ctx); err != nil {
		t.Fatal(err)
	}
	js := func(seed string) jetstream.JetStream {
		t.Helper()
		nc, err := ClientOptions{URLs: []string{s.ClientURL()}, NkeySeed: seed}.Connect()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		j, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	admin, other := js(adminSeed), js(otherSeed)
	st, err := admin.CreateStream(ctx, jetstream.StreamConfig{Name: "NDDMILTER", Subjects: []string{"NDDMILTER.events"}})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := admin.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "NDDMILTER_snapshot"})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := admin.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "NDDMILTER_nodes"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, "state", []byte("snapshot of mx1")); err != nil {
		t.Fatalf("the snapshot node stores a snapshot: %v", err)
	}
	if _, err := kv.Put(ctx, "mx1", []byte("status of mx1")); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Publish(ctx, "NDDMILTER.events", []byte("event of mx1")); err != nil {
		t.Fatal(err)
	}

	// What mx2's key may do.
	if _, err := other.Publish(ctx, "NDDMILTER.events", []byte("event of mx2")); err != nil {
		t.Fatalf("mx2 publishes an event: %v", err)
	}
	okv, err := other.KeyValue(ctx, "NDDMILTER_nodes")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := okv.Put(ctx, "mx2", []byte("status of mx2")); err != nil {
		t.Fatalf("mx2 puts its status: %v", err)
	}
	if e, err := okv.Get(ctx, "mx1"); err != nil || string(e.Value()) != "status of mx1" {
		t.Fatalf("mx2 reads mx1's status: %v", err)
	}
	// What it may not: each refused, and nothing changed.
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, time.Second) }
	ost, err := other.Stream(ctx, "NDDMILTER")
	if err != nil {
		t.Fatal(err)
	}
	oobs, err := other.ObjectStore(ctx, "NDDMILTER_snapshot")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		try  func(context.Context) error
	}{
		{"delete a stream message", func(c context.Context) error { return ost.DeleteMsg(c, 1) }},
		{"erase a stream message", func(c context.Context) error { return ost.SecureDeleteMsg(c, 1) }},
		{"purge the stream", func(c context.Context) error { return ost.Purge(c) }},
		{"shorten the stream's age limit", func(c context.Context) error {
			_, err := other.UpdateStream(c, jetstream.StreamConfig{Name: "NDDMILTER", Subjects: []string{"NDDMILTER.events"}, MaxAge: time.Second})
			return err
		}},
		{"delete the stream", func(c context.Context) error { return other.DeleteStream(c, "NDDMILTER") }},
		{"write mx1's status", func(c context.Context) error { _, err := okv.Put(c, "mx1", []byte("forged")); return err }},
		{"replace the snapshot", func(c context.Context) error { _, err := oobs.PutBytes(c, "state", []byte("forged")); return err }},
	} {
		c, cancel := short()
		err := tc.try(c)
		cancel()
		if err == nil {
			t.Errorf("mx2 could %s", tc.name)
		}
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 || info.State.FirstSeq != 1 || info.Config.MaxAge != 0 {
		t.Errorf("stream after mx2's tries: %+v %+v", info.State, info.Config)
	}
	if e, err := kv.Get(ctx, "mx1"); err != nil || string(e.Value()) != "status of mx1" {
		t.Errorf("mx1's status after mx2's tries: %v", err)
	}
	if b, err := obs.GetBytes(ctx, "state"); err != nil || !bytes.Equal(b, []byte("snapshot of mx1")) {
		t.Errorf("snapshot after mx2's tries: %q %v", b, err)
	}

	// No credentials: refused at connect, also on loopback.
	opts, err := ClientOptions{URLs: []string{s.ClientURL()}}.NatsOptions()
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, nats.RetryOnFailedConnect(false), nats.MaxReconnects(0))
	if anon, err := nats.Connect(s.ClientURL(), opts...); err == nil {
		anon.Close()
		t.Error("a client without credentials connected")
	} else if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("anonymous connect: %v, want an authorization error", err)
	}
}
