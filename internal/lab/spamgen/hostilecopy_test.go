package spamgen

import (
	"bytes"
	"encoding/base64"
	"net/mail"
	"slices"
	"strings"
	"testing"
)

func TestHostileCopy(t *testing.T) {
	const subject, text = "Cheap watches today", "Genuine replica watches at a fraction of the price.\n\nOrder now & save."
	for _, h := range HostileKinds() {
		raw := HostileCopy(h, 32<<10, subject, text)
		if !bytes.Equal(raw, HostileCopy(h, 32<<10, subject, text)) {
			t.Errorf("%s: not deterministic", h)
		}
		if len(raw) < 31<<10 {
			t.Errorf("%s: %d bytes for 32 KiB of hostile content", h, len(raw))
		}
		m, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", h, err)
		}
		if s := m.Header.Get("Subject"); !strings.HasPrefix(s, subject) {
			t.Errorf("%s: subject %.40q does not start with the campaign's", h, s)
		}
		body := new(bytes.Buffer)
		body.ReadFrom(m.Body)
		b := body.String()
		if strings.EqualFold(m.Header.Get("Content-Transfer-Encoding"), "base64") {
			line, _, _ := strings.Cut(b, "\r\n!!")
			dec, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(line, "\r\n", ""))
			if err != nil {
				t.Fatalf("%s: %v", h, err)
			}
			b = string(dec)
		}
		want := "Genuine replica watches"
		if i := strings.Index(b, want); i < 0 || i > 200 {
			t.Errorf("%s: the campaign's text is not at the start of the body (at %d)", h, i)
		}
		if HostileHeader(h) != (len(m.Header.Get("Subject"))+len(m.Header) > 1000) {
			t.Errorf("%s: HostileHeader %v, subject of %d bytes, %d fields", h, HostileHeader(h), len(m.Header.Get("Subject")), len(m.Header))
		}
	}
}

func TestHeaderFields(t *testing.T) {
	for _, c := range []struct {
		head string
		want []string
	}{
		{"", nil},
		{"A: 1", []string{"A: 1"}},
		{"A: 1\r\nB: 2", []string{"A: 1", "B: 2"}},
		{"A: 1\r\n 2\r\n\t3\r\nB: 4\r\n", []string{"A: 1\r\n 2\r\n\t3", "B: 4"}},
	} {
		if got := HeaderFields(c.head); !slices.Equal(got, c.want) {
			t.Errorf("HeaderFields(%q) = %q, want %q", c.head, got, c.want)
		}
	}
}
