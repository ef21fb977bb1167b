package campaign

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/nddmilter/nddmilter/internal/store"
)

// The same user reporting the same message again — the IMAP COPY and then
// the FLAG of one move, or a client's APPEND of it with headers of its
// own — counts once; moving it out of Junk withdraws the spam vote.
func TestEngineSameMessageOnce(t *testing.T) {
	f := newFixture(t, Options{})
	raw := copyOf(t, 1, 1)
	appended := append([]byte("X-Uniform-Type-Identifier: com.apple.mail-draft\r\nX-Mozilla-Status: 0001\r\n"), raw...)
	first := f.report(t, raw, store.KindSpam, "alice")
	steps := []struct {
		name      string
		raw       []byte
		kind      store.Kind
		reporter  string
		duplicate bool
		withdrawn bool
		spam, ham int64 // reporters after the step
	}{
		{"flag after copy", raw, store.KindSpam, "alice", true, false, 1, 0},
		{"append by a mail client", appended, store.KindSpam, "alice", true, false, 1, 0},
		{"another user", raw, store.KindSpam, "bob", false, false, 2, 0},
		{"out of Junk", raw, store.KindHam, "alice", false, true, 1, 1},
		{"out of Junk again", raw, store.KindHam, "alice", true, false, 1, 1},
	}
	for _, s := range steps {
		o := f.report(t, s.raw, s.kind, s.reporter)
		if o.Duplicate != s.duplicate || o.Withdrawn != s.withdrawn || o.Campaign != first.Campaign {
			t.Fatalf("%s: %+v", s.name, o)
		}
		c, err := f.st.Get(f.ctx, first.Campaign)
		if err != nil {
			t.Fatal(err)
		}
		if c.SpamReporters != s.spam || c.HamReporters != s.ham {
			t.Fatalf("%s: %d spam and %d not-spam reporters, want %d and %d", s.name, c.SpamReporters, c.HamReporters, s.spam, s.ham)
		}
	}
}

func TestReportDigestStable(t *testing.T) {
	f := newFixture(t, Options{})
	a, err := f.eng.Checker.pipe.SignReport(f.ctx, copyOf(t, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.eng.Checker.pipe.SignReport(f.ctx, append([]byte("Received: from x\r\n"), copyOf(t, 1, 1)...))
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.eng.Checker.pipe.SignReport(f.ctx, baseMessage(2))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(reportDigest(a), reportDigest(b)) {
		t.Error("an added header changed the digest")
	}
	if bytes.Equal(reportDigest(a), reportDigest(c)) {
		t.Error("two campaigns share a digest")
	}
}

// withMessageID gives a test message a Message-ID of its own, as every
// delivered message has.
func withMessageID(raw []byte, n int) []byte {
	return append([]byte(fmt.Sprintf("Message-ID: <%d@test.example>\r\n", n)), raw...)
}
