package djmilter

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/lab/mtadial"
	"github.com/nddmilter/nddmilter/internal/milter"
)

// subjectChecker decides by the Subject header, as internal/milter's
// protocol tests do, and keeps the last message it saw.
type subjectChecker struct {
	mu   sync.Mutex
	last string
}

func (c *subjectChecker) CheckWith(_ context.Context, raw []byte, o campaign.CheckOptions) (campaign.Verdict, error) {
	c.mu.Lock()
	c.last = string(raw)
	c.mu.Unlock()
	ev := []campaign.Evidence{{Family: "imatch", Bag: 3}, {Family: "andd", Similarity: 0.934}}
	var v campaign.Verdict
	switch {
	case strings.Contains(string(raw), "Subject: reject"):
		v = campaign.Verdict{Action: action.Reject, Campaign: 42, Score: 0.99, Rule: "r", Evidence: ev}
	case strings.Contains(string(raw), "Subject: quarantine"):
		v = campaign.Verdict{Action: action.Quarantine, Campaign: 42, Score: 0.9, Rule: "r", Evidence: ev}
	case strings.Contains(string(raw), "Subject: tag"):
		v = campaign.Verdict{Action: action.Tag, Campaign: 42, Score: 0.7, Rule: "r", Evidence: ev}
	default:
		v = campaign.Verdict{Action: action.Accept, Score: 0.01}
	}
	if o.CapBy != "" && v.Action > o.MaxAction {
		v.Rule += "; capped by " + o.CapBy
		v.Action = o.MaxAction
	}
	return v, nil
}

func serve(t *testing.T, c milter.Checker, o milter.Options, do Options) string {
	t.Helper()
	o.Logger = slog.New(slog.DiscardHandler)
	own, err := milter.New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(own, do)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func session(t *testing.T, addr string, proto gomilter.OptProtocol) *gomilter.ClientSession {
	t.Helper()
	c := gomilter.NewClientWithOptions("tcp", addr, gomilter.ClientOptions{
		Dialer:       mtadial.Dialer{},
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 5 * time.Second,
		ActionMask:   gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
		ProtocolMask: proto,
	})
	s, err := c.Session()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func send(t *testing.T, s *gomilter.ClientSession, rcpt string, headers [][2]string) ([]gomilter.ModifyAction, *gomilter.Action) {
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
	must(s.Mail("<sender@example.net>", nil))
	must(s.Rcpt("<"+rcpt+">", nil))
	for _, h := range headers {
		must(s.HeaderField(h[0], h[1]))
	}
	must(s.HeaderEnd())
	must(s.BodyChunk([]byte("Hello,\r\nthe body.\r\n")))
	if err := s.Macros(gomilter.CodeEOB, "i", "4ABC123"); err != nil {
		t.Fatal(err)
	}
	mods, act, err := s.End()
	if err != nil {
		t.Fatal(err)
	}
	return mods, act
}

// TestSameBehaviour drives the d--j/go-milter server with go-milter's
// client the way Postfix does (no reply before end of message) and as a
// protocol-2 MTA (a reply to every step): the actions, headers, deletions,
// quarantine reason and reply texts are those of nddmilter's own server.
func TestSameBehaviour(t *testing.T) {
	forged := [][2]string{{"X-NDD-Verdict", "accept; forged"}, {"x-ndd-verdict", "again"}, {"X-NDD-Other", "kept"}}
	tests := []struct {
		name    string
		opts    milter.Options
		subject string
		rcpt    string
		code    gomilter.ActionCode
		smtp    int
		text    string
		headers map[string]string
		deleted int    // forged X-NDD-Verdict copies deleted
		hold    string // quarantine reason
	}{
		{name: "accept", subject: "hello", code: gomilter.ActAccept, deleted: 2,
			headers: map[string]string{"X-NDD-Verdict": "accept; score=0.010"}},
		{name: "tag", subject: "tag", code: gomilter.ActAccept, deleted: 2,
			headers: map[string]string{"X-NDD-Verdict": "tag; score=0.700; rule=r", "X-NDD-Campaign": "42", "X-NDD-Evidence": "imatch bags=3; andd cos=0.93"}},
		{name: "quarantine", subject: "quarantine", code: gomilter.ActAccept, deleted: 2, hold: "nddmilter: spam campaign 42 (score 0.90)",
			headers: map[string]string{"X-NDD-Verdict": "quarantine; score=0.900; rule=r"}},
		{name: "reject", subject: "reject", code: gomilter.ActReplyCode, smtp: 550, text: "5.7.1 Message rejected as spam campaign 42 (nddmilter)"},
		{name: "reject text with percent", opts: milter.Options{RejectText: "554 5.7.0 no (%c, 100%%)"}, subject: "reject",
			code: gomilter.ActReplyCode, smtp: 554, text: "5.7.0 no (42, 100%%)"},
		{name: "override", opts: milter.Options{Overrides: map[string]string{"example.org": action.Tag.String()}}, subject: "reject",
			code: gomilter.ActAccept, deleted: 2, headers: map[string]string{"X-NDD-Verdict": "tag; score=0.990; rule=r; capped by milter.overrides example.org"}},
	}
	for _, mode := range []struct {
		name  string
		proto gomilter.OptProtocol
		opts  Options
	}{
		{"no-reply", mtadial.PostfixProtocol, Options{}},
		{"reply-each-step", 0, Options{}},
		{"no-reply/buffered", mtadial.PostfixProtocol, Options{Buffered: true}},
		{"reply-each-step/buffered", 0, Options{Buffered: true}},
	} {
		for _, tt := range tests {
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				c := &subjectChecker{}
				s := session(t, serve(t, c, tt.opts, mode.opts), mode.proto)
				hs := append([][2]string{{"From", "a@example.net"}, {"Subject", tt.subject}}, forged...)
				for range 2 { // two messages on one connection
					mods, act := send(t, s, "user@example.org", hs)
					if act.Code != tt.code || (tt.smtp != 0 && act.SMTPCode != tt.smtp) {
						t.Fatalf("action %c %d %q, want %c %d", act.Code, act.SMTPCode, act.SMTPText, tt.code, tt.smtp)
					}
					if !strings.Contains(act.SMTPText, tt.text) {
						t.Errorf("SMTP text %q lacks %q", act.SMTPText, tt.text)
					}
					added, deleted, hold := map[string]string{}, []int{}, ""
					for _, m := range mods {
						switch m.Code {
						case gomilter.ActAddHeader:
							added[m.HeaderName] = m.HeaderValue
						case gomilter.ActChangeHeader:
							if m.HeaderValue != "" || !strings.EqualFold(m.HeaderName, "X-NDD-Verdict") {
								t.Errorf("unexpected change %+v", m)
							}
							deleted = append(deleted, int(m.HeaderIndex))
						case gomilter.ActQuarantine:
							hold = m.Reason
						}
					}
					for k, v := range tt.headers {
						if added[k] != v {
							t.Errorf("header %s = %q, want %q", k, added[k], v)
						}
					}
					if len(deleted) != tt.deleted || (tt.deleted == 2 && (deleted[0] != 2 || deleted[1] != 1)) {
						t.Errorf("deleted indexes %v, want %d, last first", deleted, tt.deleted)
					}
					if hold != tt.hold {
						t.Errorf("quarantine %q, want %q", hold, tt.hold)
					}
					if strings.Contains(c.last, "forged") || !strings.Contains(c.last, "Subject: "+tt.subject+"\r\n") {
						t.Errorf("checked message:\n%s", c.last)
					}
				}
			})
		}
	}
}

// TestSessionSlotsReleased opens more connections, one after another,
// than milter.Options.MaxSessions allows at once: each closed connection
// gives its slot back, so every message is still checked.
func TestSessionSlotsReleased(t *testing.T) {
	addr := serve(t, &subjectChecker{}, milter.Options{MaxSessions: 2}, Options{})
	for i := range 5 {
		c := gomilter.NewClientWithOptions("tcp", addr, gomilter.ClientOptions{
			Dialer: mtadial.Dialer{}, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
			ActionMask:   gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
			ProtocolMask: mtadial.PostfixProtocol,
		})
		s, err := c.Session()
		if err != nil {
			t.Fatal(err)
		}
		mods, _ := send(t, s, "user@example.org", [][2]string{{"Subject", "hello"}})
		s.Close()
		got := ""
		for _, m := range mods {
			if m.Code == gomilter.ActAddHeader && m.HeaderName == "X-NDD-Verdict" {
				got = m.HeaderValue
			}
		}
		if !strings.HasPrefix(got, "accept; score=") {
			t.Fatalf("connection %d: X-NDD-Verdict %q, want a checked accept", i, got)
		}
		// The server side closes asynchronously: wait for the slot.
		time.Sleep(100 * time.Millisecond)
	}
}
