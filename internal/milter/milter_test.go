package milter

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/lab/mtadial"
	"github.com/nddmilter/nddmilter/internal/metrics"
	"github.com/nddmilter/nddmilter/internal/testutil"
)

// scriptChecker is a stand-in for the engine in protocol tests: the verdict
// is chosen by a "Subject: <action>" header, so that every milter action
// can be driven. (The real engine's tests are in engine_test.go.)
type scriptChecker struct {
	mu   sync.Mutex
	seen [][]byte
}

// CheckWith applies the cap as the engine does (campaign's
// TestEngineCheckWithCap).
func (c *scriptChecker) CheckWith(ctx context.Context, raw []byte, o campaign.CheckOptions) (campaign.Verdict, error) {
	v, err := c.verdict(ctx, raw)
	if err == nil && o.CapBy != "" && v.Action > o.MaxAction {
		v.Rule += "; " + v.Action.String() + " capped to " + o.MaxAction.String() + " by " + o.CapBy
		v.Action = o.MaxAction
	}
	if err == nil && o.DeferRejects && v.Action == action.Reject {
		v.Rule += "; deferred"
	}
	return v, err
}

func (c *scriptChecker) verdict(ctx context.Context, raw []byte) (campaign.Verdict, error) {
	c.mu.Lock()
	c.seen = append(c.seen, append([]byte(nil), raw...))
	c.mu.Unlock()
	subj := ""
	for _, l := range strings.Split(string(raw), "\r\n") {
		if v, ok := strings.CutPrefix(l, "Subject: "); ok {
			subj = v
			break
		}
		if l == "" {
			break
		}
	}
	ev := []campaign.Evidence{{Family: "imatch", Bag: 0}, {Family: "imatch", Bag: 3}, {Family: "andd", Similarity: 0.934}}
	switch subj {
	case "tag":
		return campaign.Verdict{Action: action.Tag, Campaign: 42, Score: 0.7, Rule: "reports>=1", Evidence: ev}, nil
	case "quarantine":
		return campaign.Verdict{Action: action.Quarantine, Campaign: 42, Score: 0.9, Rule: "r", Evidence: ev}, nil
	case "reject":
		return campaign.Verdict{Action: action.Reject, Campaign: 42, Score: 0.99, Rule: "r", Evidence: ev}, nil
	case "error":
		return campaign.Verdict{}, errors.New("store: disk on fire")
	case "panic":
		panic("engine bug")
	case "slow":
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond)
		return campaign.Verdict{Action: action.Reject}, ctx.Err()
	case "hang":
		time.Sleep(2 * time.Second)
		return campaign.Verdict{Action: action.Reject}, nil
	}
	return campaign.Verdict{Action: action.Accept, Score: 0.01}, nil
}

func (c *scriptChecker) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) == 0 {
		return ""
	}
	return string(c.seen[len(c.seen)-1])
}

type harness struct {
	t    *testing.T
	srv  *Server
	addr string
	met  *metrics.Metrics
	logs *testutil.LockedBuffer
}

func start(t *testing.T, c Checker, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, met: metrics.New(), logs: &testutil.LockedBuffer{}}
	opts.Metrics = h.met
	opts.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.srv, h.addr = srv, ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return h
}

// clientActions are the actions the test clients allow (Postfix allows
// all of them).
const clientActions = gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine

// postfixProtocol is what Postfix 3.x offers at protocol version 6.
const postfixProtocol = gomilter.OptProtocol(mtadial.PostfixProtocol)

// session opens a client session the way Postfix does (protocol 6, every
// no-reply flag offered).
func (h *harness) session() *gomilter.ClientSession {
	h.t.Helper()
	return h.sessionWith(postfixProtocol)
}

// sessionWith opens a client session offering the given protocol flags;
// 0 makes the MTA wait for a reply to every step.
func (h *harness) sessionWith(proto gomilter.OptProtocol) *gomilter.ClientSession {
	h.t.Helper()
	c := gomilter.NewClientWithOptions("tcp", h.addr, gomilter.ClientOptions{
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 5 * time.Second,
		ActionMask:   clientActions,
		ProtocolMask: proto,
	})
	s, err := c.Session()
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { s.Close() })
	return s
}

type msg struct {
	from    string
	rcpts   []string
	headers [][2]string
	body    string
	queueID string
}

func simple(subject string) msg {
	return msg{
		from:  "sender@example.net",
		rcpts: []string{"user@example.org"},
		headers: [][2]string{
			{"From", "Sender <sender@example.net>"},
			{"To", "user@example.org"},
			{"Subject", subject},
		},
		body:    "Hello,\r\nthis is the body.\r\n",
		queueID: "4ABC123",
	}
}

// send runs one message through the session and returns the modifications
// and the final action.
func send(t *testing.T, s *gomilter.ClientSession, m msg) ([]gomilter.ModifyAction, *gomilter.Action) {
	t.Helper()
	must := func(a *gomilter.Action, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if a.Code != gomilter.ActContinue {
			t.Fatalf("unexpected early action %c", a.Code)
		}
	}
	must(s.Mail(m.from, nil))
	for _, r := range m.rcpts {
		must(s.Rcpt(r, nil))
	}
	for _, hv := range m.headers {
		must(s.HeaderField(hv[0], hv[1]))
	}
	must(s.HeaderEnd())
	body := []byte(m.body)
	for len(body) > 0 {
		n := min(len(body), gomilter.MaxBodyChunk)
		must(s.BodyChunk(body[:n]))
		body = body[n:]
	}
	if err := s.Macros(gomilter.CodeEOB, "i", m.queueID); err != nil {
		t.Fatal(err)
	}
	mods, act, err := s.End()
	if err != nil {
		t.Fatal(err)
	}
	return mods, act
}

func headersOf(mods []gomilter.ModifyAction) map[string]string {
	h := map[string]string{}
	for _, m := range mods {
		if m.Code == gomilter.ActAddHeader {
			h[m.HeaderName] = m.HeaderValue
		}
	}
	return h
}

func TestActions(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		m        msg
		code     gomilter.ActionCode
		smtp     int
		text     string // substring of the SMTP reply
		headers  map[string]string
		noHeader []string
		hold     string // substring of the quarantine reason
	}{
		{name: "accept adds verdict", m: simple("hello"), code: gomilter.ActAccept,
			headers: map[string]string{"X-NDD-Verdict": "accept; score=0.010"}, noHeader: []string{"X-NDD-Campaign"}},
		{name: "accept without header", opts: Options{NoAcceptHeader: true}, m: simple("hello"), code: gomilter.ActAccept,
			noHeader: []string{"X-NDD-Verdict"}},
		{name: "tag", m: simple("tag"), code: gomilter.ActAccept,
			headers: map[string]string{"X-NDD-Verdict": "tag; score=0.700; rule=reports>=1", "X-NDD-Campaign": "42", "X-NDD-Evidence": "imatch bags=0,3; andd cos=0.93"}},
		{name: "quarantine", m: simple("quarantine"), code: gomilter.ActAccept,
			headers: map[string]string{"X-NDD-Verdict": "quarantine; score=0.900; rule=r", "X-NDD-Campaign": "42"}, hold: "nddmilter: spam campaign 42 (score 0.90)"},
		{name: "reject", m: simple("reject"), code: gomilter.ActReplyCode, smtp: 550, text: "5.7.1 Message rejected as spam campaign 42 (nddmilter)"},
		{name: "custom reject text", opts: Options{RejectText: "554 5.7.0 no thanks (%c, %s, %r, 100%%)"}, m: simple("reject"),
			code: gomilter.ActReplyCode, smtp: 554, text: "5.7.0 no thanks (42, 0.99, r, 100%%)"}, // '%' doubled for the MTA,
		{name: "reject as tempfail", opts: Options{RejectWith: "tempfail"}, m: simple("reject"),
			code: gomilter.ActReplyCode, smtp: 451, text: "4.7.1 Message deferred as suspected spam campaign 42"},
		{name: "max action tag", opts: Options{MaxAction: "tag"}, m: simple("reject"), code: gomilter.ActAccept,
			headers: map[string]string{"X-NDD-Verdict": "tag; score=0.990; rule=r; reject capped to tag by milter max_action"}},
		{name: "override by domain", opts: Options{Overrides: map[string]string{"example.org": "accept"}}, m: simple("reject"),
			code: gomilter.ActAccept, headers: map[string]string{"X-NDD-Verdict": "accept; score=0.990; rule=r; reject capped to accept by milter.overrides example.org"}},
		{name: "override by address wins over domain", opts: Options{Overrides: map[string]string{"example.org": "accept", "user@example.org": "reject"}},
			m: simple("reject"), code: gomilter.ActReplyCode, smtp: 550},
		{name: "weakest recipient cap", opts: Options{MaxAction: "reject", Overrides: map[string]string{"abuse@example.com": "tag"}},
			m:    func() msg { m := simple("reject"); m.rcpts = append(m.rcpts, "Abuse@Example.com"); return m }(),
			code: gomilter.ActAccept, headers: map[string]string{"X-NDD-Verdict": "tag; score=0.990; rule=r; reject capped to tag by milter.overrides abuse@example.com"}},
		{name: "header prefix", opts: Options{HeaderPrefix: "X-Campaign-"}, m: simple("tag"), code: gomilter.ActAccept,
			headers: map[string]string{"X-Campaign-Verdict": "tag; score=0.700; rule=reports>=1", "X-Campaign-Campaign": "42"}},
		{name: "error fails open", m: simple("error"), code: gomilter.ActAccept,
			headers: map[string]string{"X-NDD-Verdict": "unchecked; error=check"}, noHeader: []string{"X-NDD-Campaign"}},
		{name: "error fails open without header", opts: Options{NoAcceptHeader: true}, m: simple("error"), code: gomilter.ActAccept,
			noHeader: []string{"X-NDD-Verdict"}},
		{name: "error tempfails", opts: Options{OnError: "tempfail"}, m: simple("error"), code: gomilter.ActTempFail},
		{name: "panic fails open", m: simple("panic"), code: gomilter.ActAccept,
			headers: map[string]string{"X-NDD-Verdict": "unchecked; error=panic"}},
		{name: "timeout fails open", opts: Options{CheckTimeout: 50 * time.Millisecond}, m: simple("slow"), code: gomilter.ActAccept,
			headers: map[string]string{"X-NDD-Verdict": "unchecked; error=timeout"}},
		{name: "hung engine fails open", opts: Options{CheckTimeout: 50 * time.Millisecond}, m: simple("hang"), code: gomilter.ActAccept,
			headers: map[string]string{"X-NDD-Verdict": "unchecked; error=timeout"}},
	}
	for _, mode := range []struct {
		name  string
		proto gomilter.OptProtocol
	}{{"no-reply", postfixProtocol}, {"reply-each-step", 0}} {
		for _, tt := range tests {
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				h := start(t, &scriptChecker{}, tt.opts)
				s := h.sessionWith(mode.proto)
				mods, act := send(t, s, tt.m)
				if act.Code != tt.code {
					t.Fatalf("action %c (%d %q), want %c", act.Code, act.SMTPCode, act.SMTPText, tt.code)
				}
				if tt.smtp != 0 && act.SMTPCode != tt.smtp {
					t.Errorf("SMTP code %d, want %d", act.SMTPCode, tt.smtp)
				}
				if tt.text != "" && !strings.Contains(act.SMTPText, tt.text) {
					t.Errorf("SMTP text %q lacks %q", act.SMTPText, tt.text)
				}
				got := headersOf(mods)
				for k, v := range tt.headers {
					if got[k] != v {
						t.Errorf("header %s = %q, want %q (all: %v)", k, got[k], v, got)
					}
				}
				for _, k := range tt.noHeader {
					if _, ok := got[k]; ok {
						t.Errorf("unexpected header %s", k)
					}
				}
				hold := ""
				for _, m := range mods {
					if m.Code == gomilter.ActQuarantine {
						hold = m.Reason
					}
				}
				if tt.hold != hold && !(tt.hold != "" && strings.Contains(hold, tt.hold)) {
					t.Errorf("quarantine reason %q, want %q", hold, tt.hold)
				}
			})
		}
	}
}

// The checks run on reused goroutines; a hung check past its deadline
// holds none that the next messages need, and a check that panicked
// leaves the next ones checked.
func TestHungCheckHoldsNoOther(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{CheckTimeout: 200 * time.Millisecond})
	s := h.session()
	for i, tt := range []struct {
		m       msg
		verdict string
	}{
		{simple("hang"), "unchecked; error=timeout"},
		{simple("hang"), "unchecked; error=timeout"},
		{simple("panic"), "unchecked; error=panic"},
		{simple("tag"), "tag; score=0.700; rule=reports>=1"},
		{simple("hello"), "accept; score=0.010"},
	} {
		mods, act := send(t, s, tt.m)
		if got := headersOf(mods)["X-NDD-Verdict"]; act.Code != gomilter.ActAccept || got != tt.verdict {
			t.Errorf("message %d: action %c, verdict %q, want %q", i, act.Code, got, tt.verdict)
		}
	}
}

func TestForgedHeadersDeleted(t *testing.T) {
	c := &scriptChecker{}
	h := start(t, c, Options{})
	s := h.session()
	m := simple("tag")
	m.headers = append(m.headers,
		[2]string{"X-NDD-Verdict", "accept; score=0.000"},
		[2]string{"x-ndd-verdict", "accept"},
		[2]string{"X-NDD-Campaign", "0"},
		[2]string{"X-Other", "kept"},
	)
	mods, act := send(t, s, m)
	if act.Code != gomilter.ActAccept {
		t.Fatalf("action %c", act.Code)
	}
	type del struct {
		name string
		idx  uint32
	}
	var dels []del
	for _, m := range mods {
		if m.Code == gomilter.ActChangeHeader {
			if m.HeaderValue != "" {
				t.Errorf("change header with value %q", m.HeaderValue)
			}
			dels = append(dels, del{strings.ToLower(m.HeaderName), m.HeaderIndex})
		}
	}
	want := []del{{"x-ndd-verdict", 2}, {"x-ndd-verdict", 1}, {"x-ndd-campaign", 1}}
	if len(dels) != len(want) {
		t.Fatalf("deletions %v, want %v", dels, want)
	}
	for i := range want {
		if dels[i] != want[i] {
			t.Errorf("deletion %d = %v, want %v", i, dels[i], want[i])
		}
	}
	// The forged headers are not part of what the engine sees.
	if raw := c.last(); strings.Contains(strings.ToLower(raw), "x-ndd-") || !strings.Contains(raw, "X-Other: kept\r\n") {
		t.Errorf("engine saw:\n%s", raw)
	}
}

// Decoy headers with the prefix are left alone (deleting them would only
// cost the MTA), a forged verdict among them is still deleted, and a flood
// of forged verdicts is rejected instead of turned into a flood of
// deletions.
func TestForgedHeaderDecoysAndFlood(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{})
	m := simple("hello")
	for i := 0; i < 200; i++ {
		m.headers = append(m.headers, [2]string{"X-NDD-Decoy" + strconv.Itoa(i), "x"})
	}
	m.headers = append(m.headers, [2]string{"X-NDD-Verdict", "accept; forged"})
	mods, act := send(t, h.session(), m)
	var dels []string
	for _, m := range mods {
		if m.Code == gomilter.ActChangeHeader {
			dels = append(dels, m.HeaderName)
		}
	}
	if act.Code != gomilter.ActAccept || len(dels) != 1 || dels[0] != "X-NDD-Verdict" {
		t.Errorf("decoys: action %c, deletions %v, want only X-NDD-Verdict", act.Code, dels)
	}

	flood := simple("hello")
	for i := 0; i <= maxForged; i++ {
		flood.headers = append(flood.headers, [2]string{"X-NDD-Verdict", "accept"})
	}
	mods, act = send(t, h.session(), flood)
	if act.Code != gomilter.ActReplyCode || act.SMTPCode != 550 || !strings.Contains(act.SMTPText, "X-NDD-Verdict headers") || len(mods) != 0 {
		t.Errorf("flood: action %c %d %q, %d modifications", act.Code, act.SMTPCode, act.SMTPText, len(mods))
	}
}

func TestRawMessageRebuilt(t *testing.T) {
	c := &scriptChecker{}
	h := start(t, c, Options{MaxBodyBytes: 10})
	s := h.session()
	m := simple("hello")
	m.headers = append(m.headers, [2]string{"X-Folded", "one\n\ttwo"})
	m.body = "0123456789abcdef"
	send(t, s, m)
	want := "From: Sender <sender@example.net>\r\nTo: user@example.org\r\nSubject: hello\r\nX-Folded: one\r\n\ttwo\r\n\r\n0123456789"
	if got := c.last(); got != want {
		t.Errorf("raw = %q\nwant  %q", got, want)
	}
	if !strings.Contains(h.logs.String(), "truncated=true") || !strings.Contains(h.logs.String(), "queue_id=4ABC123") {
		t.Errorf("log lacks truncation or queue id:\n%s", h.logs.String())
	}
}

// One session, several messages: state is reset between them, also after
// a reply-code reject (which go-milter does not treat as final).
func TestSeveralMessagesOneSession(t *testing.T) {
	c := &scriptChecker{}
	h := start(t, c, Options{})
	s := h.session()
	for i, subj := range []string{"reject", "hello", "tag", "reject", "quarantine", "hello"} {
		m := simple(subj)
		m.body = strings.Repeat("x", i+1) + "\r\n"
		mods, act := send(t, s, m)
		raw := c.last()
		if strings.Count(raw, "Subject:") != 1 || !strings.HasSuffix(raw, "\r\n\r\n"+m.body) {
			t.Fatalf("message %d: state not reset, engine saw %q", i, raw)
		}
		wantCode := gomilter.ActAccept
		if subj == "reject" {
			wantCode = gomilter.ActReplyCode
		}
		if act.Code != wantCode {
			t.Fatalf("message %d (%s): action %c", i, subj, act.Code)
		}
		holds := 0
		for _, m := range mods {
			if m.Code == gomilter.ActQuarantine {
				holds++
			}
		}
		if (subj == "quarantine") != (holds == 1) {
			t.Errorf("message %d (%s): %d quarantines", i, subj, holds)
		}
	}
}

func TestAbortResets(t *testing.T) {
	c := &scriptChecker{}
	h := start(t, c, Options{})
	s := h.session()
	if _, err := s.Mail("a@example.net", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.HeaderField("Subject", "reject"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BodyChunk([]byte("half a body")); err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(); err != nil {
		t.Fatal(err)
	}
	mods, act := send(t, s, simple("hello"))
	if act.Code != gomilter.ActAccept || headersOf(mods)["X-NDD-Verdict"] == "" {
		t.Fatalf("after abort: %c %v", act.Code, mods)
	}
	if raw := c.last(); strings.Contains(raw, "reject") || strings.Contains(raw, "half a body") {
		t.Errorf("aborted message leaked into the next: %q", raw)
	}
}

// Garbage on one connection closes that connection only; other sessions,
// before and after, keep working.
func TestGarbageOnSocket(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{})
	good := h.session()
	garbage := [][]byte{
		[]byte("GET / HTTP/1.0\r\n\r\n"),                // huge length prefix
		{0, 0, 0, 0},                                    // zero-length packet
		{0, 0, 0, 1, 'Z'},                               // unknown command
		{0, 0, 0, 2, 'C', 'x'},                          // truncated connect
		{0, 0, 0, 1, 'D'},                               // empty macro packet
		{0, 0, 0, 3, 'L', 'a', 0},                       // header without value
		{0, 0, 0, 5, 'O', 0, 0, 0},                      // short option negotiation
		{0, 0, 0, 9, 'C', 'h', 0, '4', 0, 1, '1', 0, 0}, // odd connect
		{0x7f, 0xff, 0xff, 0xff},                        // length beyond the cap
		bytes.Repeat([]byte{0xff}, 64),
	}
	for i, g := range garbage {
		conn, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(g)
		conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		io.Copy(io.Discard, conn) // the server closes, or answers and waits
		conn.Close()
		_ = i
	}
	// The session opened before still works, and so does a new one.
	if _, act := send(t, good, simple("reject")); act.Code != gomilter.ActReplyCode {
		t.Fatalf("old session: %c", act.Code)
	}
	if _, act := send(t, h.session(), simple("tag")); act.Code != gomilter.ActAccept {
		t.Fatalf("new session: %c", act.Code)
	}
}

func TestConcurrentSessions(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{})
	var wg sync.WaitGroup
	var failures atomic.Int32
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := gomilter.NewClientWithOptions("tcp", h.addr, gomilter.ClientOptions{
				ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
				ActionMask: clientActions,
			})
			s, err := c.Session()
			if err != nil {
				failures.Add(1)
				return
			}
			defer s.Close()
			for j := 0; j < 20; j++ {
				subj := []string{"hello", "reject", "tag"}[j%3]
				mods, act, err := sendErr(s, simple(subj))
				if err != nil {
					failures.Add(1)
					return
				}
				if subj == "reject" && act.Code != gomilter.ActReplyCode || subj == "tag" && headersOf(mods)["X-NDD-Campaign"] != "42" {
					failures.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d failures", n)
	}
}

func sendErr(s *gomilter.ClientSession, m msg) ([]gomilter.ModifyAction, *gomilter.Action, error) {
	if _, err := s.Mail(m.from, nil); err != nil {
		return nil, nil, err
	}
	for _, r := range m.rcpts {
		if _, err := s.Rcpt(r, nil); err != nil {
			return nil, nil, err
		}
	}
	for _, hv := range m.headers {
		if _, err := s.HeaderField(hv[0], hv[1]); err != nil {
			return nil, nil, err
		}
	}
	if _, err := s.HeaderEnd(); err != nil {
		return nil, nil, err
	}
	if _, err := s.BodyChunk([]byte(m.body)); err != nil {
		return nil, nil, err
	}
	return s.End()
}

func TestMetricsCounted(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{})
	s := h.session()
	for _, subj := range []string{"hello", "reject", "error", "tag"} {
		send(t, s, simple(subj))
	}
	text := scrape(t, h.met)
	for _, want := range []string{
		`nddmilter_messages_total{action="accept"} 2`, // hello + error (fail-open)
		`nddmilter_messages_total{action="reject"} 1`,
		`nddmilter_messages_total{action="tag"} 1`,
		`nddmilter_matches_total{family="imatch"} 2`,
		`nddmilter_failopen_total 1`,
		`nddmilter_errors_total{stage="check"} 1`,
		`nddmilter_check_duration_seconds_count 4`,
		`nddmilter_milter_connections_total{streaming="true",version="6"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			b.WriteString(mf.GetName())
			if len(mt.GetLabel()) > 0 {
				b.WriteString("{")
				for i, l := range mt.GetLabel() {
					if i > 0 {
						b.WriteString(",")
					}
					b.WriteString(l.GetName() + `="` + l.GetValue() + `"`)
				}
				b.WriteString("}")
			}
			switch {
			case mt.Counter != nil:
				b.WriteString(" " + ftoa(mt.Counter.GetValue()))
			case mt.Gauge != nil:
				b.WriteString(" " + ftoa(mt.Gauge.GetValue()))
			case mt.Histogram != nil:
				b.WriteString("_count " + ftoa(float64(mt.Histogram.GetSampleCount())))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// Update swaps the checker and options for the next message without
// dropping the connection.
func TestUpdateWithoutDroppingSessions(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{})
	s := h.session()
	if _, act := send(t, s, simple("reject")); act.Code != gomilter.ActReplyCode {
		t.Fatalf("before: %c", act.Code)
	}
	if err := h.srv.Update(nil, Options{MaxAction: "tag", Metrics: h.met, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	if _, act := send(t, s, simple("reject")); act.Code != gomilter.ActAccept {
		t.Fatalf("after update: %c", act.Code)
	}
	if err := h.srv.Update(nil, Options{OnError: "maybe"}); err == nil {
		t.Error("bad options accepted")
	}
}

func TestShutdownClosesIdleSessions(t *testing.T) {
	srv, err := New(&scriptChecker{}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	c := gomilter.NewClientWithOptions("tcp", ln.Addr().String(), gomilter.ClientOptions{ActionMask: clientActions, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	s, err := c.Session()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	send(t, s, simple("hello"))
	if n := srv.Sessions(); n != 1 {
		t.Fatalf("%d sessions", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("still accepting after shutdown")
	}
}

func TestExpand(t *testing.T) {
	v := campaign.Verdict{Campaign: 7, Score: 0.456, Rule: "r%1\n"}
	tests := []struct{ in, want string }{
		{"550 5.7.1 campaign %c", "550 5.7.1 campaign 7"},
		{"%s %r %% %x %", "0.46 r_1_ % %x %"},
	}
	for _, tt := range tests {
		if got := expand(tt.in, v); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestOverrideLookup(t *testing.T) {
	ov := map[string]action.Action{"example.org": action.Tag, "boss@example.org": action.Reject, "corp": action.Accept}
	tests := []struct{ rcpt, want string }{
		{"user@example.org", "tag"},
		{"<Boss@Example.org>", "reject"},
		{"x@mail.example.org", "tag"},
		{"x@a.b.corp", "accept"},
		{"x@example.com", ""},
		{"postmaster", ""},
	}
	for _, tt := range tests {
		got, _, ok := override(ov, tt.rcpt)
		if !ok && tt.want != "" || ok && got.String() != tt.want {
			t.Errorf("override(%q) = %q, want %q", tt.rcpt, got, tt.want)
		}
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// A unix socket: a stale socket file is replaced, a live one is refused,
// and the milter works over it.
func TestUnixSocket(t *testing.T) {
	path := t.TempDir() + "/milter.sock"
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // leaves the file behind, nobody listening
	ln, err := Listen("unix", path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	if _, err := Listen("unix", path); err == nil {
		t.Fatal("second listener on a live socket accepted")
	}
	srv, err := New(&scriptChecker{}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	c := gomilter.NewClientWithOptions("unix", path, gomilter.ClientOptions{ActionMask: clientActions, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	s, err := c.Session()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, act := send(t, s, simple("reject")); act.Code != gomilter.ActReplyCode {
		t.Fatalf("over unix socket: %c", act.Code)
	}
}

// A unix socket gets the mode and group asked for; an unknown group is an
// error that says so.
func TestUnixSocketPermissions(t *testing.T) {
	dir := t.TempDir()
	gid := os.Getgid()
	ln, err := ListenSocket("unix", dir+"/m.sock", SocketOptions{Mode: 0o600, Group: strconv.Itoa(gid)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(dir + "/m.sock")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Gid) != gid {
		t.Errorf("group %d, want %d", st.Gid, gid)
	}
	if _, err := ListenSocket("unix", dir+"/n.sock", SocketOptions{Group: "no-such-group-ndd"}); err == nil ||
		!strings.Contains(err.Error(), "socket group") {
		t.Errorf("unknown group: %v", err)
	}
	if _, err := os.Stat(dir + "/n.sock"); err == nil {
		t.Error("socket left behind after an unknown group")
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"p = match 0.93 × reputation 0.99 (≥ 3)", "p = match 0.93 x reputation 0.99 (>= 3)"},
		{"a%b\r\nc\x00é", "a_b__c__"},
	}
	for _, tt := range tests {
		if got := sanitize(tt.in); got != tt.want {
			t.Errorf("sanitize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestSpamAssassinHeadersAndSubjectTag: with SpamHeaders and SubjectTag,
// tagged and quarantined mail gets X-Spam-Flag and X-Spam-Status in
// SpamAssassin's format (replacing an earlier filter's) and a tagged
// Subject; accepted mail gets neither; a Subject already tagged is left
// alone. The log line names the recipients and the client, hashed with
// HashAddresses.
func TestSpamAssassinHeadersAndSubjectTag(t *testing.T) {
	type change struct{ name, value string }
	collect := func(mods []gomilter.ModifyAction, _ *gomilter.Action) (added map[string]string, changed map[string]change) {
		added, changed = map[string]string{}, map[string]change{}
		for _, m := range mods {
			switch m.Code {
			case gomilter.ActAddHeader:
				added[m.HeaderName] = m.HeaderValue
			case gomilter.ActChangeHeader:
				changed[m.HeaderName] = change{strconv.Itoa(int(m.HeaderIndex)), m.HeaderValue}
			}
		}
		return
	}
	h := start(t, &scriptChecker{}, Options{SpamHeaders: true, SpamRequired: 0.25, SubjectTag: "[SPAM] "})

	s := h.session()
	if _, err := s.Conn("mx.example.net", gomilter.FamilyInet, 25, "192.0.2.7"); err != nil {
		t.Fatal(err)
	}
	m := simple("tag")
	m.rcpts = []string{"<alice@example.org>", "<bob@example.org>"}
	added, changed := collect(send(t, s, m))
	if added["X-Spam-Flag"] != "YES" {
		t.Errorf("X-Spam-Flag: %q", added["X-Spam-Flag"])
	}
	if got, want := added["X-Spam-Status"], "Yes, score=0.700 required=0.250 tests=NDD_CAMPAIGN_42,NDD_TAG autolearn=no version=nddmilter"; got != want {
		t.Errorf("X-Spam-Status:\n got %q\nwant %q", got, want)
	}
	if c := changed["Subject"]; c != (change{"1", "[SPAM] tag"}) {
		t.Errorf("Subject change: %+v", c)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "rcpt=alice@example.org,bob@example.org") || !strings.Contains(logs, "client=192.0.2.7") {
		t.Errorf("log line lacks the recipients or the client:\n%s", logs)
	}

	// An earlier filter's headers are replaced; quarantine gets them too.
	m = simple("quarantine")
	m.headers = append(m.headers, [2]string{"X-Spam-Flag", "NO"}, [2]string{"X-Spam-Status", "No, score=0.1"})
	added, changed = collect(send(t, s, m))
	if changed["X-Spam-Flag"] != (change{"1", "YES"}) || !strings.HasPrefix(changed["X-Spam-Status"].value, "Yes, score=0.900") ||
		added["X-Spam-Flag"] != "" || added["X-Spam-Status"] != "" {
		t.Errorf("quarantine with earlier spam headers: added %v changed %v", added, changed)
	}
	// Accepted mail: nothing.
	added, changed = collect(send(t, s, simple("hello")))
	if added["X-Spam-Flag"] != "" || added["X-Spam-Status"] != "" || len(changed) != 0 {
		t.Errorf("accepted message: added %v changed %v", added, changed)
	}

	// Off by default.
	h2 := start(t, &scriptChecker{}, Options{HashAddresses: true})
	s2 := h2.session()
	if _, err := s2.Conn("mx.example.net", gomilter.FamilyInet, 25, "192.0.2.7"); err != nil {
		t.Fatal(err)
	}
	added, changed = collect(send(t, s2, simple("tag")))
	if added["X-Spam-Flag"] != "" || len(changed) != 0 {
		t.Errorf("defaults: added %v changed %v", added, changed)
	}
	logs = h2.logs.String()
	if strings.Contains(logs, "user@example.org") || strings.Contains(logs, "192.0.2.7") || strings.Contains(logs, "sender@example.net") ||
		!strings.Contains(logs, "rcpt=h:") || !strings.Contains(logs, "client=h:") {
		t.Errorf("hashed log line:\n%s", logs)
	}
}
