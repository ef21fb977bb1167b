package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/campaign"
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

// APIToken is one more bearer token of the /v1 API, with its scope
// (http.tokens): report (POST /v1/reports only, as Reporter, or as the
// reporter each request names when Reporter is "*"), read (read
// campaigns, dry-run checks) or admin (everything, as the api-token).
// Its secret is the first line of TokenFile (at least MinTokenLen
// characters, no spaces); admin and read tokens also log in to the
// dashboard with that role.
type APIToken struct {
	Name      string `yaml:"name"`
	Scope     string `yaml:"scope"`
	Reporter  string `yaml:"reporter"`
	TokenFile string `yaml:"token_file"`
}

// ReadSecret reads the token's secret from its file.
func (t APIToken) ReadSecret(key string) (string, error) {
	b, err := os.ReadFile(t.TokenFile)
	if err != nil {
		return "", fmt.Errorf("%s.token_file: %w", key, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("%s.token_file %s: empty", key, t.TokenFile)
	}
	if err := CheckToken(line); err != nil {
		return "", fmt.Errorf("%s.token_file %s: %w", key, t.TokenFile, err)
	}
	return line, nil
}

// tokenName is what a token may be called.
var tokenName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func validateTokens(ts []APIToken) error {
	names := map[string]bool{"api-token": true}
	for i, t := range ts {
		key := fmt.Sprintf("http.tokens[%d]", i)
		if !tokenName.MatchString(t.Name) {
			return bad(key+".name", "%q must be 1 to 64 letters, digits, '.', '_' or '-'", t.Name)
		}
		if names[strings.ToLower(t.Name)] {
			return bad(key+".name", "%q is used twice (api-token is the administrator's token)", t.Name)
		}
		names[strings.ToLower(t.Name)] = true
		if err := oneOf(key+".scope", t.Scope, "report", "read", "admin"); err != nil {
			return err
		}
		switch {
		case t.Scope == "report" && strings.TrimSpace(t.Reporter) == "":
			return bad(key+".reporter", "a report token needs the reporter its reports count under, or \"*\" to let each request name it")
		case t.Scope != "report" && t.Reporter != "":
			return bad(key+".reporter", "only a report token has a reporter (the %s scope names any reporter or none)", t.Scope)
		case t.Reporter != "" && campaign.CheckReporter(t.Reporter) != nil:
			return bad(key+".reporter", "%v", campaign.CheckReporter(t.Reporter))
		}
		if t.TokenFile == "" {
			return bad(key+".token_file", "required: the file holding the token (first line)")
		}
	}
	return nil
}

// ReporterLimit bounds the reports of each reporter, whatever entry they
// come from (reports.reporter_limit): Burst at once, then PerHour per
// hour; past it a report is refused (API and socket: 429 with
// Retry-After; by mail: 451; the spool keeps it for later). Admin-scope
// API tokens are not limited.
type ReporterLimit struct {
	// PerHour is the sustained rate per reporter; 0 disables the limit.
	// Default 600.
	PerHour float64 `yaml:"per_hour"`
	// Burst is the reports a reporter may make at once. Default 100.
	Burst int `yaml:"burst"`
}

// Campaign is the limit as the engine takes it.
func (l ReporterLimit) Campaign() campaign.ReporterLimit {
	if l.PerHour == 0 {
		return campaign.ReporterLimit{PerHour: -1}
	}
	return campaign.ReporterLimit{PerHour: l.PerHour, Burst: l.Burst}
}

func (l ReporterLimit) validate() error {
	if !(l.PerHour >= 0 && l.PerHour <= 1e7) {
		return bad("reports.reporter_limit.per_hour", "%v must be from 0 (no limit) to 10000000", l.PerHour)
	}
	if l.Burst < 1 || l.Burst > 1_000_000 {
		return bad("reports.reporter_limit.burst", "%d must be from 1 to 1000000", l.Burst)
	}
	return nil
}
