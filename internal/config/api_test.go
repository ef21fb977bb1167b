package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAPISection(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // substring of the error; "" for valid
	}{
		{"defaults", "", ""},
		{"socket and spool", "api:\n  socket: /run/nddmilter/report.sock\n  socket_group: vmail\n  allow_users: [vmail, \"5000\"]\n  allow_groups: [mail]\n  spool_dir: /var/spool/nddmilter\n  spool_interval: 30s\n", ""},
		{"relative socket", "api:\n  socket: report.sock\n", "api.socket"},
		{"bad mode", "api:\n  socket_mode: \"999\"\n", "api.socket_mode"},
		{"bad group", "api:\n  socket_group: \"a b\"\n", "api.socket_group"},
		{"empty user", "api:\n  allow_users: [\"\"]\n", "api.allow_users"},
		{"bad group name", "api:\n  allow_groups: [\"x:y\"]\n", "api.allow_groups"},
		{"relative spool", "api:\n  spool_dir: spool\n", "api.spool_dir"},
		{"fast spool", "api:\n  spool_interval: 10ms\n", "api.spool_interval"},
		{"unknown key", "api:\n  sockets: /x\n", "api.sockets"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.in))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.API.SpoolInterval < Duration(time.Second) || c.API.AllowUsers == nil {
					t.Errorf("defaults not applied: %+v", c.API)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %s", err, tc.want)
			}
			var ve *ValueError
			if strings.HasPrefix(tc.want, "api.socket") && tc.name != "unknown key" && !errors.As(err, &ve) {
				t.Errorf("err %T is not a *ValueError", err)
			}
		})
	}
}
