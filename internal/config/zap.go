package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
)

// Zap configures zero-hour purge (internal/zap): the delivery ledger of
// what the milter lets through, and the moving to Junk of the copies a
// campaign had delivered before it escalated. It is off until a backend
// (doveadm or imap) is configured.
type Zap struct {
	// Mode is move (default) or log (only log what would move).
	Mode string `yaml:"mode"`
	// Trigger is the verdict for a campaign's copies from which they are
	// purged: tag, quarantine (default) or reject.
	Trigger string `yaml:"trigger"`
	// Ledger is the ledger's directory (its own database). Default: the
	// store directory's path with "-ledger" appended.
	Ledger string `yaml:"ledger"`
	// Window is how long a delivery is kept. Default 48h.
	Window Duration `yaml:"window"`
	// MaxBytes bounds the ledger's entries; the oldest go first. Default
	// 256 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// Sources are the mailboxes copies are taken from. Default [INBOX].
	Sources []string `yaml:"sources"`
	// Junk is where they go. Default Junk.
	Junk string `yaml:"junk"`
	// UnreadOnly moves only unread copies. Default true.
	UnreadOnly bool `yaml:"unread_only"`
	// Rate bounds the moves: "N/s" or "N/m". Default 10/s.
	Rate string `yaml:"rate"`
	// UserMap maps an envelope recipient to its mailbox user: as-is
	// (default), local-part, or file:PATH ("address user" lines).
	UserMap string `yaml:"user_map"`
	// Doveadm is Dovecot's doveadm HTTP API.
	Doveadm ZapDoveadm `yaml:"doveadm"`
	// IMAP is an IMAP server with a master-user login.
	IMAP ZapIMAP `yaml:"imap"`
}

// ZapDoveadm is the doveadm HTTP backend: URL and one of the two
// credential files (doveadm_api_key, or doveadm_password).
type ZapDoveadm struct {
	URL          string `yaml:"url"`
	APIKeyFile   string `yaml:"api_key_file"`
	PasswordFile string `yaml:"password_file"`
}

// ZapIMAP is the IMAP backend.
type ZapIMAP struct {
	Addr string `yaml:"addr"` // host:port
	// TLS is starttls (default), tls or none (loopback only).
	TLS          string `yaml:"tls"`
	MasterUser   string `yaml:"master_user"`
	PasswordFile string `yaml:"password_file"`
	// Separator joins user and master user in the login. Default "*".
	Separator string `yaml:"separator"`
}

// DefaultZap is the zap section's defaults (off: no backend).
func DefaultZap() Zap {
	return Zap{Mode: "move", Trigger: action.Quarantine.String(), Window: Duration(48 * time.Hour), MaxBytes: 256 << 20,
		Sources: []string{"INBOX"}, Junk: "Junk", UnreadOnly: true, Rate: "10/s", UserMap: "as-is",
		IMAP: ZapIMAP{TLS: "starttls", Separator: "*"}}
}

// Enabled reports whether a backend is configured.
func (z Zap) Enabled() bool { return z.Doveadm.URL != "" || z.IMAP.Addr != "" }

// LedgerDir is the ledger's directory for the store directory storeDir.
func (z Zap) LedgerDir(storeDir string) string {
	if z.Ledger != "" {
		return z.Ledger
	}
	return filepath.Clean(storeDir) + "-ledger"
}

// RatePerSecond parses Rate.
func (z Zap) RatePerSecond() (float64, error) {
	n, unit, ok := strings.Cut(strings.TrimSpace(z.Rate), "/")
	if !ok {
		return 0, fmt.Errorf("%q: want N/s or N/m", z.Rate)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q: want a positive N in N/s or N/m", z.Rate)
	}
	switch strings.TrimSpace(unit) {
	case "s":
		return v, nil
	case "m":
		return v / 60, nil
	}
	return 0, fmt.Errorf("%q: want N/s or N/m", z.Rate)
}

func (z Zap) validate() error {
	if !z.Enabled() {
		return nil
	}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(oneOf("zap.mode", z.Mode, "move", "log"))
	add(oneOf("zap.trigger", z.Trigger, names(action.Tag, action.Quarantine, action.Reject)...))
	if z.Window < Duration(time.Hour) {
		add(bad("zap.window", "%s is too short: must be at least 1h", z.Window))
	}
	if z.MaxBytes < 1<<20 {
		add(bad("zap.max_bytes", "must be at least 1048576 (1 MiB)"))
	}
	if len(z.Sources) == 0 {
		add(bad("zap.sources", "name at least one mailbox, e.g. [INBOX]"))
	}
	for _, s := range z.Sources {
		if s == "" || s == z.Junk {
			add(bad("zap.sources", "%q: a source must be a mailbox other than zap.junk", s))
		}
	}
	if z.Junk == "" {
		add(bad("zap.junk", "must name the Junk mailbox"))
	}
	if _, err := z.RatePerSecond(); err != nil {
		add(bad("zap.rate", "%v", err))
	}
	switch {
	case z.UserMap == "as-is" || z.UserMap == "local-part":
	case strings.HasPrefix(z.UserMap, "file:"):
		if _, err := os.Stat(strings.TrimPrefix(z.UserMap, "file:")); err != nil {
			add(bad("zap.user_map", "%v", err))
		}
	default:
		add(bad("zap.user_map", "%q: want as-is, local-part or file:PATH", z.UserMap))
	}
	if z.Doveadm.URL != "" && z.IMAP.Addr != "" {
		add(bad("zap", "configure one backend: doveadm or imap, not both"))
	}
	if d := z.Doveadm; d.URL != "" {
		if u, err := url.Parse(d.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add(bad("zap.doveadm.url", "%q: want http(s)://host:port/doveadm/v1", d.URL))
		}
		switch {
		case (d.APIKeyFile == "") == (d.PasswordFile == ""):
			add(bad("zap.doveadm", "set one of api_key_file (doveadm_api_key) and password_file (doveadm_password)"))
		case d.APIKeyFile != "":
			add(secretFile("zap.doveadm.api_key_file", d.APIKeyFile))
		default:
			add(secretFile("zap.doveadm.password_file", d.PasswordFile))
		}
	}
	if m := z.IMAP; m.Addr != "" {
		if _, _, err := net.SplitHostPort(m.Addr); err != nil {
			add(bad("zap.imap.addr", "%q: want host:port", m.Addr))
		}
		add(oneOf("zap.imap.tls", m.TLS, "starttls", "tls", "none"))
		if m.MasterUser == "" || strings.ContainsAny(m.MasterUser, " \t\r\n") {
			add(bad("zap.imap.master_user", "must name the master (administrator) user"))
		}
		if m.Separator == "" {
			add(bad("zap.imap.separator", "must not be empty (Dovecot: auth_master_user_separator, e.g. \"*\")"))
		}
		if m.PasswordFile == "" {
			add(bad("zap.imap.password_file", "must name the master user's password file"))
		} else {
			add(secretFile("zap.imap.password_file", m.PasswordFile))
		}
	}
	return errors.Join(errs...)
}

// secretFile checks that a credentials file is a regular file that
// neither its group nor others may read or write.
func secretFile(key, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return bad(key, "%v", err)
	}
	if !fi.Mode().IsRegular() {
		return bad(key, "%s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return bad(key, "%s has mode %04o: a credentials file must not be readable or writable by its group or others (chmod 600)", path, perm)
	}
	return nil
}

// ReadSecret reads the first line of a credentials file, refusing one its
// group or others may read (see secretFile).
func ReadSecret(key, path string) (string, error) {
	if err := secretFile(key, path); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", bad(key, "%v", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return "", bad(key, "%s is empty", path)
	}
	return line, nil
}
