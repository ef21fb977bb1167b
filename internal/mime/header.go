package mime

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// headerField is one field of a header block. name and value are slices of
// the raw message; value is still folded (see unfold).
type headerField struct {
	name  []byte
	value []byte
}

// header is a parsed header block.
type header struct {
	fields []headerField
}

// get returns the unfolded, trimmed value of the first field called name
// (ASCII case-insensitive), and whether it exists.
func (h *header) get(name string) (string, bool) {
	for i := range h.fields {
		f := &h.fields[i]
		if len(f.name) == len(name) && equalFoldASCII(f.name, name) {
			return unfold(f.value), true
		}
	}
	return "", false
}

// has reports whether a field called name exists.
func (h *header) has(name string) bool {
	for i := range h.fields {
		f := &h.fields[i]
		if len(f.name) == len(name) && equalFoldASCII(f.name, name) {
			return true
		}
	}
	return false
}

// transferEncodings are the Content-Transfer-Encoding values
// transferEncoding returns without allocating.
var transferEncodings = [...]string{"7bit", "8bit", "base64", "quoted-printable", "binary"}

// transferEncoding returns the lower-cased Content-Transfer-Encoding of h,
// "" without one: strings.ToLower of get's value.
func transferEncoding(h *header) string {
	for i := range h.fields {
		f := &h.fields[i]
		if len(f.name) != len("Content-Transfer-Encoding") || !equalFoldASCII(f.name, "Content-Transfer-Encoding") {
			continue
		}
		// Only ASCII lower-cases to these ASCII names.
		v := bytes.TrimSpace(f.value)
		for _, e := range transferEncodings {
			if len(v) == len(e) && equalFoldASCII(v, e) {
				return e
			}
		}
		return strings.ToLower(unfold(f.value))
	}
	return ""
}

// all returns the unfolded, trimmed values of the fields called name, in
// order, at most limit of them, each at most maxLen bytes (longer ones
// are left out).
func (h *header) all(name string, limit, maxLen int) []string {
	var out []string
	for i := range h.fields {
		f := &h.fields[i]
		if len(f.name) == len(name) && equalFoldASCII(f.name, name) && len(f.value) <= maxLen {
			out = append(out, unfold(f.value))
			if len(out) == limit {
				break
			}
		}
	}
	return out
}

func equalFoldASCII(b []byte, s string) bool {
	for i := 0; i < len(b); i++ {
		c, d := b[i], s[i]
		if c == d {
			continue
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// unfold removes the line breaks of a folded header value (RFC 5322
// 2.2.3) and trims surrounding white space.
func unfold(v []byte) string {
	v = bytes.TrimSpace(v)
	if bytes.IndexByte(v, '\n') < 0 {
		return string(v)
	}
	var b strings.Builder
	b.Grow(len(v))
	for len(v) > 0 {
		i := bytes.IndexByte(v, '\n')
		if i < 0 {
			b.Write(v)
			break
		}
		line := v[:i]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		b.Write(line)
		v = v[i+1:]
	}
	return b.String()
}

// isHeaderLine reports whether line looks like "Name: value" with a valid
// field name (printable ASCII, no space or colon; trailing blanks before
// the colon are tolerated, as seen in the wild).
func isHeaderLine(line []byte) (nameEnd, colon int, ok bool) {
	colon = bytes.IndexByte(line, ':')
	if colon <= 0 {
		return 0, 0, false
	}
	nameEnd = colon
	for nameEnd > 0 && (line[nameEnd-1] == ' ' || line[nameEnd-1] == '\t') {
		nameEnd--
	}
	if nameEnd == 0 {
		return 0, 0, false
	}
	for _, c := range line[:nameEnd] {
		if c < 33 || c > 126 {
			return 0, 0, false
		}
	}
	return nameEnd, colon, true
}

// nextLine returns the line of b starting at i without its line break, and
// the index just after the line break.
func nextLine(b []byte, i int) (line []byte, next int) {
	j := bytes.IndexByte(b[i:], '\n')
	if j < 0 {
		return b[i:], len(b)
	}
	line = b[i : i+j]
	next = i + j + 1
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, next
}

// parseHeader splits raw into its header block and body. It is lenient:
// a leading mbox "From " line is skipped; a malformed line followed by a
// valid field is skipped with a warning; a malformed line followed by
// anything else starts the body early (a missing blank line); a part whose
// first line is not a field has an empty header.
//
// Fields are appended to *arena (when not nil) so that one parser reuses
// one backing array across messages; the returned header keeps a capped
// sub-slice, which stays valid when the arena grows later.
func parseHeader(raw []byte, warn func(string), arena *[]headerField) (header, []byte) {
	if arena == nil {
		return scanHeader(raw, warn, make([]headerField, 0, 16))
	}
	start := len(*arena)
	h, body := scanHeader(raw, warn, (*arena)[start:start:cap(*arena)])
	*arena = append((*arena)[:start], h.fields...)
	n := len(*arena)
	h.fields = (*arena)[start:n:n]
	return h, body
}

// scanHeader is parseHeader appending fields to fields.
func scanHeader(raw []byte, warn func(string), fields []headerField) (header, []byte) {
	h := header{fields: fields}
	i := 0
	first := true
	for i < len(raw) {
		line, next := nextLine(raw, i)
		if len(line) == 0 {
			return h, raw[next:]
		}
		if line[0] == ' ' || line[0] == '\t' {
			if n := len(h.fields); n > 0 {
				// Continuation: extend the previous value to this line.
				f := &h.fields[n-1]
				start := cap(raw) - cap(f.value)
				end := i + len(line)
				f.value = raw[start:end]
			} else if first {
				warn("header starts with a continuation line: ignored")
			}
			i = next
			first = false
			continue
		}
		nameEnd, colon, ok := isHeaderLine(line)
		if !ok {
			if first && bytes.HasPrefix(line, []byte("From ")) {
				i = next
				first = false
				continue
			}
			if first {
				// No header at all: everything is body.
				return h, raw[i:]
			}
			nl, _ := nextLine(raw, next)
			if _, _, ok := isHeaderLine(nl); ok {
				warn("malformed header line skipped")
				i = next
				continue
			}
			warn("header not terminated by a blank line")
			return h, raw[i:]
		}
		h.fields = append(h.fields, headerField{
			name:  line[:nameEnd],
			value: raw[i+colon+1 : i+len(line)],
		})
		first = false
		i = next
	}
	return h, nil
}

// mediaType is the part of a Content-Type (or Content-Disposition) value
// that nddmilter needs.
type mediaType struct {
	typ        string // lower-case "type/subtype" ("" if absent)
	charset    string // lower-case, unquoted
	boundary   string
	reportType string // lower-case
	filename   bool   // a name or filename parameter is present
	flowed     bool   // format=flowed (RFC 3676)
	delsp      bool   // delsp=yes
}

// parseMediaType parses a Content-Type or Content-Disposition value
// leniently: unknown syntax is skipped, never rejected.
func parseMediaType(v string) mediaType {
	var mt mediaType
	i := strings.IndexByte(v, ';')
	t := v
	if i >= 0 {
		t = v[:i]
	}
	mt.typ = strings.ToLower(strings.TrimSpace(t))
	if i < 0 {
		return mt
	}
	rest := v[i+1:]
	for len(rest) > 0 {
		// key
		rest = strings.TrimLeft(rest, " \t\r\n;")
		eq := strings.IndexAny(rest, "=;")
		if eq < 0 {
			break
		}
		if rest[eq] == ';' {
			rest = rest[eq+1:]
			continue
		}
		key := strings.ToLower(strings.TrimSpace(rest[:eq]))
		rest = strings.TrimLeft(rest[eq+1:], " \t\r\n")
		var val string
		if len(rest) > 0 && rest[0] == '"' {
			var b strings.Builder
			j := 1
			for ; j < len(rest); j++ {
				c := rest[j]
				if c == '\\' && j+1 < len(rest) {
					j++
					b.WriteByte(rest[j])
					continue
				}
				if c == '"' {
					break
				}
				b.WriteByte(c)
			}
			val = b.String()
			if j < len(rest) {
				j++
			}
			rest = rest[j:]
			if k := strings.IndexByte(rest, ';'); k >= 0 {
				rest = rest[k+1:]
			} else {
				rest = ""
			}
		} else {
			k := strings.IndexByte(rest, ';')
			if k < 0 {
				val, rest = rest, ""
			} else {
				val, rest = rest[:k], rest[k+1:]
			}
			val = strings.TrimSpace(val)
			if j := strings.IndexAny(val, " \t"); j >= 0 {
				val = val[:j]
			}
		}
		switch key {
		case "charset":
			if mt.charset == "" {
				mt.charset = strings.ToLower(strings.Trim(val, "'\" "))
			}
		case "boundary":
			if mt.boundary == "" {
				mt.boundary = val
			}
		case "report-type":
			mt.reportType = strings.ToLower(val)
		case "format":
			mt.flowed = strings.EqualFold(val, "flowed")
		case "delsp":
			mt.delsp = strings.EqualFold(val, "yes")
		case "name", "filename", "name*", "filename*", "filename*0", "filename*0*", "name*0", "name*0*":
			mt.filename = true
		}
	}
	return mt
}

// decodeHeaderText decodes the RFC 2047 encoded-words of a header value.
// Adjacent encoded-words in the same charset are joined before charset
// decoding, so that a multi-byte character split across words (common in
// CJK mail) survives. Raw 8-bit text that is not UTF-8 is decoded with
// fallback (a charset name) and a warning.
//
// The work is linear in len(v): at most Options.MaxHeaderBytes of v are
// read and at most Options.MaxEncodedWords words decoded (per message);
// the rest of v is dropped with a warning. The decoded bytes of a run of
// joined words go to one buffer that grows geometrically, and the search
// for a word's closing "?=" is not repeated for each "=?" it spans.
func (p *parser) decodeHeaderText(v string, what, fallback string) string {
	if max := p.opts.MaxHeaderBytes; max > 0 && len(v) > max {
		p.overBudget(what + " longer than " + strconv.Itoa(max) + " bytes: the rest is ignored")
		v = v[:max]
	}
	if !strings.Contains(v, "=?") {
		return p.header8bit(v, what, fallback)
	}
	ewWhat := "encoded-word in " + what
	var out strings.Builder
	out.Grow(len(v))
	pend := p.ewbuf[:0] // decoded bytes of the pending run of encoded-words
	inRun := false
	pendCS := ""
	flush := func() {
		if inRun {
			out.Write(p.decodeCharset(pend, pendCS, ewWhat))
			pend = pend[:0]
			inRun = false
		}
	}
	sc := ewScanner{close: cachedSearch{pos: -1}}
	defer func() { p.work += sc.work + sc.close.work }()
	i := 0
	lastWordEnd := -1 // end of the previous encoded-word in v
	for i < len(v) {
		j := strings.Index(v[i:], "=?")
		if j < 0 {
			sc.work += len(v) - i
			break
		}
		sc.work += j + 2
		start := i + j
		cs, enc, text, end, ok := sc.scan(v, start)
		if !ok {
			// Not an encoded word: copy through "=?" and go on.
			flush()
			out.WriteString(p.header8bit(v[i:start+2], what, fallback))
			i = start + 2
			lastWordEnd = -1
			continue
		}
		if max := p.opts.MaxEncodedWords; max > 0 && p.words >= max {
			p.overBudget("more than " + strconv.Itoa(max) + " encoded-words in the header: the rest of the " + what + " is ignored")
			v = v[:start]
			break
		}
		p.words++
		between := v[i:start]
		if !(lastWordEnd == i && strings.TrimLeft(between, " \t\r\n") == "") {
			flush()
			out.WriteString(p.header8bit(between, what, fallback))
		}
		if inRun && cs != pendCS {
			flush()
		}
		if enc == 'b' {
			pend = p.decodeBase64String(pend, text, ewWhat)
		} else {
			pend = decodeQAppend(pend, text)
		}
		inRun, pendCS = true, cs
		i = end
		lastWordEnd = end
	}
	flush()
	if cap(pend) <= 64<<10 {
		p.ewbuf = pend[:0]
	}
	if i < len(v) {
		out.WriteString(p.header8bit(v[i:], what, fallback))
	}
	return out.String()
}

// decodeBase64String is decodeBase64Append for an encoded-word's text,
// without converting it to a byte slice first.
func (p *parser) decodeBase64String(dst []byte, text, what string) []byte {
	var tmp [256]byte
	if len(text) <= len(tmp) {
		return p.decodeBase64Append(dst, tmp[:copy(tmp[:], text)], what)
	}
	return p.decodeBase64Append(dst, []byte(text), what)
}

// maxEncodedWord bounds the encoded text of one encoded-word (RFC 2047
// allows 75 bytes for the whole word; long ones exist in the wild).
const maxEncodedWord = 4096

// ewScanner parses the encoded-words of one header value, remembering
// where the next "?=" is: text full of "=?" never closed would otherwise
// be searched up to maxEncodedWord bytes from each of them.
type ewScanner struct {
	close cachedSearch // the next "?="
	work  int          // bytes examined besides close's, for the tests of linearity
}

// scan parses "=?charset?enc?text?=" at v[start:].
func (sc *ewScanner) scan(v string, start int) (cs string, enc byte, text string, end int, ok bool) {
	s := v[start+2:]
	q1 := strings.IndexByte(s, '?')
	sc.work += q1 + 1 // q1 < 0: nothing more to scan after this one
	if q1 <= 0 || q1+2 >= len(s) || s[q1+2] != '?' {
		return "", 0, "", 0, false
	}
	cs = s[:q1]
	if k := strings.IndexByte(cs, '*'); k >= 0 { // RFC 2231 language
		cs = cs[:k]
	}
	e := s[q1+1] | 0x20
	if e != 'b' && e != 'q' {
		return "", 0, "", 0, false
	}
	from := start + 2 + q1 + 3 // start of the encoded text in v
	c := sc.close.next(v, from, func(t string) int { return strings.Index(t, "?=") })
	if c < 0 || c+2-from > maxEncodedWord {
		return "", 0, "", 0, false // keeps hostile headers linear
	}
	text = v[from:c]
	sc.work += len(text)
	if e == 'b' && strings.ContainsAny(text, " \t") {
		return "", 0, "", 0, false
	}
	return strings.ToLower(cs), e, text, c + 2, true
}

// decodeQAppend decodes the "Q" encoding of RFC 2047 4.2.
func decodeQAppend(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_':
			dst = append(dst, ' ')
		case c == '=' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			dst = append(dst, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// header8bit returns s, decoding raw 8-bit bytes with fallback when s is
// not valid UTF-8.
func (p *parser) header8bit(s, what, fallback string) string {
	if s == "" || utf8.ValidString(s) {
		return s
	}
	if fallback == "" || isUTF8Name(fallback) || isASCIIName(fallback) {
		fallback = guessSingleByte([]byte(s))
	}
	p.warn("8-bit " + what + " decoded as " + fallback)
	return string(p.decodeCharset([]byte(s), fallback, what))
}
