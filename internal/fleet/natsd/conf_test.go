package natsd

import (
	"crypto/tls"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestConfigFile: the rendered nats-server configuration parses with the
// server's own parser into the same users, permissions, cluster and TLS;
// Debian's nats-server program checks it too when installed.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	pki := newPKI(t)
	_, node := userKey(t)
	_, reader := userKey(t)
	pw := writeFile(t, dir, "route.pw", []byte("r0ute\n"))
	o := Options{
		Name: "mx1", Listen: "127.0.0.1:4222", ClusterListen: "127.0.0.1:6222",
		Routes: []string{"nats-route://127.0.0.1:6223", "nats-route://127.0.0.1:6224"},
		Dir:    filepath.Join(dir, "js"), MaxStore: 1 << 30,
		Users:       []User{{Nkey: node}, {Nkey: reader, Role: RoleRead}},
		ClusterUser: "route", ClusterPasswordFile: pw,
		TLS:        TLS{CA: pki.CA, Cert: pki.ServerCert, Key: pki.ServerKey, Verify: true},
		ClusterTLS: TLS{CA: pki.CA, Cert: pki.ServerCert, Key: pki.ServerKey},
	}
	text, err := o.ConfigFile("127.0.0.1:8222")
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, dir, "nats.conf", []byte(text))
	got, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if got.ServerName != "mx1" || got.Port != 4222 || got.HTTPPort != 8222 || got.StoreDir != o.Dir || got.JetStreamMaxStore != 1<<30 {
		t.Errorf("server: %+v", got)
	}
	if len(got.Nkeys) != 2 || got.Nkeys[0].Nkey != node || got.Nkeys[1].Nkey != reader {
		t.Fatalf("nkeys: %+v", got.Nkeys)
	}
	if !slices.Contains(got.Nkeys[0].Permissions.Publish.Allow, EventSubjects("")) ||
		slices.Contains(got.Nkeys[1].Permissions.Publish.Allow, EventSubjects("")) {
		t.Errorf("permissions: node %v, reader %v", got.Nkeys[0].Permissions.Publish.Allow, got.Nkeys[1].Permissions.Publish.Allow)
	}
	if got.Cluster.Port != 6222 || got.Cluster.Username != "route" || got.Cluster.Password != "r0ute" || got.Cluster.TLSConfig == nil || len(got.Routes) != 2 {
		t.Errorf("cluster: %+v routes %v", got.Cluster, got.Routes)
	}
	if got.TLSConfig == nil || got.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("client TLS not required with verification")
	}
	if u := got.Routes[0].User; u == nil || u.Username() != "route" {
		t.Errorf("route URL %v: want the cluster user in it", got.Routes[0])
	}
	if bin, err := exec.LookPath("nats-server"); err == nil {
		out, err := exec.Command(bin, "-t", "-c", path).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "valid") {
			t.Errorf("%s -t: %v: %s\n%s", bin, err, out, text)
		}
	}
	if _, err := (Options{}).ConfigFile(""); err == nil {
		t.Error("no dir: want an error")
	}
}
