package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestZapConfig(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("secret\n"), 0o600)
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("secret\n"), 0o640)
	users := filepath.Join(dir, "users")
	os.WriteFile(users, []byte("a@b a\n"), 0o644)

	c, err := Parse([]byte("store:\n  dir: /var/lib/nddmilter/store\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Zap.Enabled() || c.Zap.Mode != "move" || c.Zap.Trigger != "quarantine" || !c.Zap.UnreadOnly ||
		c.Zap.LedgerDir(c.Store.Dir) != "/var/lib/nddmilter/store-ledger" {
		t.Errorf("defaults: %+v", c.Zap)
	}
	if r, _ := c.Zap.RatePerSecond(); r != 10 {
		t.Errorf("default rate %v", r)
	}
	ok := []string{
		"zap:\n  doveadm:\n    url: http://127.0.0.1:8080/doveadm/v1\n    api_key_file: " + key + "\n",
		"zap:\n  mode: log\n  rate: 30/m\n  user_map: file:" + users + "\n  doveadm:\n    url: http://127.0.0.1:8080/doveadm/v1\n    password_file: " + key + "\n",
		"zap:\n  unread_only: false\n  imap:\n    addr: 127.0.0.1:143\n    tls: none\n    master_user: admin\n    password_file: " + key + "\n",
		"zap:\n  mode: bogus\n", // no backend: the section is off and not checked
	}
	for _, y := range ok {
		if _, err := Parse([]byte(y)); err != nil {
			t.Errorf("%s: %v", y, err)
		}
	}
	dv := "  doveadm:\n    url: http://127.0.0.1:8080/doveadm/v1\n    api_key_file: " + key + "\n"
	for _, c := range []struct{ yaml, want string }{
		{"zap:\n  mode: purge\n" + dv, "zap.mode"},
		{"zap:\n  trigger: accept\n" + dv, "zap.trigger"},
		{"zap:\n  window: 10m\n" + dv, "zap.window"},
		{"zap:\n  rate: fast\n" + dv, "zap.rate"},
		{"zap:\n  sources: [Junk]\n" + dv, "zap.sources"},
		{"zap:\n  user_map: ldap\n" + dv, "zap.user_map"},
		{"zap:\n  user_map: file:/nonexistent\n" + dv, "zap.user_map"},
		{"zap:\n  doveadm:\n    url: ftp://x\n    api_key_file: " + key + "\n", "zap.doveadm.url"},
		{"zap:\n  doveadm:\n    url: http://x:1/doveadm/v1\n", "set one of api_key_file"},
		{"zap:\n  doveadm:\n    url: http://x:1/doveadm/v1\n    api_key_file: " + open + "\n", "mode 0640"},
		{"zap:\n  doveadm:\n    url: http://x:1/doveadm/v1\n    api_key_file: /nonexistent\n", "api_key_file"},
		{"zap:\n  imap:\n    addr: nohost\n    master_user: a\n    password_file: " + key + "\n", "zap.imap.addr"},
		{"zap:\n  imap:\n    addr: h:143\n    password_file: " + key + "\n", "zap.imap.master_user"},
		{"zap:\n  imap:\n    addr: h:143\n    master_user: a\n    password_file: " + open + "\n", "chmod 600"},
		{"zap:\n  imap:\n    addr: h:143\n    master_user: a\n    password_file: " + key + "\n" + dv, "not both"},
		{"zap:\n  bogus: 1\n" + dv, "bogus"},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.yaml, err, c.want)
		}
	}
	if s, err := ReadSecret("k", key); err != nil || s != "secret" {
		t.Errorf("ReadSecret = %q, %v", s, err)
	}
	if _, err := ReadSecret("k", open); err == nil {
		t.Error("ReadSecret read a group-readable file")
	}
}
