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
	htmlcharset "golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
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
	e, err := gomessage.Read(bytes.NewReader(raw))
	if err != nil && !gomessage.IsUnknownCharset(err) && !gomessage.IsUnknownEncoding(err) {
		return fallbackMessage(raw)
	}
	h := mail.Header{Header: e.Header}
	if s, err := h.Subject(); err == nil {
		m.subject = cleanLine(s)
	} else {
		m.subject = cleanLine(h.Get("Subject"))
	}
	if addrs, err := h.AddressList("From"); err == nil && len(addrs) > 0 {
		m.from = addrs[0].String()
	}
	parts := maxParts
	t := entityText(e, 0, &parts)
	m.paras, m.html = t.paras, t.html
	return m
}

// partText is the text of one entity.
type partText struct {
	paras [][]string
	html  bool // the text came from HTML only
	multi bool // the entity was a multipart
}

func (t partText) empty() bool { return len(t.paras) == 0 }

// entityText reads the visible text of an entity the way internal/mime
// does, so that a copy carries the words the original's signatures were
// computed from: every inline text part of a multipart/mixed or related,
// and of a multipart/alternative only what a mail client shows (the HTML
// alternative, else the last one with text).
func entityText(e *gomessage.Entity, depth int, budget *int) partText {
	ct := mediaType(e.Header.Get("Content-Type"))
	if mr := e.MultipartReader(); mr != nil {
		out := partText{multi: true}
		if depth >= 16 {
			return out
		}
		var kids []partText
		for *budget > 0 {
			p, err := mr.NextPart()
			if err == io.EOF || p == nil {
				break
			}
			if err != nil && !gomessage.IsUnknownCharset(err) && !gomessage.IsUnknownEncoding(err) {
				break
			}
			*budget--
			kids = append(kids, entityText(p, depth+1, budget))
		}
		if ct == "multipart/alternative" {
			var pick *partText
			for i := range kids {
				if kids[i].html && !kids[i].empty() {
					pick = &kids[i]
					break
				}
			}
			for i := len(kids) - 1; pick == nil && i >= 0; i-- {
				if !kids[i].empty() {
					pick = &kids[i]
				}
			}
			if pick != nil {
				out.paras, out.html = pick.paras, pick.html
			}
			return out
		}
		out.html = true
		for _, k := range kids {
			out.paras = append(out.paras, k.paras...)
			out.html = out.html && (k.html || k.empty())
		}
		out.html = out.html && !out.empty()
		return out
	}
	if disp := mediaType(e.Header.Get("Content-Disposition")); disp == "attachment" {
		return partText{}
	}
	if ct == "" {
		ct = "text/plain"
	}
	if ct != "text/plain" && ct != "text/html" {
		return partText{}
	}
	b, _ := io.ReadAll(io.LimitReader(e.Body, maxPartBytes))
	s := decodeText(b, ct)
	if ct == "text/html" {
		return partText{paras: htmlParagraphs(s), html: true}
	}
	return partText{paras: splitParagraphs(s)}
}

// mediaType returns the lower-cased value of a header before any
// parameter, tolerating malformed parameter lists.
func mediaType(v string) string {
	t, _, _ := strings.Cut(strings.ToLower(v), ";")
	return strings.TrimSpace(t)
}

// decodeText turns a part's body into UTF-8. go-message has already
// decoded declared charsets it knows; bytes that are still not UTF-8 had no
// (or an unknown) charset: HTML is sniffed for a <meta> charset, and
// everything else is read as Windows-1252, as mail clients (and
// internal/mime) do.
func decodeText(b []byte, ct string) string {
	if utf8.Valid(b) {
		return string(b)
	}
	enc := encoding.Encoding(charmap.Windows1252)
	if ct == "text/html" {
		enc, _, _ = htmlcharset.DetermineEncoding(b, "text/html")
	}
	if out, err := enc.NewDecoder().Bytes(b); err == nil {
		return strings.ToValidUTF8(string(out), "\uFFFD")
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
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
	m.paras = splitParagraphs(decodeText(body, "text/plain"))
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

// inlineTags are the elements that do not separate words when rendered.
var inlineTags = map[string]bool{
	"a": true, "b": true, "i": true, "u": true, "em": true, "strong": true, "span": true, "font": true,
	"small": true, "big": true, "sub": true, "sup": true, "s": true, "strike": true, "abbr": true,
	"code": true, "tt": true, "mark": true, "q": true, "cite": true, "dfn": true, "kbd": true,
	"samp": true, "var": true, "bdi": true, "bdo": true, "ins": true, "del": true, "label": true, "wbr": true,
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
			case "p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "blockquote", "hr", "ul", "ol", "pre", "dd", "dt", "form", "center", "body":
				flush()
			default:
				// other non-inline elements (cells, options, images...)
				// separate words; inline markup does not
				if !inlineTags[tag] {
					cur.WriteByte(' ')
				}
			}
		}
	}
	flush()
	return paras
}
