package config

import (
	"errors"
	"testing"
)

func TestFleetValidate(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, key string // key "" : valid
	}{
		{"standalone default", "", ""},
		{"external", "fleet: {enabled: true, nats: {urls: [nats://127.0.0.1:4222]}}", ""},
		{"embedded", "fleet: {enabled: true, embedded: {enabled: true, routes: [nats-route://mx2:6222, nats-route://mx3:6222]}}", ""},
		{"embedded without routes", "fleet: {enabled: true, embedded: {enabled: true}}", "fleet.embedded.routes"},
		{"single embedded server", "fleet: {enabled: true, replicas: 1, embedded: {enabled: true, cluster_listen: '-'}}", ""},
		{"single embedded server, 3 replicas", "fleet: {enabled: true, embedded: {enabled: true, cluster_listen: '-'}}", "fleet.replicas"},
		{"no server", "fleet: {enabled: true}", "fleet.nats.urls"},
		{"two identities", "fleet: {enabled: true, nats: {urls: [nats://a:4222], creds: c, nkey_seed: s}}", "fleet.nats"},
		{"user without password", "fleet: {enabled: true, nats: {urls: [nats://a:4222], user: u}}", "fleet.nats.user"},
		{"replicas", "fleet: {enabled: true, replicas: 7, nats: {urls: [nats://a:4222]}}", "fleet.replicas"},
		{"hits_every", "fleet: {enabled: true, hits_every: 1ms, nats: {urls: [nats://a:4222]}}", "fleet.hits_every"},
		{"max_clock_offset", "fleet: {enabled: true, max_clock_offset: 10ms, nats: {urls: [nats://a:4222]}}", "fleet.max_clock_offset"},
		{"stream", "fleet: {enabled: true, stream: a.b, nats: {urls: [nats://a:4222]}}", "fleet.stream"},
		{"node", "fleet: {enabled: true, node: 'mx 1', nats: {urls: [nats://a:4222]}}", "fleet.node"},
		{"disabled is not checked", "fleet: {replicas: 9}", ""},
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
