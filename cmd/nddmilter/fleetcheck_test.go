package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nddmilter/nddmilter/internal/fleet"
	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
)

func TestFleetCheck(t *testing.T) {
	dir := t.TempDir()
	seed, pub, err := natsd.NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	seedFile := filepath.Join(dir, "node.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	_, otherPub, _ := natsd.NewUserKey()
	srv, err := natsd.Start(natsd.Options{Listen: "127.0.0.1:0", ClusterListen: "-", Dir: filepath.Join(dir, "js"), Users: []natsd.User{{Nkey: pub}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	if err := srv.WaitJetStream(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := fmt.Sprintf("nats://%s", l.Addr())
	l.Close()
	url := []string{srv.ClientURL()}
	tests := []struct {
		name    string
		c       fleetCheck
		out     string // in the output
		wantErr string // in the error; "" = success
	}{
		{"connect ok", fleetCheck{Client: natsd.ClientOptions{URLs: url, NkeySeed: seedFile}, Stream: "NDDMILTER", Connect: true}, "stream NDDMILTER: not created yet", ""},
		{"offline ok", fleetCheck{Client: natsd.ClientOptions{URLs: url, NkeySeed: seedFile}}, "client: OK", ""},
		{"embedded ok", fleetCheck{Embedded: &natsd.Options{Dir: dir, Users: []natsd.User{{Nkey: otherPub}}}, Client: natsd.ClientOptions{URLs: url}}, "embedded server: OK", ""},
		{"embedded open", fleetCheck{Embedded: &natsd.Options{Dir: dir, Listen: "0.0.0.0:4222"}, Client: natsd.ClientOptions{URLs: url}}, "", "fleet.embedded"},
		{"no credentials", fleetCheck{Client: natsd.ClientOptions{URLs: url}, Connect: true}, "", "add its public key"},
		{"unreachable", fleetCheck{Client: natsd.ClientOptions{URLs: []string{closed}, NkeySeed: seedFile}, Connect: true}, "", "check fleet.nats.urls"},
		{"bad url", fleetCheck{Client: natsd.ClientOptions{URLs: []string{"127.0.0.1:4222"}}}, "", "fleet.nats"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := tc.c.run(context.Background(), &out)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("run: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("run: %v, want an error mentioning %q", err, tc.wantErr)
			}
			if !strings.Contains(out.String(), tc.out) {
				t.Errorf("output %q lacks %q", out.String(), tc.out)
			}
		})
	}
}

// TestFleetCheckSettings: with --connect, the settings a node would sign
// and apply with are compared with the statuses the fleet's live nodes
// published (here put in the status bucket as nodes put them).
func TestFleetCheckSettings(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	seed, pub, err := natsd.NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	seedFile := filepath.Join(dir, "admin.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := natsd.Start(natsd.Options{Listen: "127.0.0.1:0", ClusterListen: "-", Dir: filepath.Join(dir, "js"),
		Users: []natsd.User{{Nkey: pub, Role: natsd.RoleAdmin}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	if err := srv.WaitJetStream(ctx); err != nil {
		t.Fatal(err)
	}
	client := natsd.ClientOptions{URLs: []string{srv.ClientURL()}, NkeySeed: seedFile}
	check := func(node string, settings map[string]string) (string, error) {
		var out bytes.Buffer
		err := fleetCheck{Client: client, Stream: "NDDMILTER", Connect: true, Node: node, Settings: settings}.run(ctx, &out)
		return out.String(), err
	}
	mine := map[string]string{"signatures.lexicon": "aa", "store.expiry": "720h0m0s"}
	if out, err := check("mx3", mine); err != nil || !strings.Contains(out, "nodes: none live with settings to compare (0 known)") {
		t.Errorf("no fleet yet: %v\n%s", err, out)
	}

	nc, err := client.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "NDDMILTER_nodes"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []fleet.Status{{Node: "mx1", Time: time.Now(), Settings: mine}, {Node: "mx2", Time: time.Now(), Settings: mine}} {
		b, _ := json.Marshal(s)
		if _, err := kv.Put(ctx, s.Node, b); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		node     string
		settings map[string]string
		out      string
		wantErr  string
	}{
		{"the same", "mx3", mine, "settings: the same as the 2 live nodes' (mx1, mx2)", ""},
		{"another lexicon", "mx3", map[string]string{"signatures.lexicon": "bb", "store.expiry": "720h0m0s"}, "",
			"settings differ from the live nodes' (mx1, mx2): a node that signs or applies reports differently does not share the fleet's campaign view (docs/FLEET.md, failure modes):\n  signatures.lexicon: aa (mx1, mx2), bb (this configuration)"},
		{"a name in use", "mx1", mine, "node name mx1: a live node publishes its status under it", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := check(tt.node, tt.settings)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("run: %v, want %q", err, tt.wantErr)
			}
			if !strings.Contains(out, tt.out) {
				t.Errorf("output %q lacks %q", out, tt.out)
			}
			if tt.wantErr != "" && strings.Contains(err.Error(), "store.expiry") {
				t.Errorf("a setting that agrees is named: %v", err)
			}
		})
	}
}

func TestFleetCheckCmd(t *testing.T) {
	dir := t.TempDir()
	seedFile := filepath.Join(dir, "node.nk")
	out, err := runCmd(t, "fleet", "nkey", "--seed", seedFile)
	if err != nil {
		t.Fatal(err)
	}
	pub := strings.TrimSpace(out)
	srv, err := natsd.Start(natsd.Options{Listen: "127.0.0.1:0", ClusterListen: "-", Dir: filepath.Join(dir, "js"), Users: []natsd.User{{Nkey: pub}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	write := func(name, fleet string) string {
		p := filepath.Join(dir, name)
		cfg := fmt.Sprintf("store:\n  dir: %s\nfleet:\n%s", filepath.Join(dir, "store"), fleet)
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nodes := fmt.Sprintf("  nodes: [{name: mx1, key: %s}]\n", pub)
	good := write("good.yaml", fmt.Sprintf("  enabled: true\n%s  nats:\n    urls: [%s]\n    nkey_seed: %s\n", nodes, srv.ClientURL(), seedFile))
	out, err = runCmd(t, "fleet", "check", good, "--connect")
	if err != nil || !strings.Contains(out, "JetStream on") {
		t.Errorf("good file: %v\n%s", err, out)
	}
	plain := write("plain.yaml", fmt.Sprintf("  enabled: true\n%s  nats:\n    urls: [nats://192.0.2.9:4222]\n    nkey_seed: %s\n", nodes, seedFile))
	if out, err := runCmd(t, "fleet", "check", plain); err != nil || !strings.Contains(out, "warning: fleet.nats.urls nats://192.0.2.9:4222 is not loopback and not TLS") {
		t.Errorf("plaintext URL beyond loopback: %v\n%s", err, out)
	}
	standalone := write("standalone.yaml", "  enabled: false\n")
	if _, err := runCmd(t, "fleet", "check", standalone); err == nil || !strings.Contains(err.Error(), "fleet.enabled is false") {
		t.Errorf("standalone: %v", err)
	}
	missing := write("missing.yaml", fmt.Sprintf("  enabled: true\n%s  nats:\n    urls: [%s]\n    nkey_seed: %s\n", nodes, srv.ClientURL(), filepath.Join(dir, "none.nk")))
	if _, err := runCmd(t, "fleet", "check", missing); err == nil || !strings.Contains(err.Error(), "nkey_seed") {
		t.Errorf("missing seed file: %v", err)
	}
}
