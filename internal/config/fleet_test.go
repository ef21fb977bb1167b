package config

import (
	"errors"
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
