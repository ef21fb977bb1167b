package spamgen

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	gomessage "github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decode non-UTF-8 charsets
	"github.com/emersion/go-message/mail"
	"golang.org/x/net/html"
)

// Limits on the work done while reading a base message.
const (
	maxPartBytes = 4 << 20
	maxParts     = 64
)

// message is the editable model of a message: a subject and paragraphs of
// words. Words may contain the trick markers (see tricks.go).
type message struct {
	subject string
	paras   [][]string
	html    bool
	from    string
}

func (m *message) empty() bool {
	if strings.TrimSpace(m.subject) != "" {
		return false
	}
	for _, p := range m.paras {
		if len(p) > 0 {
			return false
		}
	}
	return true
}

// wordCount is the number of body words.
func (m *message) wordCount() int {
	n := 0
	for _, p := range m.paras {
		n += len(p)
	}
	return n
}

// parseMessage recovers subject, sender and body text from raw. It never
// fails: unreadable parts are skipped, an unparsable header makes the whole
// input the body.
func parseMessage(raw []byte) (m *message) {
	m = &message{}
	defer func() {
		// go-message is robust, but a panic on hostile input must not
		// escape: fall back to the raw text.
		if r := recover(); r != nil {
			m = fallbackMessage(raw)
		}
	}()
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil && !gomessage.IsUnknownCharset(err) {
		return fallbackMessage(raw)
	}
	if s, err := mr.Header.Subject(); err == nil {
		m.subject = cleanLine(s)
	} else {
		m.subject = cleanLine(mr.Header.Get("Subject"))
	}
	if addrs, err := mr.Header.AddressList("From"); err == nil && len(addrs) > 0 {
		m.from = addrs[0].String()
	}
	// Like internal/mime, every inline text part counts, text/plain and the
	// visible text of text/html, in order: multipart/alternative spam often
	// says different things in its two parts.
	sawPlain := false
	for i := 0; i < maxParts; i++ {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil && !gomessage.IsUnknownCharset(err) && !gomessage.IsUnknownEncoding(err) {
			break
		}
		if p == nil {
			break
		}
		// Lenient: a malformed parameter list must not hide the type.
		ct, _, _ := strings.Cut(strings.ToLower(p.Header.Get("Content-Type")), ";")
		ct = strings.TrimSpace(ct)
		if ct == "" {
			ct = "text/plain"
		}
		if ct != "text/plain" && ct != "text/html" {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(p.Body, maxPartBytes))
		s := strings.ToValidUTF8(string(b), "\uFFFD")
		if ct == "text/html" {
			m.paras = append(m.paras, htmlParagraphs(s)...)
		} else {
			sawPlain = true
			m.paras = append(m.paras, splitParagraphs(s)...)
		}
	}
	m.html = !sawPlain && len(m.paras) > 0
	return m
}

// fallbackMessage treats raw as a header block (if one is recognizable)
// followed by text.
func fallbackMessage(raw []byte) *message {
	m := &message{}
	body := raw
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
		m.subject = findSubject(raw[:i])
		body = raw[i+4:]
	} else if i := bytes.Index(raw, []byte("\n\n")); i >= 0 {
		m.subject = findSubject(raw[:i])
		body = raw[i+2:]
	}
	if len(body) > maxPartBytes {
		body = body[:maxPartBytes]
	}
	m.paras = splitParagraphs(strings.ToValidUTF8(string(body), "\uFFFD"))
	return m
}

func findSubject(hdr []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(hdr))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if len(line) > 8 && strings.EqualFold(line[:8], "subject:") {
			return cleanLine(strings.ToValidUTF8(line[8:], "\uFFFD"))
		}
	}
	return ""
}

// cleanLine collapses whitespace and drops control characters.
func cleanLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || r == markTag || r == markComment {
			return -1
		}
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// splitParagraphs splits text at blank lines into paragraphs of words.
func splitParagraphs(text string) [][]string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	var paras [][]string
	for _, block := range strings.Split(text, "\n\n") {
		words := strings.Fields(cleanLine(strings.ReplaceAll(block, "\n", " ")))
		if len(words) > 0 {
			paras = append(paras, words)
		}
	}
	return paras
}

// htmlParagraphs extracts the visible text of an HTML document, one
// paragraph per block element. Link targets are kept in angle brackets
// after the link text so that rendering as HTML can restore the link.
func htmlParagraphs(src string) [][]string {
	z := html.NewTokenizer(strings.NewReader(src))
	var paras [][]string
	var cur strings.Builder
	skip := 0
	flush := func() {
		if w := strings.Fields(cleanLine(cur.String())); len(w) > 0 {
			paras = append(paras, w)
		}
		cur.Reset()
	}
	var href []string // stack of open <a> targets
	for steps := 0; steps < 1_000_000; steps++ {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			flush()
			return paras
		case html.TextToken:
			if skip == 0 {
				// inline markup does not separate words: no space added
				cur.Write(z.Text())
			}
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			switch tag {
			case "script", "style", "title": // raw text elements: always closed by the tokenizer
				if tt == html.StartTagToken {
					skip++
				} else if tt == html.EndTagToken && skip > 0 {
					skip--
				}
			case "a":
				if tt == html.StartTagToken {
					target := ""
					for hasAttr {
						var k, v []byte
						k, v, hasAttr = z.TagAttr()
						if string(k) == "href" {
							target = string(v)
						}
					}
					href = append(href, target)
				} else if tt == html.EndTagToken && len(href) > 0 {
					t := href[len(href)-1]
					href = href[:len(href)-1]
					if (strings.HasPrefix(t, "http://") || strings.HasPrefix(t, "https://")) &&
						!strings.HasSuffix(strings.TrimSpace(cur.String()), t) {
						cur.WriteString(" <" + t + "> ")
					}
				}
			case "p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "blockquote", "hr", "ul", "ol", "pre":
				flush()
			}
		}
	}
	flush()
	return paras
}
