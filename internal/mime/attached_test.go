package mime

import (
	"encoding/base64"
	"os"
	"strconv"
	"strings"
	"testing"
)

// reportMail builds a report message carrying the given parts (each a
// full MIME part: its header, an empty line, its body).
func reportMail(parts ...string) string {
	var b strings.Builder
	b.WriteString("From: alice@example.org\r\nTo: spam-report@example.org\r\nSubject: spam\r\nMIME-Version: 1.0\r\n")
	b.WriteString("Content-Type: multipart/mixed; boundary=\"BB\"\r\n\r\n")
	for _, p := range parts {
		b.WriteString("--BB\r\n" + p + "\r\n")
	}
	b.WriteString("--BB--\r\n")
	return b.String()
}

const spamOne = "From: a@spam.example\r\nSubject: cheap pills\r\n\r\nBuy cheap pills now.\r\n"
const spamTwo = "From: b@spam.example\r\nSubject: lottery\r\n\r\nYou won the lottery.\r\n"

func TestAttachedMessages(t *testing.T) {
	arf, err := os.ReadFile("testdata/arf.eml")
	if err != nil {
		t.Fatal(err)
	}
	deep := spamOne
	for i := range 40 {
		b := "b" + strconv.Itoa(i)
		deep = "Content-Type: multipart/mixed; boundary=\"" + b + "\"\r\n\r\n--" + b + "\r\n" + deep + "\r\n--" + b + "--\r\n"
	}
	many := make([]string, 25)
	for i := range many {
		many[i] = "Content-Type: message/rfc822\r\n\r\n" + spamOne
	}
	tests := []struct {
		name      string
		raw       string
		opts      AttachedOptions
		want      []string // substrings, one per message
		dropped   int
		arf       bool
		truncated bool
	}{
		{name: "forward as attachment", raw: reportMail(
			"Content-Type: text/plain\r\n\r\nplease look at these",
			"Content-Type: message/rfc822\r\nContent-Disposition: attachment; filename=\"a.eml\"\r\n\r\n"+spamOne,
			"Content-Type: message/rfc822\r\nContent-Transfer-Encoding: base64\r\n\r\n"+base64.StdEncoding.EncodeToString([]byte(spamTwo)),
		), want: []string{"cheap pills", "You won the lottery"}},
		{name: "nested in a multipart", raw: reportMail(
			"Content-Type: multipart/mixed; boundary=\"in\"\r\n\r\n--in\r\nContent-Type: message/rfc822\r\n\r\n" + spamTwo + "\r\n--in--",
		), want: []string{"lottery"}},
		{name: "ARF report", raw: string(arf), want: []string{"pharma-deals"}, arf: true},
		{name: "ARF attached", raw: reportMail("Content-Type: multipart/report; report-type=feedback-report; boundary=\"part1_13d.2e68ed54_boundary\"\r\n\r\n" +
			string(arf[strings.Index(string(arf), "--part1"):])), want: []string{"multipart/report"}},
		{name: "no attachment", raw: "Subject: hi\r\n\r\nSee below:\r\n> From: a@spam.example\r\n"},
		{name: "the message itself is not attached", raw: "Content-Type: message/rfc822\r\n\r\n" + spamOne},
		{name: "too many", raw: reportMail(many...), want: make([]string, DefaultMaxAttached), dropped: 5},
		{name: "max messages", raw: reportMail(many[:3]...), opts: AttachedOptions{MaxMessages: 1}, want: []string{"pills"}, dropped: 2},
		{name: "too deep", raw: "Content-Type: message/rfc822\r\n\r\n" + deep, truncated: false},
		{name: "deep multipart", raw: deep, truncated: true},
		{name: "garbage", raw: "Content-Type: multipart/mixed; boundary=\r\n\r\n--\r\n--\r\n\x00\xff"},
		{name: "empty", raw: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AttachedMessages([]byte(tt.raw), tt.opts)
			if len(got.Messages) != len(tt.want) {
				t.Fatalf("%d messages, want %d: %q", len(got.Messages), len(tt.want), got.Messages)
			}
			for i, w := range tt.want {
				if !strings.Contains(string(got.Messages[i]), w) {
					t.Errorf("message %d %q lacks %q", i, got.Messages[i], w)
				}
			}
			if got.Dropped != tt.dropped || got.ARF != tt.arf || got.Truncated != tt.truncated {
				t.Errorf("dropped %d arf %v truncated %v, want %d %v %v", got.Dropped, got.ARF, got.Truncated, tt.dropped, tt.arf, tt.truncated)
			}
		})
	}
}

// An attached ARF report is unwrapped to its original by UnwrapARF.
func TestAttachedARFUnwraps(t *testing.T) {
	arf, err := os.ReadFile("testdata/arf.eml")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(arf), "--part1")
	raw := reportMail("Content-Type: multipart/report; report-type=feedback-report;\r\n\tboundary=\"part1_13d.2e68ed54_boundary\"\r\n\r\n" + string(arf[i:]))
	got := AttachedMessages([]byte(raw), AttachedOptions{})
	if len(got.Messages) != 1 {
		t.Fatalf("%d messages", len(got.Messages))
	}
	orig, ok := UnwrapARF(got.Messages[0])
	if !ok || !strings.Contains(string(orig), "pharma-deals") {
		t.Fatalf("not unwrapped: %v %q", ok, orig)
	}
}

func FuzzAttachedMessages(f *testing.F) {
	f.Add([]byte(reportMail("Content-Type: message/rfc822\r\n\r\n" + spamOne)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := AttachedMessages(raw, AttachedOptions{MaxMessages: 3})
		if len(got.Messages) > 3 {
			t.Fatalf("%d messages", len(got.Messages))
		}
	})
}
