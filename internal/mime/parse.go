package mime

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Defaults of Options and internal bounds.
const (
	defaultMaxBytes        = 4 << 20
	defaultMaxDepth        = 16
	defaultMaxParts        = 256
	defaultMaxTextBytes    = 1 << 20
	defaultMaxHeaderBytes  = 64 << 10
	defaultMaxEncodedWords = 1024
	defaultMaxComposeBytes = 256 << 10
	defaultMaxURLs         = 1024
	maxWarnings            = 64
)

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultMaxBytes
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = defaultMaxDepth
	}
	if o.MaxParts <= 0 {
		o.MaxParts = defaultMaxParts
	}
	if o.MaxTextBytes <= 0 {
		o.MaxTextBytes = defaultMaxTextBytes
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = defaultMaxHeaderBytes
	}
	if o.MaxEncodedWords <= 0 {
		o.MaxEncodedWords = defaultMaxEncodedWords
	}
	if o.MaxComposeBytes <= 0 {
		o.MaxComposeBytes = defaultMaxComposeBytes
	}
	return o
}

// parser is the state of one Parse call. Parsers are pooled: their scratch
// buffers are reused from message to message.
type parser struct {
	opts     Options
	warnings []string
	text     []byte
	urls     urlSet
	html     htmlExtractor
	nz       normalizer
	dec      []byte // scratch: transfer-decoded leaf part
	raw      []byte // scratch: visible text of an HTML part
	csbuf    []byte // scratch: output of single-byte charset decoding
	ewbuf    []byte // scratch: decoded bytes of a run of encoded-words
	bin      []byte // scratch: transfer-decoded non-text part (parts.go)
	media    []Part // non-text parts (parts.go)
	fields   []headerField
	parts    int
	words    int    // encoded-words decoded so far
	charset  string // first non-UTF-8 charset declared by a text part
	depthMsg bool
	partsMsg bool
	// scan is the span of text whose scan for URLs is scheduled.
	scan textSpan
	// over is set when a budget cut the content (Document.OverBudget).
	over bool
	// work counts the bytes examined by the scans that could repeat
	// (see Document.work).
	work int
	// ctx is the context of ParseContext (nil for Parse); ctxErr is its
	// error once seen.
	ctx    context.Context
	ctxErr error
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

func (p *parser) warn(msg string) {
	for _, w := range p.warnings {
		if w == msg {
			return
		}
	}
	switch {
	case len(p.warnings) < maxWarnings:
		p.warnings = append(p.warnings, msg)
	case len(p.warnings) == maxWarnings:
		p.warnings = append(p.warnings, "too many warnings: the rest are dropped")
	}
}

func parse(ctx context.Context, raw []byte, opts Options) (doc *Document, err error) {
	p := parserPool.Get().(*parser)
	p.ctx, p.ctxErr = ctx, nil
	p.nz.done = p.done
	p.opts = opts.withDefaults()
	p.warnings = nil
	p.text = p.text[:0]
	p.urls.reset(defaultMaxURLs)
	p.parts, p.words, p.work = 0, 0, 0
	p.over = false
	p.scan = textSpan{}
	p.nz.reset(p.opts.MaxComposeBytes)
	p.nz.work = 0
	p.fields = p.fields[:0]
	p.charset = ""
	p.media = nil
	p.depthMsg, p.partsMsg = false, false
	doc = new(Document)
	defer func() {
		if r := recover(); r != nil {
			p.warn(fmt.Sprintf("internal error while parsing: %v", r))
			p.finish(doc)
		}
		if p.ctxErr != nil {
			err = fmt.Errorf("mime: parsing abandoned: %w", p.ctxErr)
		}
		p.ctx, p.nz.done = nil, nil
		clear(p.fields) // drop references to the message
		if cap(p.text) <= 1<<20 && cap(p.dec) <= 1<<20 && cap(p.raw) <= 1<<20 && cap(p.csbuf) <= 1<<20 && cap(p.fields) <= 4096 &&
			cap(p.nz.clean) <= 1<<20 && cap(p.nz.nfkc) <= 1<<20 && cap(p.bin) <= 1<<20 {
			parserPool.Put(p)
		}
	}()

	if int64(len(raw)) > p.opts.MaxBytes {
		raw = raw[:p.opts.MaxBytes]
		doc.Truncated = true
		p.over = true
		p.warn("message longer than " + strconv.FormatInt(p.opts.MaxBytes, 10) + " bytes: the rest is ignored")
	}
	h, body := parseHeader(raw, p.warn, &p.fields)
	if len(h.fields) == 0 {
		p.warn("message has no header")
	}
	if from, ok := h.get("From"); ok {
		doc.From = addressOf(from)
	}
	if id, ok := h.get("Message-Id"); ok {
		doc.MessageID = messageID(id)
	}
	lf := listFields{h: &h}
	doc.List = listName(&lf)
	doc.ListID = listID(&lf)
	doc.ListPost = listPost(&lf)
	doc.Recipients = recipients(&h)
	doc.Precedence = precedence(&h)
	doc.Bulk = isBulk(&h)
	doc.Reply = isReply(&h)
	doc.AuthResults = h.all("Authentication-Results", MaxAuthResults, MaxAuthResultLen)
	p.safely("the body", func() { p.entity(&h, body, 0, "text/plain") })
	p.safely("the subject", func() {
		if p.done() {
			return
		}
		// After the body: an 8-bit subject is read in the body's charset.
		subj, _ := h.get("Subject")
		subj = p.decodeHeaderText(subj, "subject", p.charset)
		doc.Subject = p.normalizeLine(subj, "subject")
	})
	p.finish(doc)
	return doc, nil
}

// done reports whether the context of the parse is done, recording its
// error and a warning the first time. It is checked between MIME parts
// and as text is normalized (see normalizer.done).
func (p *parser) done() bool {
	if p.ctxErr != nil {
		return true
	}
	if p.ctx == nil {
		return false
	}
	if err := p.ctx.Err(); err != nil {
		p.ctxErr = err
		p.warn("parsing abandoned: " + err.Error())
		return true
	}
	return false
}

// safely runs f, turning a panic (a bug, here or in a library) into a
// warning so that the rest of the message is still read.
func (p *parser) safely(what string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			p.warn(fmt.Sprintf("internal error while parsing %s: %v", what, r))
		}
	}()
	f()
}

// finish copies the accumulated state of p into doc.
func (p *parser) finish(doc *Document) {
	doc.Text = string(p.text)
	p.safely("the body", func() { p.flushScan(doc.Text) })
	doc.OverBudget = p.over
	doc.work = p.work + p.urls.work + p.nz.work
	doc.URLs, doc.Hosts = p.urls.take()
	doc.Parts, p.media = p.media, nil
	doc.Warnings = p.warnings
	p.warnings = nil
}

// normalizeLine normalizes a header value: control characters become
// spaces, runs of white space collapse.
func (p *parser) normalizeLine(s, what string) string {
	if s == "" {
		return ""
	}
	p.nz.reset(p.opts.MaxComposeBytes) // a budget of its own, apart from the text's
	b := p.nz.normalizeAppend(nil, []byte(s), p.opts.MaxHeaderBytes)
	if p.nz.cut && p.ctxErr == nil {
		p.overBudget("normalized " + what + " longer than " + strconv.Itoa(p.opts.MaxHeaderBytes) +
			" bytes or too much text to compose (max " + strconv.Itoa(p.opts.MaxComposeBytes) + " bytes): the rest is ignored")
	}
	out := b[:0]
	space := false
	for _, c := range b {
		if c < ' ' || c == 0x7f || c == ' ' {
			space = len(out) > 0
			continue
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, c)
	}
	return string(out)
}

// entity processes one MIME entity (the message or a part) with header h.
func (p *parser) entity(h *header, body []byte, depth int, defType string) {
	if p.opts.testPanic && p.parts > 0 {
		panic("test panic")
	}
	if p.done() {
		return
	}
	p.parts++
	if p.parts > p.opts.MaxParts {
		if !p.partsMsg {
			p.partsMsg = true
			p.overBudget("more than " + strconv.Itoa(p.opts.MaxParts) + " MIME parts: the rest are ignored")
		}
		return
	}
	var mt mediaType
	if v, ok := h.get("Content-Type"); ok {
		mt = parseMediaType(v)
	}
	if mt.typ == "text" {
		mt.typ = "text/plain"
	}
	if mt.typ == "" || strings.IndexByte(mt.typ, '/') < 0 {
		if mt.typ != "" {
			p.warn("malformed content type " + strconv.Quote(mt.typ) + ": read as " + defType)
		}
		mt.typ = defType
	}
	cte := transferEncoding(h)
	switch {
	case strings.HasPrefix(mt.typ, "multipart/"):
		if depth >= p.opts.MaxDepth {
			p.tooDeep()
			return
		}
		p.multipart(mt, p.transferDecode(nil, body, cte, mt.typ+" part"), depth)
	case mt.typ == "message/rfc822" || mt.typ == "message/global":
		if depth >= p.opts.MaxDepth {
			p.tooDeep()
			return
		}
		inner := p.transferDecode(nil, body, cte, mt.typ+" part")
		ih, ib := parseHeader(inner, p.warn, &p.fields)
		p.entity(&ih, ib, depth+1, "text/plain")
	case mt.typ == "text/plain" || mt.typ == "text/html" || mt.typ == "text/enriched" || mt.typ == "text/richtext":
		if d, ok := h.get("Content-Disposition"); ok && depth > 0 {
			if dm := parseMediaType(d); dm.typ == "attachment" {
				p.binaryPart(mt.typ, cte, body, true)
				return
			}
		}
		p.leaf(mt, cte, body)
	default:
		d, _ := h.get("Content-Disposition")
		p.binaryPart(mt.typ, cte, body, parseMediaType(d).typ == "attachment")
	}
}

// overBudget records that a budget cut the content.
func (p *parser) overBudget(msg string) {
	p.over = true
	p.warn(msg)
}

func (p *parser) tooDeep() {
	if !p.depthMsg {
		p.depthMsg = true
		p.overBudget("MIME nesting deeper than " + strconv.Itoa(p.opts.MaxDepth) + ": inner parts ignored")
	}
}

// transferDecode undoes the Content-Transfer-Encoding cte of body,
// appending to dst when decoding is needed.
func (p *parser) transferDecode(dst, body []byte, cte, what string) []byte {
	switch cte {
	case "", "7bit", "8bit", "binary":
		return body
	case "base64":
		return p.decodeBase64Append(dst, body, what)
	case "quoted-printable":
		return decodeQPAppend(dst, body)
	}
	p.warn("unknown transfer encoding " + strconv.Quote(cte) + " in " + what + ": read as 8bit")
	return body
}

// leaf appends the text of a text/plain or text/html part.
func (p *parser) leaf(mt mediaType, cte string, body []byte) {
	if len(p.text) >= p.opts.MaxTextBytes || p.nz.cut {
		p.textOverBudget()
		return
	}
	what := mt.typ + " part"
	data := p.transferDecode(p.dec[:0], body, cte, what)
	if cte == "base64" || cte == "quoted-printable" {
		p.dec = data
	}
	cs := mt.charset
	if cs != "" && !isUTF8Name(cs) && !isASCIIName(cs) && p.charset == "" {
		p.charset = cs
	}
	isHTML := mt.typ == "text/html"
	ascii := isASCII(data)
	if isHTML && cs == "" && !ascii {
		cs = metaCharset(data)
	}
	txt := p.decodeCharsetASCII(data, cs, what, ascii)
	if isHTML {
		p.flushScan("") // URLs of the text before come before this part's attributes
		p.html.onData = p.dataURI
		p.raw = p.html.extract(p.raw[:0], txt, &p.urls)
		p.html.onData = nil
		txt = p.raw
	} else if mt.flowed {
		p.raw = appendUnflowed(p.raw[:0], txt, mt.delsp)
		txt = p.raw
	} else if bytes.IndexByte(txt, '\r') >= 0 {
		p.raw = appendLF(p.raw[:0], txt)
		txt = p.raw
	}
	// The text is about as long as its source: grow once, not by steps.
	p.text = slices.Grow(p.text, min(len(txt)+1, p.opts.MaxTextBytes-len(p.text)))
	start := len(p.text)
	if start > 0 {
		p.text = append(p.text, '\n')
		start++
	}
	p.text = p.nz.normalizeAppend(p.text, txt, p.opts.MaxTextBytes)
	if p.nz.cut {
		p.textOverBudget()
	}
	if mayHoldURL(p.text[start:]) {
		p.scanLater(start, len(p.text))
	}
}

// scanLater schedules the scan for URLs of p.text[from:to], the text of
// the leaf just read. The scan runs before any other URL is added (the
// next HTML part's attributes) or, for the last leaf, on the document's
// text in finish: the text is then not copied once more for it.
func (p *parser) scanLater(from, to int) {
	p.flushScan("")
	p.scan = textSpan{from: from, to: to, pending: true}
}

// flushScan runs the scheduled scan, on text (the whole of p.text as a
// string) or, when text is "", on a copy of the span.
func (p *parser) flushScan(text string) {
	if !p.scan.pending {
		return
	}
	sp := p.scan
	p.scan.pending = false
	if text == "" {
		p.urls.scanText(string(p.text[sp.from:sp.to]))
		return
	}
	p.urls.scanText(text[sp.from:sp.to])
}

// textSpan is a span of p.text waiting for its scan for URLs.
type textSpan struct {
	from, to int
	pending  bool
}

func (p *parser) textOverBudget() {
	if p.ctxErr != nil {
		return // not a budget: the context is done
	}
	p.overBudget("normalized text longer than " + strconv.Itoa(p.opts.MaxTextBytes) +
		" bytes or too much text to compose (max " + strconv.Itoa(p.opts.MaxComposeBytes) + " bytes): the rest is ignored")
}

// metaCharset finds a charset declared in the first bytes of an HTML
// document (<meta charset=…> or http-equiv Content-Type).
func metaCharset(b []byte) string {
	if len(b) > 4096 {
		b = b[:4096]
	}
	i := indexFold(b, "charset=")
	if i < 0 {
		return ""
	}
	b = b[i+len("charset="):]
	b = bytes.TrimLeft(b, "\"' ")
	j := 0
	for j < len(b) && (b[j] == '-' || b[j] == '_' || b[j] == '.' || b[j] == ':' ||
		'0' <= b[j] && b[j] <= '9' || 'a' <= b[j]|0x20 && b[j]|0x20 <= 'z') {
		j++
	}
	return strings.ToLower(string(b[:j]))
}

// indexFold is bytes.Index for a lower-case ASCII needle, ignoring case.
func indexFold(b []byte, needle string) int {
	for i := 0; i+len(needle) <= len(b); i++ {
		if b[i]|0x20 == needle[0] && equalFoldASCII(b[i:i+len(needle)], needle) {
			return i
		}
	}
	return -1
}

// multipart processes the parts of a multipart body.
func (p *parser) multipart(mt mediaType, body []byte, depth int) {
	parts, closed, found := splitMultipart(body, mt.boundary, p.opts.MaxParts+1)
	if !found {
		g := guessBoundary(body)
		if g != "" && g != mt.boundary {
			parts, closed, found = splitMultipart(body, g, p.opts.MaxParts+1)
			if found {
				if mt.boundary == "" {
					p.warn("multipart without boundary parameter: using " + strconv.Quote(g) + " found in the body")
				} else {
					p.warn("multipart boundary " + strconv.Quote(mt.boundary) + " not found: using " + strconv.Quote(g) + " found in the body")
				}
			}
		}
		if !found {
			p.warn("multipart boundary not found: body read as text/plain")
			p.leaf(mediaType{typ: "text/plain", charset: mt.charset}, "", body)
			return
		}
	}
	if !closed {
		p.warn("multipart closing boundary missing (truncated message?)")
	}
	def := "text/plain"
	if mt.typ == "multipart/digest" {
		def = "message/rfc822"
	}
	hs := make([]header, len(parts))
	bodies := make([][]byte, len(parts))
	for i, part := range parts {
		hs[i], bodies[i] = parseHeader(part, p.warn, &p.fields)
	}
	if mt.typ != "multipart/alternative" || len(parts) < 2 {
		for i := range parts {
			p.entity(&hs[i], bodies[i], depth+1, def)
		}
		return
	}
	// multipart/alternative: render what a mail client shows, the richest
	// alternative (HTML, else a multipart likely to hold HTML, else plain
	// text; the last one on ties, RFC 2046 5.1.4), falling back to the next
	// best when it yields no text. Hidden alternatives (e.g. random text
	// in a text/plain part behind an HTML part) are not read.
	rank := make([]int, len(parts))
	for i := range parts {
		var t string
		if v, ok := hs[i].get("Content-Type"); ok {
			t = parseMediaType(v).typ
		} else {
			t = "text/plain"
		}
		switch {
		case t == "text/html":
			rank[i] = 4
		case strings.HasPrefix(t, "multipart/"):
			rank[i] = 3
		case t == "text/plain" || t == "text" || t == "text/enriched" || t == "text/richtext":
			rank[i] = 2
		case strings.HasPrefix(t, "message/"):
			rank[i] = 1
		}
	}
	for {
		best := -1
		for i := range parts {
			if rank[i] > 0 && (best < 0 || rank[i] >= rank[best]) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		before := len(p.text)
		p.entity(&hs[best], bodies[best], depth+1, def)
		if len(bytes.TrimSpace(p.text[before:])) > 0 {
			return
		}
		rank[best] = 0
	}
}

// splitMultipart splits body at the delimiter lines of boundary (RFC 2046
// 5.1.1), without copying. found is false when no delimiter line exists;
// closed is false when the closing delimiter is missing (the last part
// then runs to the end of body). At most max parts are returned.
func splitMultipart(body []byte, boundary string, max int) (parts [][]byte, closed, found bool) {
	if boundary == "" || len(boundary) > 200 {
		return nil, false, false
	}
	delim := make([]byte, 0, len(boundary)+2)
	delim = append(delim, "--"...)
	delim = append(delim, boundary...)
	i := 0
	partStart := -1
	for i < len(body) {
		j := bytes.Index(body[i:], delim)
		if j < 0 {
			break
		}
		k := i + j
		e := k + len(delim)
		if k > 0 && body[k-1] != '\n' {
			i = e
			continue
		}
		isClose := e+1 < len(body) && body[e] == '-' && body[e+1] == '-'
		after := e
		if isClose {
			after += 2
		}
		nl := bytes.IndexByte(body[after:], '\n')
		var rest []byte
		next := len(body)
		if nl >= 0 {
			rest = body[after : after+nl]
			next = after + nl + 1
		} else {
			rest = body[after:]
		}
		if !isClose && len(bytes.Trim(rest, " \t\r")) > 0 {
			i = e // a longer boundary that merely starts with ours
			continue
		}
		found = true
		if partStart >= 0 {
			end := k
			if end > partStart && body[end-1] == '\n' {
				end--
				if end > partStart && body[end-1] == '\r' {
					end--
				}
			}
			parts = append(parts, body[partStart:end])
			if len(parts) >= max {
				return parts, true, true
			}
		}
		if isClose {
			return parts, true, true
		}
		partStart = next
		i = next
	}
	if partStart >= 0 {
		parts = append(parts, body[partStart:])
	}
	return parts, false, found
}

// guessBoundary returns the boundary of the first line of body that looks
// like a multipart delimiter ("--" followed by a token), or "".
func guessBoundary(body []byte) string {
	for i := 0; i < len(body); {
		line, next := nextLine(body, i)
		i = next
		if len(line) < 3 || line[0] != '-' || line[1] != '-' {
			continue
		}
		b := bytes.TrimRight(line[2:], " \t")
		if len(b) == 0 || len(b) > 200 || b[0] == '-' && len(bytes.Trim(b, "-")) == 0 {
			continue
		}
		return string(bytes.TrimSuffix(b, []byte("--")))
	}
	return ""
}

// addressOf extracts the address of a From header leniently.
func addressOf(v string) string {
	if i := strings.LastIndexByte(v, '<'); i >= 0 {
		if j := strings.IndexByte(v[i:], '>'); j > 0 {
			return strings.TrimSpace(v[i+1 : i+j])
		}
	}
	for _, f := range strings.FieldsFunc(v, func(r rune) bool {
		return r == ' ' || r == '\t' || r == ',' || r == ';' || r == '"' || r == '(' || r == ')'
	}) {
		if strings.IndexByte(f, '@') > 0 {
			return strings.Trim(f, "<>")
		}
	}
	return ""
}

// messageID returns the first message id of v without angle brackets.
// listName names the mailing list of a message from its list headers
// (see Document.List).
func listName(h *listFields) string {
	name := ""
	if v, ok := h.get(listIDField); ok {
		// "Users of X <users.lists.example.org>": the first label.
		id := v
		if i := strings.LastIndexByte(v, '<'); i >= 0 {
			id = v[i+1:]
			if j := strings.IndexByte(id, '>'); j >= 0 {
				id = id[:j]
			}
		}
		name, _, _ = strings.Cut(strings.TrimSpace(id), ".")
	}
	for k := listIDField + 1; k < len(listFieldNames); k++ {
		if name != "" {
			break
		}
		if v, ok := h.get(k); ok {
			a := addressOf(strings.ReplaceAll(v, "mailto:", " "))
			name, _, _ = strings.Cut(a, "@")
		}
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if len(name) > 64 || strings.ContainsAny(name, " \t\r\n<>") {
		return ""
	}
	return name
}

// listID is the whole identifier of a message's mailing list (see
// Document.ListID).
func listID(h *listFields) string {
	id := ""
	if v, ok := h.get(listIDField); ok {
		id = v
		if i := strings.LastIndexByte(v, '<'); i >= 0 {
			id = v[i+1:]
			if j := strings.IndexByte(id, '>'); j >= 0 {
				id = id[:j]
			}
		}
	}
	for k := listIDField + 1; k < len(listFieldNames); k++ {
		if strings.TrimSpace(id) != "" {
			break
		}
		if v, ok := h.get(k); ok {
			id = addressOf(strings.ReplaceAll(v, "mailto:", " "))
		}
	}
	id = strings.ToLower(strings.TrimSpace(id))
	if len(id) > 255 || strings.ContainsAny(id, " \t\r\n<>") {
		return ""
	}
	return id
}

// listPost is the posting address of a message's mailing list (see
// Document.ListPost).
func listPost(h *listFields) string {
	for k := listIDField + 1; k < len(listFieldNames); k++ {
		if v, ok := h.get(k); ok {
			if a := normalAddress(strings.TrimPrefix(addressOf(v), "mailto:")); a != "" {
				return a
			}
		}
	}
	return ""
}

// recipients returns the addresses of the To and Cc fields (see
// Document.Recipients), each once.
func recipients(h *header) []string {
	var out []string
	for i := range h.fields {
		f := &h.fields[i]
		if !(len(f.name) == 2 && (equalFoldASCII(f.name, "To") || equalFoldASCII(f.name, "Cc"))) || len(f.value) > MaxRecipientField {
			continue
		}
		// Lenient: a comma inside a quoted display name splits it, and
		// the part without an address is skipped. A folded value's line
		// breaks are white space to addressOf.
		for part := range strings.SplitSeq(string(f.value), ",") {
			a := normalAddress(addressOf(strings.TrimSpace(part)))
			if a == "" || slices.Contains(out, a) {
				continue
			}
			if out == nil {
				out = make([]string, 0, 4)
			}
			out = append(out, a)
			if len(out) == MaxRecipients {
				return out
			}
		}
	}
	return out
}

// normalAddress returns addr in lower case when it looks like an address
// (local@domain, at most 255 bytes, no spaces, controls or brackets), ""
// otherwise.
func normalAddress(addr string) string {
	at := strings.IndexByte(addr, '@')
	if at <= 0 || at == len(addr)-1 || len(addr) > 255 {
		return ""
	}
	for i := 0; i < len(addr); i++ {
		if c := addr[i]; c <= ' ' || c == 0x7f || c == '<' || c == '>' {
			return ""
		}
	}
	return strings.ToLower(addr)
}

// listFields reads the fields that name a mailing list for listName and
// listID, each at most once.
type listFields struct {
	h    *header
	val  [len(listFieldNames)]string
	ok   [len(listFieldNames)]bool
	read [len(listFieldNames)]bool
}

// listFieldNames are the fields listFields reads, List-Id first.
var listFieldNames = [...]string{"List-Id", "List-Post", "Mailing-List", "X-Mailing-List"}

const listIDField = 0

// get is header.get of listFieldNames[k].
func (l *listFields) get(k int) (string, bool) {
	if !l.read[k] {
		l.val[k], l.ok[k] = l.h.get(listFieldNames[k])
		l.read[k] = true
	}
	return l.val[k], l.ok[k]
}

// isBulk reports a bulk-mail header (see Document.Bulk).
func isBulk(h *header) bool {
	if h.has("List-Unsubscribe") {
		return true
	}
	switch precedence(h) {
	case "bulk", "list", "junk":
		return true
	}
	return false
}

// precedence is the Precedence field's value, lower case ("" if none).
func precedence(h *header) string {
	v, _ := h.get("Precedence")
	return strings.ToLower(strings.TrimSpace(v))
}

// isReply reports an In-Reply-To or References field that names a
// message identifier (see Document.Reply).
func isReply(h *header) bool {
	for _, name := range [...]string{"In-Reply-To", "References"} {
		if v, ok := h.get(name); ok && hasMessageID(v) {
			return true
		}
	}
	return false
}

// hasMessageID reports whether v holds an RFC 5322 msg-id, "<left@right>",
// with both sides non-empty.
func hasMessageID(v string) bool {
	for {
		i := strings.IndexByte(v, '<')
		if i < 0 {
			return false
		}
		v = v[i+1:]
		j := strings.IndexByte(v, '>')
		if j < 0 {
			return false
		}
		if at := strings.IndexByte(v[:j], '@'); at > 0 && at < j-1 {
			return true
		}
		v = v[j+1:]
	}
}

func messageID(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, '<'); i >= 0 {
		if j := strings.IndexByte(v[i:], '>'); j > 0 {
			return strings.TrimSpace(v[i+1 : i+j])
		}
		return strings.TrimSpace(v[i+1:])
	}
	if i := strings.IndexAny(v, " \t"); i >= 0 {
		v = v[:i]
	}
	return v
}

// appendLF appends s to dst with CRLF and lone CR line breaks turned
// into LF.
func appendLF(dst, s []byte) []byte {
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\r')
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, '\n')
		s = s[i+1:]
		if len(s) > 0 && s[0] == '\n' {
			s = s[1:]
		}
	}
	return dst
}

// mayHoldURL is a fast filter for urlSet.scanText: whether b contains "://"
// or a "www." in a common capitalization.
func mayHoldURL(b []byte) bool {
	return bytes.Contains(b, []byte("://")) || bytes.Contains(b, []byte("ww.")) || bytes.Contains(b, []byte("WW."))
}

// appendUnflowed appends format=flowed text (RFC 3676) to dst as the
// paragraphs it stands for: a line ending in a space continues on the next
// line (without that space when delsp is set, which rejoins words split
// across lines), stuffed leading spaces are removed, and the signature
// separator "-- " stays a hard break. Line breaks become LF.
func appendUnflowed(dst, s []byte, delsp bool) []byte {
	for len(s) > 0 {
		line, next := nextLine(s, 0)
		hadBreak := next > len(line)
		s = s[next:]
		if len(line) > 0 && line[0] == ' ' {
			line = line[1:] // space-stuffing
		}
		soft := len(line) > 0 && line[len(line)-1] == ' ' && string(line) != "-- "
		if soft && delsp {
			line = line[:len(line)-1]
		}
		dst = append(dst, line...)
		if !soft && hadBreak {
			dst = append(dst, '\n')
		}
	}
	return dst
}
