package config

import (
	"path/filepath"
	"strings"
	"time"
)

// API configures the report socket: a unix socket that serves only junk
// and not-junk reports (POST /v1/reports) to local programs — the
// IMAPSieve pipe of contrib/dovecot — without a token. Who may use it is
// decided by the socket file's mode and group and by the peer's
// credentials (SO_PEERCRED): root, nddmilter's own user, and the users
// and groups listed here. A caller allowed there names any reporter: list
// only the mail-delivery user, which speaks for its authenticated IMAP
// users, and nobody else.
type API struct {
	// Socket is the path of the report socket, e.g.
	// /run/nddmilter/report.sock (the systemd unit's RuntimeDirectory);
	// empty disables it. Default "".
	Socket string `yaml:"socket"`
	// SocketMode is the socket file's mode, in octal. Default "0660".
	SocketMode string `yaml:"socket_mode"`
	// SocketGroup is the socket file's group (name or number), e.g. the
	// mail user's group (vmail); empty keeps the process's group.
	SocketGroup string `yaml:"socket_group"`
	// AllowUsers and AllowGroups are the users and primary groups (names
	// or numbers) whose processes may report for any reporter over the
	// socket, besides root and nddmilter's own user. Default none.
	AllowUsers  []string `yaml:"allow_users"`
	AllowGroups []string `yaml:"allow_groups"`
	// SpoolDir is where `nddmilter report --spool` leaves reports while
	// the daemon is down; the daemon ingests them at start and every
	// SpoolInterval, deleting each once stored. It must be writable by
	// the reporting users' group (e.g. mode 3770, group vmail) and owned
	// by root or nddmilter's user. Only the files of the users the report
	// socket admits (AllowUsers, AllowGroups by primary group) are
	// ingested. Default "" (none).
	SpoolDir string `yaml:"spool_dir"`
	// SpoolInterval is how often the daemon looks into SpoolDir.
	// Default 1m.
	SpoolInterval Duration `yaml:"spool_interval"`
}

// DefaultAPI is the API section's defaults.
func DefaultAPI() API {
	return API{SocketMode: "0660", AllowUsers: []string{}, AllowGroups: []string{}, SpoolInterval: Duration(time.Minute)}
}

// SocketFileMode parses SocketMode (octal, 0001 to 0777).
func (a API) SocketFileMode() (uint32, error) {
	m, err := Milter{SocketMode: a.SocketMode}.SocketFileMode()
	return uint32(m), err
}

func (a API) validate() error {
	if a.Socket != "" && !filepath.IsAbs(a.Socket) {
		return bad("api.socket", "%q must be an absolute path, e.g. /run/nddmilter/report.sock (or \"\" to disable)", a.Socket)
	}
	if _, err := a.SocketFileMode(); err != nil {
		return bad("api.socket_mode", "%v", err)
	}
	if strings.ContainsAny(a.SocketGroup, " \t\r\n:") {
		return bad("api.socket_group", "%q is not a group name or number", a.SocketGroup)
	}
	for _, l := range []struct {
		key  string
		list []string
	}{{"api.allow_users", a.AllowUsers}, {"api.allow_groups", a.AllowGroups}} {
		for _, n := range l.list {
			if n == "" || strings.ContainsAny(n, " \t\r\n:") {
				return bad(l.key, "%q is not a user or group name or number", n)
			}
		}
	}
	if a.SpoolDir != "" && !filepath.IsAbs(a.SpoolDir) {
		return bad("api.spool_dir", "%q must be an absolute path, e.g. /var/spool/nddmilter (or \"\" for none)", a.SpoolDir)
	}
	if a.SpoolInterval < Duration(time.Second) {
		return bad("api.spool_interval", "%s is too short (at least 1s)", a.SpoolInterval)
	}
	return nil
}
