package config

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
)

func TestFleetValidate(t *testing.T) {
	_, pub, err := natsd.NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	_, pub2, err := natsd.NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	// Every fleet lists its nodes and signs with this node's seed.
	id := "nodes: [{name: mx1, key: " + pub + "}], signing_seed: /etc/nddmilter/fleet.nk, "
	for _, tc := range []struct {
		name, yaml, key string // key "" : valid
	}{
		{"standalone default", "", ""},
		{"external", "fleet: {enabled: true, " + id + "nats: {urls: [nats://127.0.0.1:4222]}}", ""},
		{"embedded", "fleet: {enabled: true, " + id + "embedded: {enabled: true, routes: [nats-route://mx2:6222, nats-route://mx3:6222]}}", ""},
		{"embedded without routes", "fleet: {enabled: true, " + id + "embedded: {enabled: true}}", "fleet.embedded.routes"},
		{"single embedded server", "fleet: {enabled: true, " + id + "replicas: 1, embedded: {enabled: true, cluster_listen: '-'}}", ""},
		{"single embedded server, 3 replicas", "fleet: {enabled: true, " + id + "embedded: {enabled: true, cluster_listen: '-'}}", "fleet.replicas"},
		{"no server", "fleet: {enabled: true, " + id + "}", "fleet.nats.urls"},
		{"two identities", "fleet: {enabled: true, " + id + "nats: {urls: [nats://a:4222], creds: c, nkey_seed: s}}", "fleet.nats"},
		{"user without password", "fleet: {enabled: true, " + id + "nats: {urls: [nats://a:4222], user: u}}", "fleet.nats.user"},
		{"replicas", "fleet: {enabled: true, " + id + "replicas: 7, nats: {urls: [nats://a:4222]}}", "fleet.replicas"},
		{"hits_every", "fleet: {enabled: true, " + id + "hits_every: 1ms, nats: {urls: [nats://a:4222]}}", "fleet.hits_every"},
		{"max_clock_offset", "fleet: {enabled: true, " + id + "max_clock_offset: 10ms, nats: {urls: [nats://a:4222]}}", "fleet.max_clock_offset"},
		{"stream", "fleet: {enabled: true, " + id + "stream: a.b, nats: {urls: [nats://a:4222]}}", "fleet.stream"},
		{"node", "fleet: {enabled: true, " + id + "node: 'mx 1', nats: {urls: [nats://a:4222]}}", "fleet.node"},
		{"disabled is not checked", "fleet: {replicas: 9}", ""},
		{"no nodes", "fleet: {enabled: true, nats: {urls: [nats://a:4222], nkey_seed: s}}", "fleet.nodes"},
		{"no signing key", "fleet: {enabled: true, nodes: [{name: mx1, key: " + pub + "}], nats: {urls: [nats://a:4222]}}", "fleet.signing_seed"},
		{"nkey_seed signs", "fleet: {enabled: true, nodes: [{name: mx1, key: " + pub + "}], nats: {urls: [nats://a:4222], nkey_seed: s}}", ""},
		{"node key not a public key", "fleet: {enabled: true, nodes: [{name: mx1, key: SUAB}], signing_seed: s, nats: {urls: [nats://a:4222]}}", "fleet.nodes[0].key"},
		{"node listed twice", "fleet: {enabled: true, nodes: [{name: mx1, key: " + pub + "}, {name: mx1, key: " + pub2 + "}], signing_seed: s, nats: {urls: [nats://a:4222]}}", "fleet.nodes[1].name"},
		{"key listed twice", "fleet: {enabled: true, nodes: [{name: mx1, key: " + pub + "}, {name: mx2, key: " + pub + "}], signing_seed: s, nats: {urls: [nats://a:4222]}}", "fleet.nodes[1].key"},
		{"upgrade window", "fleet: {enabled: true, " + id + "accept_unsigned: {nodes: [mx1], until: 2026-12-01T00:00:00Z}, nats: {urls: [nats://a:4222]}}", ""},
		{"upgrade window without end", "fleet: {enabled: true, " + id + "accept_unsigned: {nodes: [mx1]}, nats: {urls: [nats://a:4222]}}", "fleet.accept_unsigned"},
		{"upgrade window of an unknown node", "fleet: {enabled: true, " + id + "accept_unsigned: {nodes: [mx9], until: 2026-12-01T00:00:00Z}, nats: {urls: [nats://a:4222]}}", "fleet.accept_unsigned.nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			var ve *ValueError
			switch {
			case tc.key == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.key != "" && (!errors.As(err, &ve) || ve.Key != tc.key):
				t.Fatalf("error %v, want one for %s", err, tc.key)
			}
		})
	}
	c := Default()
	c.Store.Dir = "/var/lib/nddmilter/store"
	if o := c.Fleet.Server(c.Store.Dir); o.Dir != "/var/lib/nddmilter/nats" {
		t.Errorf("embedded dir %q", o.Dir)
	}
}

// TestFleetEmbeddedTLS: a node whose own embedded server serves TLS needs
// the CA (and, with verify, a client certificate) to connect to it; the
// daemon would otherwise never connect (issue #34: the documented example
// lacked fleet.nats.tls.ca, and every node refused its own server).
func TestFleetEmbeddedTLS(t *testing.T) {
	_, pub, err := natsd.NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	base := "fleet: {enabled: true, nodes: [{name: mx1, key: " + pub + "}], nats: {nkey_seed: s%s}, " +
		"embedded: {enabled: true, routes: [nats-route://mx2:6222], tls: {cert: c.pem, key: c.key%s}}}"
	for _, tc := range []struct{ name, nats, server, key string }{
		{"no CA", "", "", "fleet.nats.tls.ca"},
		{"CA", ", tls: {ca: ca.pem}", "", ""},
		{"verify without a client certificate", ", tls: {ca: ca.pem}", ", ca: ca.pem, verify: true", "fleet.nats.tls.cert"},
		{"verify with one", ", tls: {ca: ca.pem, cert: c.pem, key: c.key}", ", ca: ca.pem, verify: true", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(fmt.Appendf(nil, base, tc.nats, tc.server))
			var ve *ValueError
			switch {
			case tc.key == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.key != "" && (!errors.As(err, &ve) || ve.Key != tc.key):
				t.Fatalf("error %v, want one for %s", err, tc.key)
			}
		})
	}
}

// TestFleetPageExamples: every fleet example of docs/FLEET.md is a valid
// configuration once its elided keys (UAB…) are real ones.
func TestFleetPageExamples(t *testing.T) {
	b, err := os.ReadFile("../../docs/FLEET.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(b, -1)
	if len(blocks) < 2 {
		t.Fatalf("%d yaml examples in FLEET.md, want the two setups", len(blocks))
	}
	for i, blk := range blocks {
		y := regexp.MustCompile(`U[A-Z]{2}…`).ReplaceAllStringFunc(string(blk[1]), func(string) string {
			_, pub, err := natsd.NewUserKey()
			if err != nil {
				t.Fatal(err)
			}
			return pub
		})
		if _, err := Parse([]byte(y)); err != nil {
			t.Errorf("example %d of FLEET.md: %v\n%s", i+1, err, y)
		}
	}
}
