package spamgen

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"html"
	"math/rand/v2"
	"mime"
	"mime/quotedprintable"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// baseTime is the earliest Date of generated messages.
var baseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// renderBase renders m with random choices seeded by its content.
func renderBase(m *message) []byte {
	h := fnv.New64a()
	h.Write([]byte(m.subject))
	for _, p := range m.paras {
		for _, w := range p {
			h.Write([]byte(w))
			h.Write([]byte{' '})
		}
		h.Write([]byte{'\n'})
	}
	s := h.Sum64()
	g := &gen{rng: rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15)), m: m}
	return g.render()
}

var firstNames = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "yolanda"}

// render writes the message: headers, then a single text/plain or text/html
// part in the chosen charset and transfer encoding.
func (g *gen) render() []byte {
	m := g.m
	body := g.bodyText()

	charset, cte := "utf-8", "7bit"
	data := []byte(body)
	if !isASCII(body) {
		cte = "8bit"
	}
	subject := m.subject
	var encSubject string
	if g.reencode {
		choices := []string{"utf-8", "utf-16le"}
		if latin1OK(body) {
			choices = append(choices, "iso-8859-1", "iso-8859-1")
		}
		charset = choices[g.rng.IntN(len(choices))]
		switch charset {
		case "iso-8859-1":
			data = toLatin1(body)
		case "utf-16le":
			data = toUTF16LE(body)
		}
		if charset == "utf-16le" || g.rng.IntN(2) == 0 {
			cte = "base64"
		} else {
			cte = "quoted-printable"
		}
		b := g.rng.IntN(2) == 0
		if latin1OK(subject) && g.rng.IntN(2) == 0 {
			encSubject = encodeWords("iso-8859-1", toLatin1(subject), b)
		} else {
			encSubject = encodeWords("utf-8", []byte(subject), b)
		}
	} else if longestLine(body) > 900 {
		cte = "quoted-printable"
	}
	if encSubject == "" {
		if isASCII(subject) {
			encSubject = subject
		} else {
			encSubject = mime.QEncoding.Encode("utf-8", subject)
		}
	}

	from := m.from
	if from == "" {
		from = fmt.Sprintf("%s <%s@mailer%d.example>", strings.ToUpper(firstNames[g.rng.IntN(len(firstNames))][:1])+firstNames[g.rng.IntN(len(firstNames))][1:], firstNames[g.rng.IntN(len(firstNames))], g.rng.IntN(100))
	}
	to := fmt.Sprintf("%s.%s%d@example.org", firstNames[g.rng.IntN(len(firstNames))], firstNames[g.rng.IntN(len(firstNames))], g.rng.IntN(1000))
	date := baseTime.Add(time.Duration(g.rng.Int64N(int64(90 * 24 * time.Hour))))
	msgid := fmt.Sprintf("<%016x.%08x@spamgen.example>", g.rng.Uint64(), g.rng.Uint32())
	ctype := "text/plain"
	if m.html {
		ctype = "text/html"
	}

	var b bytes.Buffer
	writeHeader(&b, "From", sanitizeHeader(from))
	writeHeader(&b, "To", to)
	writeHeader(&b, "Subject", encSubject)
	writeHeader(&b, "Date", date.Format(time.RFC1123Z))
	writeHeader(&b, "Message-ID", msgid)
	writeHeader(&b, "MIME-Version", "1.0")
	writeHeader(&b, "Content-Type", fmt.Sprintf("%s; charset=%s", ctype, charset))
	writeHeader(&b, "Content-Transfer-Encoding", cte)
	b.WriteString("\r\n")
	switch cte {
	case "base64":
		enc := base64.StdEncoding.EncodeToString(data)
		for len(enc) > 76 {
			b.WriteString(enc[:76])
			b.WriteString("\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc)
		b.WriteString("\r\n")
	case "quoted-printable":
		w := quotedprintable.NewWriter(&b)
		w.Write(data)
		w.Close()
		b.WriteString("\r\n")
	default:
		b.WriteString(strings.ReplaceAll(string(data), "\n", "\r\n"))
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// bodyText renders the paragraphs as wrapped plain text or as HTML.
func (g *gen) bodyText() string {
	var b strings.Builder
	if g.m.html {
		b.WriteString("<html><body>\n")
		for _, p := range g.m.paras {
			words := make([]string, len(p))
			for i, w := range p {
				words[i] = g.htmlWord(w)
			}
			b.WriteString("<p>")
			b.WriteString(wrap(words))
			b.WriteString("</p>\n")
		}
		b.WriteString("</body></html>\n")
		return b.String()
	}
	for i, p := range g.m.paras {
		if i > 0 {
			b.WriteString("\n")
		}
		words := make([]string, len(p))
		for i, w := range p {
			words[i] = stripMarks(w)
		}
		b.WriteString(wrap(words))
		b.WriteString("\n")
	}
	return b.String()
}

var emptyTags = []string{"<b></b>", "<i></i>", "<span></span>", "<font></font>", "<u></u>", "<span style=\"font-size:0\"></span>"}

// htmlWord escapes a word, links URLs and expands trick markers.
func (g *gen) htmlWord(w string) string {
	if u, ok := linkTarget(stripMarks(w)); ok {
		e := html.EscapeString(u)
		return `<a href="` + e + `">` + e + `</a>`
	}
	var b strings.Builder
	for _, r := range w {
		switch r {
		case markTag:
			b.WriteString(emptyTags[g.rng.IntN(len(emptyTags))])
		case markComment:
			b.WriteString("<!-- " + g.randomString() + " -->")
		default:
			b.WriteString(html.EscapeString(string(r)))
		}
	}
	return b.String()
}

// linkTarget recognizes a URL word, bare or in angle brackets.
func linkTarget(w string) (string, bool) {
	u := strings.TrimSuffix(strings.TrimPrefix(w, "<"), ">")
	if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
		return u, true
	}
	return "", false
}

func stripMarks(w string) string {
	if !strings.ContainsAny(w, string([]rune{markTag, markComment})) {
		return w
	}
	return strings.Map(func(r rune) rune {
		if r == markTag || r == markComment {
			return -1
		}
		return r
	}, w)
}

// wrap joins words into lines of at most about 72 bytes.
func wrap(words []string) string {
	var b strings.Builder
	col := 0
	for i, w := range words {
		if i > 0 {
			if col+1+len(w) > 72 {
				b.WriteString("\n")
				col = 0
			} else {
				b.WriteString(" ")
				col++
			}
		}
		b.WriteString(w)
		col += len(w)
	}
	return b.String()
}

func longestLine(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		n = max(n, len(l))
	}
	return n
}

func latin1OK(s string) bool {
	for _, r := range s {
		if r > 0xFF {
			return false
		}
	}
	return true
}

func toLatin1(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xFF {
			r = '?'
		}
		out = append(out, byte(r))
	}
	return out
}

func toUTF16LE(s string) []byte {
	u := utf16.Encode([]rune(s))
	out := make([]byte, 0, 2*len(u))
	for _, c := range u {
		out = append(out, byte(c), byte(c>>8))
	}
	return out
}

// encodeWords encodes s (already in charset) as RFC 2047 encoded words,
// B or Q, even when it is plain ASCII (as spammers do to defeat filters).
// Words are at most 75 bytes and never split a UTF-8 sequence.
func encodeWords(charset string, s []byte, b bool) string {
	var out []string
	prefix := "=?" + charset + "?Q?"
	if b {
		prefix = "=?" + charset + "?B?"
	}
	for len(s) > 0 {
		n := 0
		for n < len(s) {
			step := 1
			if charset == "utf-8" {
				_, step = utf8.DecodeRune(s[n:])
			}
			var l int
			if b {
				l = base64.StdEncoding.EncodedLen(n + step)
			} else {
				l = qLen(s[:n+step])
			}
			if len(prefix)+l+2 > 75 && n > 0 {
				break
			}
			n += step
		}
		chunk := s[:n]
		s = s[n:]
		if b {
			out = append(out, prefix+base64.StdEncoding.EncodeToString(chunk)+"?=")
		} else {
			out = append(out, prefix+qEncode(chunk)+"?=")
		}
	}
	return strings.Join(out, " ")
}

func qSafe(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '!' || c == '*' || c == '+' || c == '-' || c == '/'
}

func qLen(s []byte) int {
	n := 0
	for _, c := range s {
		if qSafe(c) || c == ' ' {
			n++
		} else {
			n += 3
		}
	}
	return n
}

func qEncode(s []byte) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c == ' ':
			b.WriteByte('_')
		case qSafe(c):
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	return b.String()
}

// sanitizeHeader keeps a header value on one line.
func sanitizeHeader(s string) string {
	return strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)), " ")
}

// writeHeader writes one header field folded at spaces near 76 columns.
func writeHeader(b *bytes.Buffer, name, value string) {
	if !isASCII(value) {
		value = mime.QEncoding.Encode("utf-8", value)
	}
	b.WriteString(name)
	b.WriteString(":")
	col := len(name) + 1
	for i, w := range strings.Fields(value) {
		if i > 0 && col+1+len(w) > 76 {
			b.WriteString("\r\n")
			col = 0
		}
		b.WriteString(" ")
		b.WriteString(w)
		col += 1 + len(w)
	}
	b.WriteString("\r\n")
}
