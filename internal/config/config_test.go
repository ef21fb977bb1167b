package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The documented example must be exactly the defaults, so that it never
// drifts from what the code does.
func TestExampleEqualsDefaults(t *testing.T) {
	b, err := os.ReadFile("../../config/nddmilter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(b)
	if err != nil {
		t.Fatalf("config/nddmilter.yaml: %v", err)
	}
	if d := Default(); !reflect.DeepEqual(c, d) {
		got, _ := c.Marshal()
		want, _ := d.Marshal()
		t.Fatalf("config/nddmilter.yaml differs from Default():\n--- file\n%s\n--- defaults\n%s", got, want)
	}
}

func TestEmptyAndDefaultsValid(t *testing.T) {
	for _, in := range []string{"", "\n", "# only a comment\n", "milter:\n"} {
		c, err := Parse([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if !reflect.DeepEqual(c, Default()) {
			t.Errorf("%q: not the defaults", in)
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	c := Default()
	c.Milter.Overrides = map[string]string{"example.org": "tag"}
	c.Store.Expiry = Duration(36 * time.Hour)
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(c, back) {
		t.Fatalf("round trip differs:\n%s", b)
	}
	if !strings.Contains(string(b), "expiry: 1d12h") {
		t.Errorf("expiry not written in days:\n%s", b)
	}
}

func TestOverlay(t *testing.T) {
	c, err := Parse([]byte("milter:\n  on_error: tempfail\n  overrides:\n    example.org: tag\nstore:\n  expiry: 7d\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Milter.OnError != "tempfail" || c.Milter.Overrides["example.org"] != "tag" || c.Store.Expiry.D() != 7*24*time.Hour {
		t.Errorf("overlay not applied: %+v", c)
	}
	if c.Milter.Listen != DefaultMilterListen || !c.Milter.HeaderOnAccept || !c.ANDD.Enabled {
		t.Errorf("defaults lost: %+v", c.Milter)
	}
}

func TestBadConfigs(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // substrings of the error
	}{
		{"unknown top key", "milterr:\n  listen: x\n", []string{"line 1", "unknown key milterr", "known keys:", "milter"}},
		{"unknown nested key", "milter:\n  listen: inet:127.0.0.1:1\n  on_eror: accept\n", []string{"line 3", "unknown key milter.on_eror"}},
		{"unknown deep key", "signatures:\n  tokens:\n    minlen: 3\n", []string{"line 3", "signatures.tokens.minlen"}},
		{"unknown policy key", "policy:\n  cost: 3\n", []string{"policy.cost", "cost_fp"}},
		{"unknown policy cost", "policy:\n  cost_fp:\n    drop: 3\n", []string{"line 3", "policy.cost_fp.drop"}},
		{"bad policy value", "policy:\n  spam_reporter_lr: 0.5\n", []string{"line 2", "policy.spam_reporter_lr: must be"}},
		{"bad policy max_action", "policy:\n  max_action: drop\n", []string{"line 2", "policy.max_action: "}},
		{"bad on_error", "milter:\n  on_error: foo\n", []string{"line 2", `milter.on_error: "foo" is not one of accept, tempfail`}},
		{"bad override", "milter:\n  overrides:\n    example.org: nuke\n", []string{"milter.overrides.example.org", "not one of"}},
		{"bad listen", "milter:\n  listen: 127.0.0.1:99\n", []string{"milter.listen", "inet:HOST:PORT"}},
		{"bad port", "milter:\n  listen: inet:127.0.0.1:x\n", []string{"milter.listen", "bad port"}},
		{"bad duration", "milter:\n  check_timeout: soon\n", []string{"line 2", "invalid duration"}},
		{"zero timeout", "milter:\n  check_timeout: 0s\n", []string{"milter.check_timeout", "at least 10ms"}},
		{"absurd timeout", "milter:\n  check_timeout: 1ns\n", []string{"milter.check_timeout", "too short", "at least 10ms"}},
		{"absurd idle timeout", "milter:\n  idle_timeout: 1ms\n", []string{"milter.idle_timeout", "at least 1s"}},
		{"absurd http timeout", "http:\n  read_timeout: 1ns\n", []string{"http.read_timeout", "at least 1s"}},
		{"subject tag on two lines", "milter:\n  subject_tag: \"[SPAM]\\n\"\n", []string{"milter.subject_tag"}},
		{"short token", "http:\n  token: a\n", []string{"http.token", "too short", "at least 16"}},
		{"short dashboard password", "http:\n  dashboard:\n    read_password: short\n", []string{"http.dashboard.read_password", "too short"}},
		{"dashboard password twice", "http:\n  dashboard:\n    admin_password: 0123456789abcdef\n    admin_password_file: /x\n", []string{"http.dashboard.admin_password", "not both"}},
		{"dashboard session", "http:\n  dashboard:\n    session_ttl: 0s\n", []string{"http.dashboard.session_ttl"}},
		{"token with a space", "http:\n  token: \"abcdefgh ijklmnopq\"\n", []string{"http.token", "spaces"}},
		{"days spelled out wrong", "store:\n  expiry: 30dayz\n", []string{"line 2", `"30dayz"`, "30d", "d = days"}},
		{"no unit", "store:\n  expiry: \"30\"\n", []string{"line 2", `"30"`, "12h"}},
		{"bad reject text", "milter:\n  reject_text: go away\n", []string{"milter.reject_text", "5xx"}},
		{"socket mode not octal", "milter:\n  socket_mode: \"0999\"\n", []string{"milter.socket_mode", "octal"}},
		{"socket mode too wide", "milter:\n  socket_mode: \"4777\"\n", []string{"milter.socket_mode"}},
		{"socket mode none", "milter:\n  socket_mode: \"0\"\n", []string{"milter.socket_mode"}},
		{"socket group with a space", "milter:\n  socket_group: \"post fix\"\n", []string{"milter.socket_group"}},
		{"4xx reject text", "milter:\n  reject_text: 450 4.7.1 later\n", []string{"milter.reject_text"}},
		{"bad placeholder", "milter:\n  reject_text: 550 5.7.1 campaign %d\n", []string{"milter.reject_text", "%d"}},
		{"bad tempfail", "milter:\n  tempfail_text: 550 5.7.1 no\n", []string{"milter.tempfail_text"}},
		{"bad header prefix", "milter:\n  header_prefix: \"X NDD\"\n", []string{"milter.header_prefix"}},
		{"wrong type", "milter:\n  max_body_bytes: lots\n", []string{"line 2", "max_body_bytes"}},
		{"section not a map", "milter: 3\n", []string{"milter must be a mapping"}},
		{"duplicate key", "log:\n  level: info\n  level: debug\n", []string{"line 3"}},
		{"bad log format", "log:\n  format: xml\n", []string{`log.format: "xml" is not one of text, json`}},
		{"bad log level", "log:\n  level: loud\n", []string{"log.level"}},
		{"short expiry", "store:\n  expiry: 1m\n", []string{"store.expiry"}},
		{"empty store dir", "store:\n  dir: \"\"\n", []string{"store.dir"}},
		{"bad k", "signatures:\n  k: 1000\n", []string{"signatures.k"}},
		{"bad min_terms", "signatures:\n  min_terms: 0\n", []string{"signatures.min_terms"}},
		{"token and file", "http:\n  token: abcdefghijklmnopq\n  token_file: /x\n", []string{"http.token_file"}},
		{"bad http listen", "http:\n  listen: nowhere\n", []string{"http.listen"}},
		{"not yaml", "milter: [\n", []string{"parse"}},
		{"no sessions", "milter:\n  max_sessions: 0\n", []string{"line 2", "milter.max_sessions"}},
		{"tiny buffer budget", "milter:\n  max_buffered_bytes: 1000\n", []string{"milter.max_buffered_bytes"}},
		{"write timeout under request timeout", "http:\n  write_timeout: 10s\n  request_timeout: 20s\n", []string{"http.write_timeout", "http.request_timeout"}},
		{"zero idle timeout", "http:\n  idle_timeout: 0s\n", []string{"http.idle_timeout"}},
		{"tiny header limit", "http:\n  max_header_bytes: 100\n", []string{"http.max_header_bytes"}},
		{"no inflight", "http:\n  max_inflight: 0\n", []string{"http.max_inflight"}},
		{"bad free reserve", "store:\n  min_free_bytes: -5\n", []string{"store.min_free_bytes"}},
		{"report address not an address", "reports:\n  spam_addresses: [spam-report]\n", []string{"line 2", "reports.spam_addresses"}},
		{"report address twice", "reports:\n  spam_addresses: [r@example.org]\n  ham_addresses: [R@example.org]\n", []string{"reports.ham_addresses", "already in reports.spam_addresses"}},
		{"bad deliver", "reports:\n  deliver: bounce\n", []string{"line 2", "reports.deliver", "discard, mailbox"}},
		{"no attachments", "reports:\n  max_attachments: 0\n", []string{"reports.max_attachments"}},
		{"short report timeout", "reports:\n  timeout: 10ms\n", []string{"reports.timeout"}},
		{"unknown feedback loop key", "reports:\n  spam_addresses: [r@example.org]\n  feedback_loops:\n    - name: isp\n      network: [192.0.2.0/24]\n",
			[]string{"line 5", "reports.feedback_loops[0].network", "networks"}},
		{"feedback loop trusted on its sender", "reports:\n  spam_addresses: [r@example.org]\n  feedback_loops:\n    - name: isp\n      senders: [fbl@isp.example]\n",
			[]string{"reports.feedback_loops[0]", "networks or auth_users"}},
		{"feedback loop bad network", "reports:\n  spam_addresses: [r@example.org]\n  feedback_loops:\n    - name: isp\n      networks: [192.0.2.0/33]\n",
			[]string{"reports.feedback_loops[0].networks"}},
		{"feedback loop bad name", "reports:\n  spam_addresses: [r@example.org]\n  feedback_loops:\n    - name: \"my isp\"\n      networks: [192.0.2.1]\n",
			[]string{"reports.feedback_loops[0].name"}},
		{"allowed host with a port", "http:\n  allowed_hosts: [\"ndd.example.org:8898\"]\n", []string{"http.allowed_hosts", "host name"}},
		{"allowed host as a URL", "http:\n  allowed_hosts: [\"https://ndd.example.org\"]\n", []string{"http.allowed_hosts"}},
		{"report token without reporter", "http:\n  tokens:\n    - name: webmail\n      scope: report\n      token_file: /etc/t\n", []string{"http.tokens[0].reporter"}},
		{"read token with a reporter", "http:\n  tokens:\n    - name: ro\n      scope: read\n      reporter: alice\n      token_file: /etc/t\n", []string{"http.tokens[0].reporter"}},
		{"token bad scope", "http:\n  tokens:\n    - name: x\n      scope: write\n      token_file: /etc/t\n", []string{"http.tokens[0].scope", "report, read, admin"}},
		{"token named api-token", "http:\n  tokens:\n    - name: API-Token\n      scope: admin\n      token_file: /etc/t\n", []string{"http.tokens[0].name", "used twice"}},
		{"token without file", "http:\n  tokens:\n    - name: x\n      scope: admin\n", []string{"http.tokens[0].token_file"}},
		{"reporter limit negative", "reports:\n  reporter_limit:\n    per_hour: -1\n", []string{"reports.reporter_limit.per_hour"}},
		{"reporter limit no burst", "reports:\n  reporter_limit:\n    burst: 0\n", []string{"reports.reporter_limit.burst"}},
		{"realm with an at sign", "reports:\n  realm: \"@example.org\"\n", []string{"line 2", "reports.realm", "domain name"}},
		{"realm with a space", "reports:\n  realm: \"example .org\"\n", []string{"reports.realm"}},
		{"feedback loops differing in case", "reports:\n  spam_addresses: [r@example.org]\n  feedback_loops:\n    - name: ISP\n      networks: [192.0.2.1]\n    - name: isp\n      networks: [192.0.2.2]\n",
			[]string{"reports.feedback_loops[1].name", "used twice"}},
		{"feedback loop without address", "reports:\n  feedback_loops:\n    - name: isp\n      networks: [192.0.2.1]\n",
			[]string{"reports.feedback_loops", "spam_addresses"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("no error for %q", tt.in)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"2s", 2 * time.Second, false},
		{"90m", 90 * time.Minute, false},
		{"30d", 30 * 24 * time.Hour, false},
		{"1d12h", 36 * time.Hour, false},
		{"30days", 30 * 24 * time.Hour, false},
		{"1day", 24 * time.Hour, false},
		{"1days12h", 36 * time.Hour, false},
		{"30dayz", 0, true},
		{"1ds", 0, true},
		{"1.5d", 0, true},
		{"d", 0, true},
		{"-3s", 0, true},
		{"", 0, true},
		{"12", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v", tt.in, got, err)
		}
	}
	for _, d := range []time.Duration{0, time.Second, 90 * time.Second, 2 * time.Hour, 30 * 24 * time.Hour, 36*time.Hour + time.Minute, 1500 * time.Millisecond} {
		back, err := ParseDuration(Duration(d).String())
		if err != nil || back != d {
			t.Errorf("%v -> %q -> %v, %v", d, Duration(d).String(), back, err)
		}
	}
}

func TestSplitListen(t *testing.T) {
	tests := []struct{ in, net, addr string }{
		{"inet:127.0.0.1:8899", "tcp", "127.0.0.1:8899"},
		{"inet6:[::1]:8899", "tcp", "[::1]:8899"},
		{"unix:/run/nddmilter/milter.sock", "unix", "/run/nddmilter/milter.sock"},
	}
	for _, tt := range tests {
		n, a, err := SplitListen(tt.in)
		if err != nil || n != tt.net || a != tt.addr {
			t.Errorf("SplitListen(%q) = %q, %q, %v", tt.in, n, a, err)
		}
	}
	for _, in := range []string{"", "inet", "unix:", "tcp4:1.2.3.4", "inet:host"} {
		if _, _, err := SplitListen(in); err == nil {
			t.Errorf("SplitListen(%q): no error", in)
		}
	}
}

func TestReadToken(t *testing.T) {
	p := t.TempDir() + "/tok"
	os.WriteFile(p, []byte("  s3cret-0123456789 \nignored\n"), 0o600)
	tok, err := HTTP{TokenFile: p}.ReadToken()
	if err != nil || tok != "s3cret-0123456789" {
		t.Fatalf("ReadToken = %q, %v", tok, err)
	}
	os.WriteFile(p, []byte("short\n"), 0o600)
	if _, err := (HTTP{TokenFile: p}).ReadToken(); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("short token file: %v", err)
	}
	if _, err := (HTTP{TokenFile: p + "x"}).ReadToken(); err == nil {
		t.Error("missing token file: no error")
	}
}

func TestDashboardPasswords(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(p, []byte("0123456789abcdefX\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admin, read, err := Dashboard{AdminPasswordFile: p, ReadPassword: "read-only-password"}.Passwords()
	if err != nil || admin != "0123456789abcdefX" || read != "read-only-password" {
		t.Fatalf("Passwords = %q, %q, %v", admin, read, err)
	}
	if _, _, err := (Dashboard{ReadPasswordFile: p + "x"}).Passwords(); err == nil {
		t.Error("a missing file read")
	}
}

func TestANDDExactCosine(t *testing.T) {
	for _, tt := range []struct {
		v  float64
		ok bool
	}{{0, true}, {0.5, true}, {1, true}, {-0.1, false}, {1.5, false}} {
		c := Default()
		c.ANDD.ExactCosine = tt.v
		if err := c.Validate(); (err == nil) != tt.ok {
			t.Errorf("exact_cosine %v: %v", tt.v, err)
		}
	}
}

// TestAllProblems: config check names every problem, not only the first.
func TestAllProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"two unknown keys", "milter:\n  listne: x\nhttp:\n  tokne: y\n", []string{"line 2: unknown key milter.listne", "line 4: unknown key http.tokne"}},
		{"two bad values", "milter:\n  on_error: maybe\nlog:\n  level: loud\n", []string{"line 2: milter.on_error", "line 4: log.level"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			var ve *ValueError
			if strings.Contains(tt.name, "values") && !errors.As(err, &ve) {
				t.Errorf("errors.As(*ValueError) fails on %v", err)
			}
		})
	}
}

func TestReportsRealm(t *testing.T) {
	for _, realm := range []string{"example.org", "Mail.Example.org", "localhost", "xn--bcher-kva.example"} {
		c, err := Parse([]byte("reports:\n  realm: " + realm + "\n"))
		if err != nil {
			t.Errorf("realm %q: %v", realm, err)
			continue
		}
		if c.Reports.Realm != realm {
			t.Errorf("realm %q parsed as %q", realm, c.Reports.Realm)
		}
	}
}
