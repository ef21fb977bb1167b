package milter

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/lab/flood"
)

// Hostile sessions that hold large, unfinished messages stay within the
// byte budget, and ordinary messages are still checked meanwhile.
func TestBufferBudgetUnderFlood(t *testing.T) {
	const budget = 4 << 20
	h := start(t, &scriptChecker{}, Options{MaxBufferedBytes: budget})
	o := flood.Options{
		Network: "tcp", Addr: h.addr,
		Sessions:    24,
		HeaderBytes: 256 << 10, BodyBytes: 512 << 10, PacketBytes: 400 << 10,
		Checks: 40, Concurrency: 2, Timeout: 30 * time.Second,
	}
	res, err := flood.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Hostile != o.Sessions {
		t.Errorf("%d of %d hostile sessions got their load in", res.Hostile, o.Sessions)
	}
	for _, l := range []flood.Latency{res.Before, res.During} {
		if l.N != o.Checks || l.Failed > 0 || l.Actions["accept"] != o.Checks {
			t.Errorf("ordinary messages: %d of %d, %d failed, actions %v; want all checked and accepted", l.N, o.Checks, l.Failed, l.Actions)
		}
	}
	text := scrape(t, h.met)
	if strings.Contains(text, `nddmilter_overload_total{reason="bytes"} 0`) {
		t.Error("the flood never exhausted the byte budget")
	}
	// Every session's allowance: its packet buffer and message buffer.
	ceiling := int64(budget + 2*smallPacket)
	if b := h.srv.Buffered(); b > ceiling || b < 0 {
		t.Errorf("buffered %d bytes, budget %d", b, budget)
	}
}

// A message that does not fit the budget is checked from the part
// buffered (on_overload: check) or tempfailed (on_overload: tempfail),
// never accepted unchecked, whatever on_error says; once the budget is free
// again, large messages are checked whole.
func TestBufferBudgetOnOverload(t *testing.T) {
	for _, tt := range []struct{ onOverload, onError string }{
		{"", "accept"}, {"check", "tempfail"}, {"tempfail", "accept"},
	} {
		t.Run(tt.onOverload+"/"+tt.onError, func(t *testing.T) {
			sc := &scriptChecker{}
			h := start(t, sc, Options{MaxBufferedBytes: 256 << 10, OnError: tt.onError, OnOverload: tt.onOverload})
			big := simple("reject")
			big.body = strings.Repeat("a line of body text that goes on\r\n", 16<<10) // 560 KiB
			_, act := send(t, h.session(), big)
			if tt.onOverload == "tempfail" {
				if act.Code != gomilter.ActTempFail {
					t.Fatalf("over budget: action %c, want tempfail", act.Code)
				}
			} else {
				if act.Code != gomilter.ActReplyCode {
					t.Fatalf("over budget: action %c, want the verdict on the part buffered (reject)", act.Code)
				}
				if n := sc.lastLen(); n <= 0 || n >= len(big.body) {
					t.Errorf("checked %d bytes of a %d-byte body, want the head only", n, len(big.body))
				}
			}
			if !strings.Contains(scrape(t, h.met), `nddmilter_overload_total{reason="bytes"} 1`) {
				t.Error("overload not counted")
			}
			// A message within the budget is checked.
			big.body = strings.Repeat("a line of body text that goes on\r\n", 4<<10) // 140 KiB
			if _, act := send(t, h.session(), big); act.Code != gomilter.ActReplyCode {
				t.Fatalf("within budget: action %c, want the reject reply", act.Code)
			}
			waitBuffered(t, h.srv, 0)
		})
	}
}

func waitBuffered(t *testing.T, s *Server, want int64) {
	t.Helper()
	for i := 0; i < 100 && s.Buffered() != want; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if b := s.Buffered(); b != want {
		t.Fatalf("buffered %d bytes, want %d", b, want)
	}
}

// Beyond MaxSessions connections pass messages unbuffered per on_error;
// beyond twice as many a new connection is closed at once. A connection
// gets a buffering slot as soon as one is free.
func TestMaxSessions(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{MaxSessions: 2})
	s1, s2 := h.session(), h.session()
	for _, s := range []*gomilter.ClientSession{s1, s2} {
		if _, act := send(t, s, simple("reject")); act.Code != gomilter.ActReplyCode {
			t.Fatalf("within max_sessions: action %c", act.Code)
		}
	}
	s3, s4 := h.session(), h.session()
	for _, s := range []*gomilter.ClientSession{s3, s4} {
		mods, act := send(t, s, simple("reject"))
		if act.Code != gomilter.ActAccept || headersOf(mods)["X-NDD-Verdict"] != "unchecked; error=overload-sessions" {
			t.Fatalf("beyond max_sessions: action %c, headers %v", act.Code, headersOf(mods))
		}
	}
	// The fifth connection is closed before negotiation.
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("connection beyond twice max_sessions: read %d bytes, want it closed", n)
	}
	c.Close()
	text := scrape(t, h.met)
	for _, want := range []string{`nddmilter_overload_total{reason="sessions"} 2`, `nddmilter_overload_total{reason="connections"} 1`} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// s1 leaves: s3's next message is checked.
	s1.Close()
	for i := 0; i < 100 && h.srv.Sessions() > 3; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if _, act := send(t, s3, simple("reject")); act.Code != gomilter.ActReplyCode {
		t.Fatalf("after a slot freed: action %c, want the reject reply", act.Code)
	}
}

// lastLen is the body length of the last message the checker saw.
func (c *scriptChecker) lastLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) == 0 {
		return -1
	}
	raw := c.seen[len(c.seen)-1]
	if i := strings.Index(string(raw), "\r\n\r\n"); i >= 0 {
		return len(raw) - i - 4
	}
	return -1
}
