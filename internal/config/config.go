// Package config is nddmilter's configuration: one YAML file (documented
// in config/nddmilter.yaml) parsed strictly, so that an unknown key or a bad
// value is an error naming the key, its line and the allowed values, and
// filled with defaults, so that running with no file at all works.
//
// Parse and Load start from Default() and overlay what the file says; the
// result is validated. Marshal prints the effective configuration.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
)

// Config is the whole configuration.
type Config struct {
	Milter     Milter     `yaml:"milter"`
	HTTP       HTTP       `yaml:"http"`
	API        API        `yaml:"api"`
	Store      Store      `yaml:"store"`
	Signatures Signatures `yaml:"signatures"`
	ANDD       ANDD       `yaml:"andd"`
	Policy     Policy     `yaml:"policy"`
	Log        Log        `yaml:"log"`
	Reports    Reports    `yaml:"reports"`
	Fleet      Fleet      `yaml:"fleet"`
	Zap        Zap        `yaml:"zap"`
}

// Reports configures junk reports sent by mail through the milter:
// report addresses for the MTA's authenticated users, and ISP feedback
// loops (docs/SECURITY.md, "Reporter identities").
type Reports struct {
	// SpamAddresses and HamAddresses are the report addresses: a message
	// to one of them from a user the MTA authenticated (SASL) reports
	// each message it carries as an attachment (or the one of an ARF
	// report) as spam, or as not spam, with the SASL login as reporter.
	// Unauthenticated mail to them is checked and delivered as any mail.
	// Default none.
	SpamAddresses []string `yaml:"spam_addresses"`
	HamAddresses  []string `yaml:"ham_addresses"`
	// Deliver is what becomes of a report message once taken: discard
	// (default) or mailbox (delivered to the report address, with an
	// X-NDD-Report header saying what it did).
	Deliver string `yaml:"deliver"`
	// MaxAttachments bounds the messages taken from one report message;
	// the rest are logged and ignored. Default 20.
	MaxAttachments int `yaml:"max_attachments"`
	// Timeout bounds the taking of one report message. Default 10s.
	Timeout Duration `yaml:"timeout"`
	// FeedbackLoops are the trusted sources of ARF feedback reports sent
	// to a spam report address; their reports count with the reporter
	// "fbl:NAME". Default none.
	FeedbackLoops []FeedbackLoop `yaml:"feedback_loops"`
	// Realm is the site's default mail domain: every reporter id, from
	// every entry (API, report socket, reports by mail, spool, command
	// line), is trimmed and lower-cased, and an id ending in "@" + Realm
	// is the same reporter as the login without it
	// (campaign.NormalizeReporter). Default "" (none).
	Realm string `yaml:"realm"`
	// ReporterLimit bounds each reporter's reports. Default 100 at once,
	// then 600 per hour.
	ReporterLimit ReporterLimit `yaml:"reporter_limit"`
}

// FeedbackLoop is one trusted feedback-loop source. A message comes from
// it when its SMTP client is in Networks or the MTA authenticated it as
// one of AuthUsers (at least one of the two must be set: an envelope
// sender alone is forged at will), and, when Senders is set, its envelope
// sender is one of them (an address, or "@domain").
type FeedbackLoop struct {
	Name      string   `yaml:"name"`
	Networks  []string `yaml:"networks"`
	AuthUsers []string `yaml:"auth_users"`
	Senders   []string `yaml:"senders"`
}

// Milter configures the milter listener and what it does to messages.
type Milter struct {
	// Listen is the milter socket in Postfix syntax: inet:HOST:PORT or
	// unix:/path. Default inet:127.0.0.1:8899.
	Listen string `yaml:"listen"`
	// SocketMode is the mode of a unix socket, in octal. Default "0660".
	SocketMode string `yaml:"socket_mode"`
	// SocketGroup is the group (name or number) of a unix socket, e.g.
	// postfix; empty keeps the process's group. Default empty.
	SocketGroup string `yaml:"socket_group"`
	// MaxBodyBytes is how many body bytes are scanned; the rest passes
	// unscanned. Default 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// CheckTimeout bounds the check of one message. Default 2s.
	CheckTimeout Duration `yaml:"check_timeout"`
	// IdleTimeout closes a milter connection silent for that long. Default 10m.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxSessions bounds the milter connections that buffer messages;
	// beyond it (up to twice as many) messages pass per on_error without
	// being buffered, beyond that connections are closed. Default 1000.
	MaxSessions int `yaml:"max_sessions"`
	// MaxBufferedBytes bounds the message bytes all sessions hold beyond
	// a 192 KiB allowance each; a message that would exceed it stops
	// being buffered and gets the on_overload treatment. Default 128 MiB.
	MaxBufferedBytes int64 `yaml:"max_buffered_bytes"`
	// OnOverload is what a message cut short by max_buffered_bytes gets:
	// check (the part buffered, its headers and the head of its body, is
	// checked) or tempfail. Default check.
	OnOverload string `yaml:"on_overload"`
	// ShutdownTimeout is how long SIGTERM waits for sessions in flight. Default 30s.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// OnError is what happens to a message when checking it fails
	// (error, panic, timeout): accept or tempfail. Default accept.
	OnError string `yaml:"on_error"`
	// HeaderPrefix starts the names of the headers nddmilter adds (and
	// removes from incoming mail). Default X-NDD-.
	HeaderPrefix string `yaml:"header_prefix"`
	// HeaderOnAccept adds the verdict header to accepted messages too. Default true.
	HeaderOnAccept bool `yaml:"header_on_accept"`
	// RejectWith is how a reject verdict is sent: reject (5xx) or tempfail (4xx). Default reject.
	RejectWith string `yaml:"reject_with"`
	// RejectText is the SMTP reply of a reject; %c is the campaign id, %s
	// the score, %r the rule, %% a percent sign.
	RejectText string `yaml:"reject_text"`
	// TempfailText is the SMTP reply of a tempfail (reject_with: tempfail,
	// on_error: tempfail).
	TempfailText string `yaml:"tempfail_text"`
	// QuarantineReason is the hold reason of a quarantined message.
	QuarantineReason string `yaml:"quarantine_reason"`
	// Overrides caps the action per recipient address or domain. A message
	// with several recipients gets the weakest cap among them.
	Overrides map[string]string `yaml:"overrides"`
	// SpamHeaders adds SpamAssassin-style X-Spam-Flag: YES and
	// X-Spam-Status headers to tagged and quarantined mail. Default false.
	SpamHeaders bool `yaml:"spam_headers"`
	// SubjectTag is put before the Subject of tagged and quarantined mail
	// (e.g. "[SPAM] "). Default "" (none).
	SubjectTag string `yaml:"subject_tag"`
}

// SocketFileMode parses SocketMode: octal, from 0001 to 0777.
func (m Milter) SocketFileMode() (os.FileMode, error) {
	v, err := strconv.ParseUint(m.SocketMode, 8, 32)
	if err != nil || v == 0 || v > 0o777 {
		return 0, fmt.Errorf("%q is not an octal file mode from 0001 to 0777, e.g. 0660", m.SocketMode)
	}
	return os.FileMode(v), nil
}

// HTTP configures the HTTP listener (API, /metrics, /healthz, /readyz).
type HTTP struct {
	// Listen is HOST:PORT; empty disables the listener. Default 127.0.0.1:8898.
	Listen string `yaml:"listen"`
	// Token is the bearer token the /v1 API requires. Empty (and no
	// TokenFile): serve generates one into STORE_DIR/api-token.
	Token string `yaml:"token"`
	// TokenFile reads the token from a file instead (first line).
	TokenFile string `yaml:"token_file"`
	// MaxBodyBytes bounds a report uploaded through the API. Default 10 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound
	// a connection's request headers, whole request, response and idle
	// keep-alive time. Defaults 10s, 1m, 1m, 30s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	ReadTimeout       Duration `yaml:"read_timeout"`
	WriteTimeout      Duration `yaml:"write_timeout"`
	IdleTimeout       Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes bounds a request's headers. Default 64 KiB.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// RequestTimeout bounds an API check or report (503 past it). Default 30s.
	RequestTimeout Duration `yaml:"request_timeout"`
	// MaxInflight bounds the API checks and reports running at once
	// (503 beyond). Default 16.
	MaxInflight int `yaml:"max_inflight"`
	// MaxConnections bounds the HTTP listener's open connections, and
	// MaxConnectionsPerAddress those of one client address: past them a
	// connection is closed when accepted, so that HTTP clients cannot take
	// the file descriptors the milter needs. The daemon lowers
	// MaxConnections further when the process's descriptor limit is small
	// (it keeps milter.max_sessions and a margin for the store free).
	// Defaults 512 and 64.
	MaxConnections           int `yaml:"max_connections"`
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// MaxConnectionAge closes a keep-alive connection after its first
	// answer past that age (a client cannot hold one forever by sending a
	// request before every idle_timeout). Default 10m.
	MaxConnectionAge Duration `yaml:"max_connection_age"`
	// Tokens are more API tokens, each with a scope (APIToken). Default
	// none.
	Tokens []APIToken `yaml:"tokens"`
	// AllowedHosts are the host names (no port) under which the API and
	// the dashboard are served, besides IP address literals, localhost
	// and the host of Listen: a request naming another host gets 421
	// (DNS rebinding). Default none.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// Dashboard configures the web dashboard under /ui/.
	Dashboard Dashboard `yaml:"dashboard"`
}

// Dashboard configures the web dashboard served under /ui/ on the HTTP
// listener. The API token always logs in as administrator.
type Dashboard struct {
	// Enabled serves the dashboard. Default true.
	Enabled bool `yaml:"enabled"`
	// AdminPassword (or AdminPasswordFile, its first line) logs in as
	// administrator: read, allow, undo allow, delete. Default none.
	AdminPassword     string `yaml:"admin_password"`
	AdminPasswordFile string `yaml:"admin_password_file"`
	// ReadPassword (or ReadPasswordFile) logs in read-only. Default none.
	ReadPassword     string `yaml:"read_password"`
	ReadPasswordFile string `yaml:"read_password_file"`
	// SessionTTL is how long a login lasts. Default 12h.
	SessionTTL Duration `yaml:"session_ttl"`
	// SecureCookie marks the session cookie Secure (only sent over
	// HTTPS): set it behind a TLS-terminating proxy. Default false.
	SecureCookie bool `yaml:"secure_cookie"`
}

// Passwords returns the admin and read passwords of the dashboard, read
// from their files when set.
func (d Dashboard) Passwords() (admin, read string, err error) {
	for _, p := range []struct {
		key, val, file string
		out            *string
	}{
		{"http.dashboard.admin_password", d.AdminPassword, d.AdminPasswordFile, &admin},
		{"http.dashboard.read_password", d.ReadPassword, d.ReadPasswordFile, &read},
	} {
		*p.out = p.val
		if p.file == "" {
			continue
		}
		b, err := os.ReadFile(p.file)
		if err != nil {
			return "", "", fmt.Errorf("%s_file: %w", p.key, err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if *p.out = strings.TrimSpace(line); *p.out == "" {
			return "", "", fmt.Errorf("%s_file %s: empty", p.key, p.file)
		}
		if err := CheckToken(*p.out); err != nil {
			return "", "", fmt.Errorf("%s_file %s: %w", p.key, p.file, err)
		}
	}
	return admin, read, nil
}

// Store configures the campaign store.
type Store struct {
	// Dir is the store directory. Default nddmilter-data (relative to the
	// working directory).
	Dir string `yaml:"dir"`
	// Expiry deletes a campaign with no hit or report for that long. Default 30d.
	Expiry Duration `yaml:"expiry"`
	// ExpireInterval is how often expired campaigns are deleted. Default 1h.
	ExpireInterval Duration `yaml:"expire_interval"`
	// MinFreeBytes is the free space the store's filesystem must keep:
	// below it reports are refused (mail checks go on) until space
	// returns. Default 256 MiB; -1 turns the check off.
	MinFreeBytes int64 `yaml:"min_free_bytes"`
}

// Signatures configures the I-Match signatures.
type Signatures struct {
	// Lexicon is a lexicon file; empty uses the embedded one.
	Lexicon string `yaml:"lexicon"`
	// K is the number of bagged lexicons besides the original. Default 10;
	// -1 for none.
	K int `yaml:"k"`
	// MinTerms is the minimum number of terms of a signature. Default
	// imatchbag.DefaultMinTerms.
	MinTerms int `yaml:"min_terms"`
	// MinRatio is the minimum |S|/|U| before the secondary lexicon extends
	// S. Default imatchbag.DefaultMinRatio; negative disables the rule.
	MinRatio float64 `yaml:"min_ratio"`
	// MinUnique is the minimum number of unique terms of a document. Default 5.
	MinUnique int `yaml:"min_unique"`
	// Tokens select which words become terms.
	Tokens Tokens `yaml:"tokens"`
}

// Tokens mirror mime.TokenOptions.
type Tokens struct {
	MinLen    int `yaml:"min_len"`    // default 4
	MaxDigits int `yaml:"max_digits"` // default 1
	MaxLen    int `yaml:"max_len"`    // default 40
}

// ANDD configures the ANDD similarity family.
type ANDD struct {
	// Enabled turns ANDD on. Default true.
	Enabled bool `yaml:"enabled"`
	// Model is a model file; empty uses the embedded one.
	Model string `yaml:"model"`
	// ExactCosine, when above 0, is the exact cosine over distinct terms
	// that an ANDD match no I-Match signature supports must reach with a
	// term set the campaign keeps (campaign.Options.ANDDExactCosine).
	// Default 0: off.
	ExactCosine float64 `yaml:"exact_cosine"`
}

// Policy is the campaign engine's decision policy (costs, benefits,
// reporter likelihood ratios, revocation); see docs/POLICY.md.
type Policy = campaign.Policy

// Log configures logging.
type Log struct {
	// Format is text or json. Default text.
	Format string `yaml:"format"`
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// HashAddresses logs the sender, recipients and client address of
	// each message hashed ("h:" and 16 hex digits of their SHA-256)
	// instead of in clear. Default false.
	HashAddresses bool `yaml:"hash_addresses"`
}

// Defaults.
const (
	DefaultMilterListen = "inet:127.0.0.1:8899"
	DefaultHTTPListen   = "127.0.0.1:8898"
	DefaultStoreDir     = "nddmilter-data"
	DefaultRejectText   = "550 5.7.1 Message rejected as spam campaign %c (nddmilter)"
	DefaultTempfailText = "451 4.7.1 Message deferred as suspected spam campaign %c (nddmilter)"
	DefaultQuarantine   = "nddmilter: spam campaign %c (score %s)"
)

// Default returns the configuration used when no file is given.
func Default() *Config {
	return &Config{
		Milter: Milter{
			Listen:           DefaultMilterListen,
			SocketMode:       "0660",
			MaxBodyBytes:     1 << 20,
			CheckTimeout:     Duration(2 * time.Second),
			IdleTimeout:      Duration(10 * time.Minute),
			ShutdownTimeout:  Duration(30 * time.Second),
			MaxSessions:      1000,
			MaxBufferedBytes: 128 << 20,
			OnError:          action.Accept.String(),
			OnOverload:       "check",
			HeaderPrefix:     "X-NDD-",
			HeaderOnAccept:   true,
			RejectWith:       action.Reject.String(),
			RejectText:       DefaultRejectText,
			TempfailText:     DefaultTempfailText,
			QuarantineReason: DefaultQuarantine,
			Overrides:        map[string]string{},
		},
		HTTP: HTTP{
			Listen:                   DefaultHTTPListen,
			MaxBodyBytes:             10 << 20,
			ReadHeaderTimeout:        Duration(10 * time.Second),
			ReadTimeout:              Duration(time.Minute),
			WriteTimeout:             Duration(time.Minute),
			IdleTimeout:              Duration(30 * time.Second),
			MaxHeaderBytes:           64 << 10,
			RequestTimeout:           Duration(30 * time.Second),
			MaxInflight:              16,
			MaxConnections:           512,
			MaxConnectionsPerAddress: 64,
			MaxConnectionAge:         Duration(10 * time.Minute),
			Tokens:                   []APIToken{},
			AllowedHosts:             []string{},
			Dashboard:                Dashboard{Enabled: true, SessionTTL: Duration(12 * time.Hour)},
		},
		API: DefaultAPI(),
		Store: Store{
			Dir:            DefaultStoreDir,
			Expiry:         Duration(30 * 24 * time.Hour),
			ExpireInterval: Duration(time.Hour),
			MinFreeBytes:   256 << 20,
		},
		Signatures: Signatures{
			K:         imatchbag.DefaultK,
			MinTerms:  imatchbag.DefaultMinTerms,
			MinRatio:  imatchbag.DefaultMinRatio,
			MinUnique: imatchbag.DefaultMinUnique,
			Tokens:    Tokens{MinLen: 4, MaxDigits: 1, MaxLen: 40},
		},
		ANDD:   ANDD{Enabled: true},
		Policy: campaign.DefaultPolicy(),
		Log:    Log{Format: "text", Level: "info"},
		Fleet:  defaultFleet(),
		Zap:    DefaultZap(),
		Reports: Reports{
			SpamAddresses:  []string{},
			HamAddresses:   []string{},
			Deliver:        "discard",
			MaxAttachments: 20,
			Timeout:        Duration(10 * time.Second),
			FeedbackLoops:  []FeedbackLoop{},
			ReporterLimit:  ReporterLimit{PerHour: campaign.DefaultReporterPerHour, Burst: campaign.DefaultReporterBurst},
		},
	}
}

// Load reads and validates the file at path. An empty path returns the
// defaults.
func Load(path string) (*Config, error) {
	if path == "" {
		c := Default()
		return c, c.Validate()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse reads a configuration from YAML, on top of the defaults, and
// validates it. Errors name the key and its line.
func Parse(b []byte) (*Config, error) {
	c := Default()
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return c, c.Validate()
		}
		return nil, fmt.Errorf("parse: %w", err)
	}
	lines := map[string]int{}
	var keyErrs []error
	checkKeys(&root, reflect.TypeOf(*c), "", lines, &keyErrs)
	if len(keyErrs) > 0 {
		return nil, errors.Join(keyErrs...)
	}
	// An explicit "overrides:" replaces the default (empty) map.
	if err := root.Decode(c); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if c.Milter.Overrides == nil {
		c.Milter.Overrides = map[string]string{}
	}
	if c.API.AllowUsers == nil {
		c.API.AllowUsers = []string{}
	}
	if c.API.AllowGroups == nil {
		c.API.AllowGroups = []string{}
	}
	if err := c.Validate(); err != nil {
		return nil, withLines(err, lines)
	}
	return c, nil
}

// withLines prefixes each problem of err (one, or several joined) with the
// line of its key.
func withLines(err error, lines map[string]int) error {
	one := func(err error) error {
		var ve *ValueError
		if errors.As(err, &ve) {
			if l, ok := lines[ve.Key]; ok {
				return fmt.Errorf("line %d: %w", l, err)
			}
		}
		return err
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return one(err)
	}
	errs := j.Unwrap()
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = one(e)
	}
	return errors.Join(out...)
}

// checkKeys walks the YAML tree against the struct type t and adds to
// errs every unknown or duplicate key and every value of the wrong type,
// recording the line of every known key by dotted path.
func checkKeys(n *yaml.Node, t reflect.Type, path string, lines map[string]int, errs *[]error) {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) > 0 {
			checkKeys(n.Content[0], t, path, lines, errs)
		}
		return
	}
	if t.Kind() != reflect.Struct {
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		where := path
		if where == "" {
			where = "the top level"
		}
		*errs = append(*errs, fmt.Errorf("line %d: %s must be a mapping of keys to values", n.Line, where))
		return
	}
	fields := map[string]reflect.StructField{}
	var names []string
	var collect func(t reflect.Type)
	collect = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if opts == "inline" && f.Type.Kind() == reflect.Struct {
				collect(f.Type) // its keys are this section's
				continue
			}
			if name == "" || name == "-" {
				continue
			}
			fields[name] = f
			names = append(names, name)
		}
	}
	collect(t)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := join(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			if len(names) == 0 {
				*errs = append(*errs, fmt.Errorf("line %d: unknown key %s (this section has no settings yet)", k.Line, key))
				continue
			}
			sort.Strings(names)
			*errs = append(*errs, fmt.Errorf("line %d: unknown key %s (known keys: %s)", k.Line, key, strings.Join(names, ", ")))
			continue
		}
		if seen[k.Value] {
			*errs = append(*errs, fmt.Errorf("line %d: duplicate key %s", k.Line, key))
			continue
		}
		seen[k.Value] = true
		lines[key] = k.Line
		if f.Type.Kind() == reflect.Struct {
			checkKeys(v, f.Type, key, lines, errs)
			continue
		}
		if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct && v.Kind == yaml.SequenceNode {
			for j, item := range v.Content {
				checkKeys(item, f.Type.Elem(), key+"["+strconv.Itoa(j)+"]", lines, errs)
			}
		}
		if err := v.Decode(reflect.New(f.Type).Interface()); err != nil {
			msg := err.Error()
			msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n  ")
			*errs = append(*errs, fmt.Errorf("%s: %s", key, msg))
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// ValueError is a bad value of one key.
type ValueError struct {
	Key string // dotted path, e.g. milter.on_error
	Msg string
}

func (e *ValueError) Error() string { return e.Key + ": " + e.Msg }

func bad(key, format string, args ...any) error {
	return &ValueError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// names are the names of actions, for oneOf.
func names(as ...action.Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

func oneOf(key, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return bad(key, "%q is not one of %s", v, strings.Join(allowed, ", "))
}

var (
	rejectRe    = regexp.MustCompile(`^5[0-9][0-9] 5\.[0-9]{1,3}\.[0-9]{1,3} \S`)
	tempfailRe  = regexp.MustCompile(`^4[0-9][0-9] 4\.[0-9]{1,3}\.[0-9]{1,3} \S`)
	policyKeyRe = regexp.MustCompile(`^(policy\.[a-z_.]+)`)
	headerRe    = regexp.MustCompile(`^[!-9;-~]+$`) // RFC 5322 ftext
)

// Lower bounds of values that make no sense below them (documented in
// config/nddmilter.yaml).
const (
	// MinTokenLen is the shortest API token accepted (http.token or the
	// first line of http.token_file): a bearer token is the only lock on
	// the API.
	MinTokenLen = 16
	// MinCheckTimeout bounds milter.check_timeout from below: shorter,
	// nearly every check would time out.
	MinCheckTimeout = Duration(10 * time.Millisecond)
	// MinIdleTimeout bounds milter.idle_timeout from below.
	MinIdleTimeout = Duration(time.Second)
	// MinHTTPTimeout bounds the http.*_timeout settings from below.
	MinHTTPTimeout = Duration(time.Second)
)

// CheckToken tells why tok cannot be an API token (nil when it can).
func CheckToken(tok string) error {
	if len(tok) < MinTokenLen {
		return fmt.Errorf("the API token is too short (%d characters): use at least %d, e.g. from `openssl rand -hex 32`", len(tok), MinTokenLen)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return errors.New("the API token must not contain spaces")
	}
	return nil
}

// Validate checks every value and returns every problem found, each a
// *ValueError naming the key and the allowed values (joined with
// errors.Join, one per line).
func (c *Config) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if x := c.ANDD.ExactCosine; !(x >= 0 && x <= 1) {
		add(bad("andd.exact_cosine", "%v is not in [0, 1]", x))
	}
	m := c.Milter
	if _, _, err := SplitListen(m.Listen); err != nil {
		add(bad("milter.listen", "%v", err))
	}
	if _, err := m.SocketFileMode(); err != nil {
		add(bad("milter.socket_mode", "%v", err))
	}
	if strings.ContainsAny(m.SocketGroup, " \t\r\n:") {
		add(bad("milter.socket_group", "%q is not a group name or number", m.SocketGroup))
	}
	if m.MaxBodyBytes < 0 {
		add(bad("milter.max_body_bytes", "must be >= 0 (0 scans headers only)"))
	}
	if m.CheckTimeout < MinCheckTimeout {
		add(bad("milter.check_timeout", "%s is too short: must be at least %s", m.CheckTimeout, MinCheckTimeout))
	}
	if m.IdleTimeout < MinIdleTimeout {
		add(bad("milter.idle_timeout", "%s is too short: must be at least %s", m.IdleTimeout, MinIdleTimeout))
	}
	if m.ShutdownTimeout < 0 {
		add(bad("milter.shutdown_timeout", "must be >= 0"))
	}
	if m.MaxSessions <= 0 {
		add(bad("milter.max_sessions", "must be > 0"))
	}
	if m.MaxBufferedBytes < 1<<20 {
		add(bad("milter.max_buffered_bytes", "must be at least 1048576 (1 MiB)"))
	}
	add(oneOf("milter.on_error", m.OnError, names(action.Accept, action.Tempfail)...))
	add(oneOf("milter.on_overload", m.OnOverload, "check", "tempfail"))
	if !headerRe.MatchString(m.HeaderPrefix) {
		add(bad("milter.header_prefix", "%q is not a valid header name start (printable ASCII, no spaces or colons)", m.HeaderPrefix))
	}
	add(oneOf("milter.reject_with", m.RejectWith, names(action.Reject, action.Tempfail)...))
	if !rejectRe.MatchString(m.RejectText) || strings.ContainsAny(m.RejectText, "\r\n") {
		add(bad("milter.reject_text", "%q must be one line starting with a 5xx code and a 5.x.x enhanced status, e.g. %q", m.RejectText, DefaultRejectText))
	}
	if !tempfailRe.MatchString(m.TempfailText) || strings.ContainsAny(m.TempfailText, "\r\n") {
		add(bad("milter.tempfail_text", "%q must be one line starting with a 4xx code and a 4.x.x enhanced status, e.g. %q", m.TempfailText, DefaultTempfailText))
	}
	for _, k := range []struct{ key, v string }{
		{"milter.reject_text", m.RejectText}, {"milter.tempfail_text", m.TempfailText}, {"milter.quarantine_reason", m.QuarantineReason},
	} {
		if err := checkPlaceholders(k.v); err != nil {
			add(bad(k.key, "%v", err))
		}
	}
	if len(m.SubjectTag) > 64 || strings.ContainsAny(m.SubjectTag, "\r\n\t") || (m.SubjectTag != "" && strings.TrimSpace(m.SubjectTag) == "") {
		add(bad("milter.subject_tag", "%q must be one short line (at most 64 bytes), e.g. \"[SPAM] \"", m.SubjectTag))
	}
	if strings.TrimSpace(m.QuarantineReason) == "" || strings.ContainsAny(m.QuarantineReason, "\r\n") {
		add(bad("milter.quarantine_reason", "must be one non-empty line"))
	}
	for rcpt, a := range m.Overrides {
		key := "milter.overrides." + rcpt
		if rcpt == "" || strings.ContainsAny(rcpt, " \t<>") {
			add(bad(key, "%q is not a recipient address or domain", rcpt))
		}
		add(oneOf(key, a, names(action.Verdicts()...)...))
	}
	if c.HTTP.Listen != "" {
		if _, _, err := splitHostPort(c.HTTP.Listen); err != nil {
			add(bad("http.listen", "%v (or \"\" to disable the HTTP listener: no API, no /metrics)", err))
		}
	}
	if c.HTTP.Token != "" && c.HTTP.TokenFile != "" {
		add(bad("http.token_file", "set token or token_file, not both"))
	}
	if err := CheckToken(c.HTTP.Token); c.HTTP.Token != "" && err != nil {
		add(bad("http.token", "%v", err))
	}
	add(validateTokens(c.HTTP.Tokens))
	for _, h := range c.HTTP.AllowedHosts {
		if !realmName.MatchString(strings.TrimSuffix(h, ".")) {
			add(bad("http.allowed_hosts", "%q is not a host name (no port, no scheme), e.g. nddmilter.example.org", h))
		}
	}
	add(c.HTTP.Dashboard.validate())
	if c.HTTP.MaxBodyBytes <= 0 {
		add(bad("http.max_body_bytes", "must be > 0"))
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"http.read_header_timeout", c.HTTP.ReadHeaderTimeout}, {"http.read_timeout", c.HTTP.ReadTimeout},
		{"http.write_timeout", c.HTTP.WriteTimeout}, {"http.idle_timeout", c.HTTP.IdleTimeout}, {"http.request_timeout", c.HTTP.RequestTimeout}} {
		if d.v < MinHTTPTimeout {
			add(bad(d.key, "%s is too short: must be at least %s", d.v, MinHTTPTimeout))
		}
	}
	if c.HTTP.WriteTimeout <= c.HTTP.RequestTimeout {
		add(bad("http.write_timeout", "%s must exceed http.request_timeout (%s), or the 503 past the deadline cannot be sent", c.HTTP.WriteTimeout, c.HTTP.RequestTimeout))
	}
	if c.HTTP.MaxHeaderBytes < 4096 {
		add(bad("http.max_header_bytes", "must be at least 4096"))
	}
	if c.HTTP.MaxInflight <= 0 {
		add(bad("http.max_inflight", "must be > 0"))
	}
	if c.HTTP.MaxConnections < 1 {
		add(bad("http.max_connections", "must be > 0"))
	}
	if c.HTTP.MaxConnectionsPerAddress < 1 || c.HTTP.MaxConnectionsPerAddress > c.HTTP.MaxConnections {
		add(bad("http.max_connections_per_address", "must be in 1..http.max_connections (%d)", c.HTTP.MaxConnections))
	}
	if c.HTTP.MaxConnectionAge < Duration(time.Second) {
		add(bad("http.max_connection_age", "%s is too short (at least 1s)", c.HTTP.MaxConnectionAge))
	}
	add(c.API.validate())
	if c.Store.Dir == "" {
		add(bad("store.dir", "must not be empty"))
	}
	if c.Store.MinFreeBytes < -1 {
		add(bad("store.min_free_bytes", "must be >= 0, or -1 to turn the free-space check off"))
	}
	if c.Store.Expiry < Duration(time.Hour) {
		add(bad("store.expiry", "%s is too short (at least 1h)", c.Store.Expiry))
	}
	if c.Store.ExpireInterval < Duration(time.Minute) {
		add(bad("store.expire_interval", "%s is too short (at least 1m)", c.Store.ExpireInterval))
	}
	s := c.Signatures
	if s.K < -1 || s.K > imatchbag.MaxK {
		add(bad("signatures.k", "%d is out of range -1..%d (-1: no bagged lexicons)", s.K, imatchbag.MaxK))
	}
	if s.MinTerms < 1 {
		add(bad("signatures.min_terms", "must be >= 1"))
	}
	if s.MinUnique < 1 {
		add(bad("signatures.min_unique", "must be >= 1"))
	}
	if s.MinRatio > 1 {
		add(bad("signatures.min_ratio", "must be <= 1 (negative disables the rule)"))
	}
	if s.Tokens.MinLen < 1 || s.Tokens.MaxLen < s.Tokens.MinLen || s.Tokens.MaxDigits < 0 {
		add(bad("signatures.tokens", "need 1 <= min_len <= max_len and max_digits >= 0"))
	}
	if err := c.Policy.Validate(); err != nil {
		// The policy's own messages name the keys (policy.…).
		key := "policy"
		if m := policyKeyRe.FindStringSubmatch(err.Error()); m != nil {
			key = m[1]
		}
		first, _, _ := strings.Cut(err.Error(), "\n")
		add(&ValueError{Key: key, Msg: strings.TrimLeft(strings.TrimPrefix(first, key), ": ")})
	}
	add(c.Reports.validate())
	add(oneOf("log.format", c.Log.Format, "text", "json"))
	add(oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error"))
	add(c.Fleet.validate())
	add(c.Zap.validate())
	return errors.Join(errs...)
}

func checkPlaceholders(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+1 >= len(s) {
			return fmt.Errorf("%q ends with a lone %%", s)
		}
		switch s[i+1] {
		case 'c', 's', 'r', '%':
			i++
		default:
			return fmt.Errorf("%q has %%%c; placeholders are %%c (campaign), %%s (score), %%r (rule), %%%% (percent)", s, s[i+1])
		}
	}
	return nil
}

// SplitListen parses a milter socket in Postfix syntax and returns the Go
// network and address: inet:HOST:PORT → ("tcp", "HOST:PORT"),
// unix:/path → ("unix", "/path"). inet6:[::1]:PORT is accepted too.
func SplitListen(s string) (network, addr string, err error) {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok {
		return "", "", fmt.Errorf("%q: want inet:HOST:PORT or unix:/path", s)
	}
	switch kind {
	case "inet", "inet6", "tcp":
		if _, _, err := splitHostPort(rest); err != nil {
			return "", "", err
		}
		return "tcp", rest, nil
	case "unix", "local":
		if rest == "" {
			return "", "", fmt.Errorf("%q: empty socket path", s)
		}
		return "unix", rest, nil
	}
	return "", "", fmt.Errorf("%q: want inet:HOST:PORT or unix:/path", s)
}

func splitHostPort(s string) (string, string, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", "", fmt.Errorf("%q: want HOST:PORT", s)
	}
	host, port := s[:i], s[i+1:]
	var p int
	if _, err := fmt.Sscanf(port, "%d", &p); err != nil || p < 0 || p > 65535 || fmt.Sprint(p) != port {
		return "", "", fmt.Errorf("%q: bad port %q", s, port)
	}
	return host, port, nil
}

// Marshal prints the configuration as YAML (the effective configuration
// when c came from Load).
func (c *Config) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return b.Bytes(), nil
}

// ReadToken returns the API token from http.token or http.token_file.
func (h HTTP) ReadToken() (string, error) {
	if h.TokenFile == "" {
		return h.Token, nil
	}
	b, err := os.ReadFile(h.TokenFile)
	if err != nil {
		return "", fmt.Errorf("http.token_file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return "", fmt.Errorf("http.token_file %s: empty", h.TokenFile)
	}
	if err := CheckToken(line); err != nil {
		return "", fmt.Errorf("http.token_file %s: %w", h.TokenFile, err)
	}
	return line, nil
}

func (d Dashboard) validate() error {
	for _, p := range []struct{ key, val, file string }{
		{"http.dashboard.admin_password", d.AdminPassword, d.AdminPasswordFile},
		{"http.dashboard.read_password", d.ReadPassword, d.ReadPasswordFile},
	} {
		if p.val != "" && p.file != "" {
			return bad(p.key, "set %s or %s_file, not both", p.key, p.key)
		}
		if err := CheckToken(p.val); p.val != "" && err != nil {
			return bad(p.key, "%v", strings.Replace(err.Error(), "the API token", "the password", 1))
		}
	}
	if d.SessionTTL.D() <= 0 {
		return bad("http.dashboard.session_ttl", "must be positive")
	}
	return nil
}

func (r Reports) validate() error {
	seen := map[string]string{}
	for _, l := range []struct {
		key  string
		addr []string
	}{{"reports.spam_addresses", r.SpamAddresses}, {"reports.ham_addresses", r.HamAddresses}} {
		for _, a := range l.addr {
			if !isAddress(a) {
				return bad(l.key, "%q is not an email address (local@domain)", a)
			}
			if k, ok := seen[strings.ToLower(a)]; ok {
				return bad(l.key, "%q is already in %s", a, k)
			}
			seen[strings.ToLower(a)] = l.key
		}
	}
	if err := oneOf("reports.deliver", r.Deliver, "discard", "mailbox"); err != nil {
		return err
	}
	if r.MaxAttachments < 1 || r.MaxAttachments > 1000 {
		return bad("reports.max_attachments", "must be from 1 to 1000")
	}
	if r.Timeout < Duration(time.Second) {
		return bad("reports.timeout", "%s is too short: must be at least 1s", r.Timeout)
	}
	if err := r.ReporterLimit.validate(); err != nil {
		return err
	}
	if r.Realm != "" && !realmName.MatchString(r.Realm) {
		return bad("reports.realm", "%q is not a domain name, e.g. example.org (or \"\" for none)", r.Realm)
	}
	names := map[string]bool{}
	for i, f := range r.FeedbackLoops {
		key := fmt.Sprintf("reports.feedback_loops[%d]", i)
		if !fblName.MatchString(f.Name) {
			return bad(key+".name", "%q must be 1 to 64 letters, digits, '.', '_' or '-'", f.Name)
		}
		// Reporter ids are lower-cased: BigISP and bigisp are one reporter.
		if names[strings.ToLower(f.Name)] {
			return bad(key+".name", "%q is used twice (names are compared in lower case)", f.Name)
		}
		names[strings.ToLower(f.Name)] = true
		if len(f.Networks) == 0 && len(f.AuthUsers) == 0 {
			return bad(key, "set networks or auth_users: an envelope sender alone is forged at will")
		}
		for _, n := range f.Networks {
			if _, err := netip.ParsePrefix(n); err != nil {
				if _, err := netip.ParseAddr(n); err != nil {
					return bad(key+".networks", "%q is not an address or a network (CIDR)", n)
				}
			}
		}
		for _, u := range f.AuthUsers {
			if u == "" || strings.ContainsAny(u, " \t") {
				return bad(key+".auth_users", "%q is not a login", u)
			}
		}
		for _, s := range f.Senders {
			if !isAddress(s) && !(strings.HasPrefix(s, "@") && len(s) > 1 && !strings.ContainsAny(s[1:], "@ <>")) {
				return bad(key+".senders", "%q is not an address or @domain", s)
			}
		}
	}
	if len(r.FeedbackLoops) > 0 && len(r.SpamAddresses) == 0 {
		return bad("reports.feedback_loops", "feedback loops send to a spam report address: set reports.spam_addresses")
	}
	return nil
}

// realmName is a domain name (letters, digits and hyphens, dot-separated).
var realmName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// fblName is what a feedback loop may be called (its reporter is "fbl:NAME").
var fblName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// isAddress reports whether s looks like local@domain.
func isAddress(s string) bool {
	local, domain, ok := strings.Cut(s, "@")
	return ok && local != "" && domain != "" && !strings.ContainsAny(s, " \t<>,;\"") && !strings.Contains(domain, "@")
}
