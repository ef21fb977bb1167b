package spamgen

import (
	"bytes"
	"encoding/base64"
	"html"
	"strings"
)

// HostileHeader tells whether the hostile content of h is in the header
// (a Subject flood, many fields) rather than in the body.
func HostileHeader(h Hostile) bool {
	switch h {
	case EncodedWordFlood, MixedCharsetFlood, BrokenEncodedWords, HugeHeader:
		return true
	}
	return false
}

// HostileCopy makes a copy of the message whose subject is subject and
// whose plain text is text hostile, as an attacker would who wants its
// copies to go unchecked: the text comes first, intact, and the hostile
// content of NewHostile(h, size) follows it. For a header kind the
// hostile fields follow the subject's own words (a Subject flood is
// appended to the subject); for a body kind the body takes h's structure
// (its Content-Type and transfer encoding) with text as its first text.
// The result is deterministic.
func HostileCopy(h Hostile, size int, subject, text string) []byte {
	x := NewHostile(h, size)
	head, body, _ := bytes.Cut(x, []byte("\r\n\r\n"))
	text = strings.ReplaceAll(strings.TrimSpace(text), "\r\n", "\n") + "\n\n"
	var b bytes.Buffer
	b.Grow(len(x) + len(text) + 512)
	b.WriteString("From: Campaign Sender <sender@campaign.example>\r\n")
	b.WriteString("To: user@example.org\r\n")
	b.WriteString("Message-ID: <" + string(h) + "-copy@campaign.example>\r\n")
	b.WriteString("MIME-Version: 1.0\r\n")
	subj := "Subject: " + cleanLine(subject)
	ctype := "Content-Type: text/plain; charset=utf-8\r\n"
	for _, f := range HeaderFields(string(head)) {
		name, value, _ := strings.Cut(f, ":")
		switch strings.ToLower(name) {
		case "from", "to", "message-id", "mime-version":
		case "subject":
			if HostileHeader(h) {
				subj += value
			}
		case "content-type":
			if !HostileHeader(h) {
				ctype = f + "\r\n"
			}
		default:
			b.WriteString(f + "\r\n")
		}
	}
	b.WriteString(subj + "\r\n")
	b.WriteString(ctype)
	b.WriteString("\r\n")
	switch {
	case HostileHeader(h):
		b.WriteString(text)
	case bytes.Contains(body, []byte(hostileText)):
		t := text
		if strings.Contains(strings.ToLower(ctype), "text/html") {
			t = html.EscapeString(text)
		}
		b.Write(bytes.Replace(body, []byte(hostileText), []byte(t), 1))
	default: // an encoded body (base64): the text encoded first
		enc := base64.StdEncoding.EncodeToString([]byte(text))
		for len(enc) > 0 {
			n := min(len(enc), 76)
			b.WriteString(enc[:n] + "\r\n")
			enc = enc[n:]
		}
		b.Write(body)
	}
	return b.Bytes()
}

// HeaderFields splits a header block (CRLF line ends, no blank line)
// into its fields, each with its folded lines, in linear time.
func HeaderFields(head string) []string {
	var fs []string
	start := 0
	for i := 0; i < len(head); {
		j := strings.Index(head[i:], "\r\n")
		if j < 0 {
			j = len(head)
		} else {
			j += i
		}
		if next := j + 2; next >= len(head) || (head[next] != ' ' && head[next] != '\t') {
			fs = append(fs, head[start:j])
			start, i = next, next
			if next >= len(head) {
				break
			}
			continue
		}
		i = j + 2
	}
	return fs
}
