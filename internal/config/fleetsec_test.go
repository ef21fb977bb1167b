package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
)

func TestFleetServerSecurityValidate(t *testing.T) {
	_, pub, err := natsd.NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	tls := FleetTLS{CA: "ca.pem", Cert: "c.pem", Key: "k.pem"}
	tests := []struct {
		name string
		s    FleetServerSecurity
		key  string // "" = valid
	}{
		{"empty", FleetServerSecurity{}, ""},
		{"nkey node", FleetServerSecurity{Users: []FleetUser{{Nkey: pub}}}, ""},
		{"nkey reader", FleetServerSecurity{Users: []FleetUser{{Nkey: pub, Role: "read"}}}, ""},
		{"password user", FleetServerSecurity{Users: []FleetUser{{User: "mx1", PasswordFile: "pw"}}}, ""},
		{"full tls", FleetServerSecurity{TLS: FleetTLS{CA: "ca", Cert: "c", Key: "k", Verify: true}, ClusterTLS: tls}, ""},
		{"both", FleetServerSecurity{Users: []FleetUser{{Nkey: pub, User: "a"}}}, "fleet.embedded.users[0]"},
		{"neither", FleetServerSecurity{Users: []FleetUser{{Role: "node"}}}, "fleet.embedded.users[0]"},
		{"seed not public key", FleetServerSecurity{Users: []FleetUser{{Nkey: "SUAM"}}}, "fleet.embedded.users[0].nkey"},
		{"no password", FleetServerSecurity{Users: []FleetUser{{Nkey: pub}, {User: "a"}}}, "fleet.embedded.users[1].password_file"},
		{"bad role", FleetServerSecurity{Users: []FleetUser{{Nkey: pub, Role: "root"}}}, "fleet.embedded.users[0].role"},
		{"admin", FleetServerSecurity{Users: []FleetUser{{Nkey: pub, Role: "admin"}}}, ""},
		{"tls without key", FleetServerSecurity{TLS: FleetTLS{Cert: "c"}}, "fleet.embedded.tls"},
		{"tls verify without ca", FleetServerSecurity{TLS: FleetTLS{Cert: "c", Key: "k", Verify: true}}, "fleet.embedded.tls.verify"},
		{"cluster tls without ca", FleetServerSecurity{ClusterTLS: FleetTLS{Cert: "c", Key: "k"}}, "fleet.embedded.cluster_tls"},
		{"cluster user without password", FleetServerSecurity{ClusterUser: "route"}, "fleet.embedded.cluster_user"},
		{"negative store", FleetServerSecurity{MaxStoreBytes: -1}, "fleet.embedded.max_store_bytes"},
		{"payload too large", FleetServerSecurity{MaxPayloadBytes: 65 << 20}, "fleet.embedded.max_payload_bytes"},
		{"payload 8 MiB", FleetServerSecurity{MaxPayloadBytes: 8 << 20}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate("fleet.embedded")
			if tc.key == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ve *ValueError
			if !errors.As(err, &ve) || ve.Key != tc.key {
				t.Fatalf("Validate: %v, want a ValueError on %s", err, tc.key)
			}
		})
	}
	var o natsd.Options
	FleetServerSecurity{Users: []FleetUser{{Nkey: pub, Role: "read"}}, ClusterTLS: tls, MaxStoreBytes: 5, MaxPayloadBytes: 7}.NatsdServer(&o)
	if len(o.Users) != 1 || o.Users[0].Role != natsd.RoleRead || o.ClusterTLS.CA != "ca.pem" || o.MaxStore != 5 || o.MaxPayload != 7 {
		t.Errorf("NatsdServer: %+v", o)
	}
	if err := (FleetTLS{CA: "ca"}).ValidateClientTLS("fleet.nats.tls"); err != nil {
		t.Errorf("client tls with a CA only: %v", err)
	}
	if err := (FleetTLS{CA: "ca", Verify: true}).ValidateClientTLS("fleet.nats.tls"); err == nil || !strings.Contains(err.Error(), "verify") {
		t.Errorf("client tls with verify: %v", err)
	}
}

// TestFleetExample: config/fleet-mx1.yaml is a valid configuration with the
// fleet, its embedded server and users.
func TestFleetExample(t *testing.T) {
	c, err := Load("../../config/fleet-mx1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := c.Fleet
	if !f.Enabled || !f.Embedded.Enabled || len(f.Embedded.Users) != 1 || len(f.Nodes) != 3 || len(f.Embedded.Routes) != 3 || f.Node != "mx1" {
		t.Errorf("fleet section: %+v", f)
	}
	o := f.Server(c.Store.Dir)
	if len(o.Users) != 4 || o.Users[0].Node != "mx1" || !o.Users[0].Snapshots || o.Users[1].Snapshots || o.Users[3].Role != natsd.RoleRead || !o.TLS.Verify || o.ClusterTLS.CA == "" {
		t.Errorf("embedded server options: %+v", o)
	}
}

// TestPlaintextWarnings: listeners and server URLs beyond loopback
// without TLS are named; loopback and TLS ones are not.
func TestPlaintextWarnings(t *testing.T) {
	tls := FleetTLS{CA: "ca.pem", Cert: "c.pem", Key: "k.pem"}
	emb := func(listen, cluster string, t, ct FleetTLS) Fleet {
		f := defaultFleet()
		f.Enabled, f.Embedded.Enabled = true, true
		f.Embedded.Listen, f.Embedded.ClusterListen, f.Embedded.TLS, f.Embedded.ClusterTLS = listen, cluster, t, ct
		return f
	}
	ext := func(tl FleetTLS, urls ...string) Fleet {
		f := defaultFleet()
		f.Enabled, f.NATS.URLs, f.NATS.TLS = true, urls, tl
		return f
	}
	off := emb("0.0.0.0:4222", "0.0.0.0:6222", FleetTLS{}, FleetTLS{})
	off.Enabled = false
	for _, tc := range []struct {
		name string
		f    Fleet
		want []string // substrings, one per warning
	}{
		{"defaults on loopback", emb("", "", FleetTLS{}, FleetTLS{}), nil},
		{"loopback", emb("127.0.0.1:4222", "[::1]:6222", FleetTLS{}, FleetTLS{}), nil},
		{"open listeners", emb("192.0.2.1:4222", "192.0.2.1:6222", FleetTLS{}, FleetTLS{}), []string{"fleet.embedded.listen 192.0.2.1:4222", "fleet.embedded.cluster_listen 192.0.2.1:6222"}},
		{"all interfaces", emb(":4222", "-", FleetTLS{}, FleetTLS{}), []string{"fleet.embedded.listen :4222"}},
		{"tls", emb("192.0.2.1:4222", "192.0.2.1:6222", tls, tls), nil},
		{"client tls only", emb("192.0.2.1:4222", "192.0.2.1:6222", tls, FleetTLS{}), []string{"cluster_listen"}},
		{"plain url", ext(FleetTLS{}, "nats://nats1.example.net:4222", "nats://127.0.0.1:4222"), []string{"nats://nats1.example.net:4222"}},
		{"tls url", ext(FleetTLS{}, "tls://nats1.example.net:4222"), nil},
		{"url with client tls", ext(FleetTLS{CA: "ca.pem"}, "nats://nats1.example.net:4222"), nil},
		{"disabled", off, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := tc.f.PlaintextWarnings()
			if len(ws) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", ws, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(ws[i], w) {
					t.Errorf("warning %q lacks %q", ws[i], w)
				}
			}
		})
	}
}
