package campaign

import (
	"errors"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/store"
)

// forwarded is a report message forwarding msgs as attachments.
func forwarded(msgs ...[]byte) []byte {
	var b strings.Builder
	b.WriteString("From: alice@example.org\r\nTo: spam-report@example.org\r\nSubject: Fwd: spam\r\n")
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"R\"\r\n\r\n--R\r\nContent-Type: text/plain\r\n\r\nspam\r\n")
	for _, m := range msgs {
		b.WriteString("--R\r\nContent-Type: message/rfc822\r\n\r\n")
		b.Write(m)
		b.WriteString("\r\n")
	}
	b.WriteString("--R--\r\n")
	return []byte(b.String())
}

func TestReportAttached(t *testing.T) {
	f := newFixture(t, Options{})
	raw := forwarded(copyOf(t, 0, 1), copyOf(t, 1, 1), copyOf(t, 0, 2))
	mr, err := f.eng.Ingester.ReportAttached(f.ctx, raw, store.KindSpam, "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(mr.Outcomes) != 3 || !mr.Outcomes[0].Created || !mr.Outcomes[1].Created || mr.Outcomes[2].Campaign != mr.Outcomes[0].Campaign {
		t.Fatalf("outcomes %+v", mr.Outcomes)
	}
	if !mr.Outcomes[2].Repeated {
		t.Errorf("alice's second copy of campaign %d counted again: %+v", mr.Outcomes[0].Campaign, mr.Outcomes[2])
	}
	if v := f.check(t, copyOf(t, 1, 7)); v.Campaign != mr.Outcomes[1].Campaign {
		t.Errorf("a copy of the second attachment: campaign %d, want %d", v.Campaign, mr.Outcomes[1].Campaign)
	}

	mr, err = f.eng.Ingester.ReportAttached(f.ctx, forwarded(copyOf(t, 0, 3), copyOf(t, 1, 3)), store.KindSpam, "bob", 1)
	if err != nil || len(mr.Outcomes) != 1 || mr.Dropped != 1 {
		t.Fatalf("max 1: %+v, %v", mr, err)
	}

	_, err = f.eng.Ingester.ReportAttached(f.ctx, copyOf(t, 0, 4), store.KindSpam, "carol", 0)
	if !errors.Is(err, ErrNoAttached) {
		t.Fatalf("inline message: %v, want ErrNoAttached", err)
	}
}

func TestCheckReporter(t *testing.T) {
	for _, tt := range []struct {
		id string
		ok bool
	}{
		{"", true}, {"alice", true}, {"alice@example.org", true}, {"fbl:isp", true}, {"Zoë", true},
		{strings.Repeat("x", MaxReporterLen), true}, {strings.Repeat("x", MaxReporterLen+1), false},
		{"a\nb", false}, {"a\x00b", false}, {"\xff", false}, {"a\u0085b", false},
	} {
		if err := CheckReporter(tt.id); (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrBadReporter)) {
			t.Errorf("CheckReporter(%q) = %v, want ok %v", tt.id, err, tt.ok)
		}
	}
}
