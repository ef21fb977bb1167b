package mime

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// maxHTMLStack bounds the element stack kept while extracting text;
// elements opened beyond it are not tracked (their hidden style is
// ignored). maxHTMLSearch bounds how far down an end tag looks for its
// start tag, so that hostile markup stays linear.
const (
	maxHTMLStack  = 1024
	maxHTMLSearch = 64
)

type htmlElem struct {
	a      atom.Atom
	name   string // only for unknown elements (a == 0)
	hidden bool
}

// htmlExtractor turns HTML into the text a mail client would show.
type htmlExtractor struct {
	stack  []htmlElem
	hidden int // number of hidden elements on the stack
	pre    int // number of open pre elements
	style  []byte
	lname  []byte // lower-cased tag name scratch
	// separator state
	out         []byte
	start       int // len(out) when extraction began
	pendSpace   bool
	pendNewline bool
	// onData, when set, is called with the value of each src attribute
	// that is a data: URI (an inline image); the value is valid only
	// during the call.
	onData func(val []byte)
}

// VisibleTextFromHTML returns the normalized visible text of an HTML
// document (as Parse puts it in Document.Text) and the distinct web URLs
// found in its href/src attributes and in its text. It never panics: a
// panic from a library yields the empty result.
func VisibleTextFromHTML(b []byte) (text string, urls []string) {
	p := parserPool.Get().(*parser)
	defer func() {
		if recover() != nil {
			text, urls = "", nil
			return // do not pool a parser in an unknown state
		}
		parserPool.Put(p)
	}()
	p.urls.reset(defaultMaxURLs)
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	p.raw = p.html.extract(p.raw[:0], b, &p.urls)
	p.nz.reset(defaultMaxComposeBytes)
	p.text = p.nz.normalizeAppend(p.text[:0], p.raw, defaultMaxTextBytes)
	text = string(p.text)
	p.urls.scanText(text)
	urls, _ = p.urls.take()
	return text, urls
}

// blockKind tells how an element separates words: 0 inline (never splits
// a word), 1 a space (table cells), 2 a line break (blocks).
func blockKind(a atom.Atom) int {
	switch a {
	case atom.Td, atom.Th, atom.Option, atom.Button, atom.Select, atom.Input, atom.Textarea,
		atom.Img, atom.Dt, atom.Dd:
		return 1
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Body, atom.Br,
		atom.Caption, atom.Center, atom.Details, atom.Dialog, atom.Dir, atom.Div, atom.Dl,
		atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer, atom.Form, atom.Frame,
		atom.Frameset, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Header,
		atom.Hgroup, atom.Hr, atom.Html, atom.Legend, atom.Li, atom.Main, atom.Menu, atom.Nav,
		atom.Ol, atom.P, atom.Pre, atom.Section, atom.Summary, atom.Table, atom.Tbody,
		atom.Tfoot, atom.Thead, atom.Tr, atom.Ul, atom.Listing, atom.Plaintext, atom.Xmp,
		atom.Title:
		return 2
	}
	return 0
}

// isVoid reports elements that never have content or an end tag.
func isVoid(a atom.Atom) bool {
	switch a {
	case atom.Area, atom.Base, atom.Br, atom.Col, atom.Embed, atom.Hr, atom.Img, atom.Input,
		atom.Link, atom.Meta, atom.Param, atom.Source, atom.Track, atom.Wbr, atom.Keygen:
		return true
	}
	return false
}

// isNeverShown reports elements whose content is not rendered as text.
func isNeverShown(a atom.Atom) bool {
	switch a {
	case atom.Script, atom.Style, atom.Title, atom.Template, atom.Noscript, atom.Iframe,
		atom.Noembed, atom.Noframes, atom.Datalist:
		return true
	}
	return false
}

func (x *htmlExtractor) sep(kind int) {
	switch kind {
	case 1:
		x.pendSpace = true
	case 2:
		x.pendNewline = true
	}
}

// writeText appends text, collapsing white space (outside pre) and
// emitting pending separators only between visible content. Runs of words
// separated by single spaces are copied in one piece.
func (x *htmlExtractor) writeText(t []byte) {
	for len(t) > 0 {
		// Leading white space.
		i := 0
		for i < len(t) && htmlSpace[t[i]] {
			if x.pre > 0 && t[i] == '\n' {
				x.pendNewline = true
			}
			i++
		}
		if i > 0 {
			x.pendSpace = true
			t = t[i:]
			if len(t) == 0 {
				return
			}
		}
		j := plainRun(t)
		for j < len(t) {
			if !htmlSpace[t[j]] || t[j] == ' ' && j+1 < len(t) && !htmlSpace[t[j+1]] {
				j++
				continue
			}
			break
		}
		if len(x.out) > x.start {
			if x.pendNewline {
				x.out = append(x.out, '\n')
			} else if x.pendSpace {
				x.out = append(x.out, ' ')
			}
		}
		x.pendSpace, x.pendNewline = false, false
		x.out = append(x.out, t[:j]...)
		t = t[j:]
	}
}

// plainRun returns a prefix length of t, a multiple of 7, over which
// every byte is a non-space or a single space followed by a byte that is
// not white space: the bytes writeText copies as they are. It reads 8
// bytes at a time (SWAR): a window of 8 bytes without a control byte
// (< 0x20; the white space other than ' ' is) and without two adjacent
// spaces vouches for its first 7.
func plainRun(t []byte) int {
	const (
		ones = 0x0101010101010101
		low7 = 0x7f7f7f7f7f7f7f7f
		high = 0x8080808080808080
	)
	j := 0
	for j+8 <= len(t) {
		w := binary.LittleEndian.Uint64(t[j:])
		// Some byte < 0x20 (bytes ≥ 0x80 never match: ^w clears their high bit).
		if (w-0x20*ones)&^w&high != 0 {
			break
		}
		// Exact marks (0x80) of the bytes equal to ' '.
		x := w ^ 0x20*ones
		sp := ^((x&low7 + low7) | x | low7)
		if sp&(sp>>8) != 0 {
			break
		}
		j += 7
	}
	return j
}

// htmlSpace marks the bytes HTML treats as white space.
var htmlSpace = [256]bool{' ': true, '\n': true, '\t': true, '\r': true, '\f': true}

func (x *htmlExtractor) push(e htmlElem) {
	if len(x.stack) >= maxHTMLStack {
		return
	}
	if e.hidden {
		x.hidden++
	}
	if e.a == atom.Pre || e.a == atom.Listing || e.a == atom.Textarea {
		x.pre++
	}
	x.stack = append(x.stack, e)
}

// popTo pops the stack down to and including index i.
func (x *htmlExtractor) popTo(i int) {
	for k := len(x.stack) - 1; k >= i; k-- {
		e := x.stack[k]
		if e.hidden {
			x.hidden--
		}
		if e.a == atom.Pre || e.a == atom.Listing || e.a == atom.Textarea {
			x.pre--
		}
	}
	x.stack = x.stack[:i]
}

// find returns the index of the topmost open element a (or name), not
// looking below a stopper element, or -1.
func (x *htmlExtractor) find(a atom.Atom, name []byte, stoppers ...atom.Atom) int {
	for k := len(x.stack) - 1; k >= 0 && k >= len(x.stack)-maxHTMLSearch; k-- {
		e := &x.stack[k]
		if e.a == a && (a != 0 || e.name == string(name)) {
			return k
		}
		for _, s := range stoppers {
			if e.a == s {
				return -1
			}
		}
	}
	return -1
}

// implicitClose closes the elements that a start tag a ends implicitly,
// as browsers do (an open <p> before a block, a <li> before the next
// <li>, …), so that an unclosed hidden element does not hide the rest.
func (x *htmlExtractor) implicitClose(a atom.Atom) {
	switch a {
	case atom.Li:
		if k := x.find(atom.Li, nil, atom.Ul, atom.Ol, atom.Menu); k >= 0 {
			x.popTo(k)
		}
	case atom.Dt, atom.Dd:
		if k := x.find(atom.Dd, nil, atom.Dl); k >= 0 {
			x.popTo(k)
		} else if k := x.find(atom.Dt, nil, atom.Dl); k >= 0 {
			x.popTo(k)
		}
	case atom.Td, atom.Th:
		if k := x.find(atom.Td, nil, atom.Tr, atom.Table); k >= 0 {
			x.popTo(k)
		} else if k := x.find(atom.Th, nil, atom.Tr, atom.Table); k >= 0 {
			x.popTo(k)
		}
	case atom.Tr:
		if k := x.find(atom.Tr, nil, atom.Table); k >= 0 {
			x.popTo(k)
		}
	case atom.Option:
		if n := len(x.stack); n > 0 && x.stack[n-1].a == atom.Option {
			x.popTo(n - 1)
		}
	}
	if blockKind(a) == 2 && a != atom.Br {
		if n := len(x.stack); n > 0 && x.stack[n-1].a == atom.P {
			x.popTo(n - 1)
		}
	}
}

// extract appends the visible text of b to dst (not yet normalized) and
// adds href/src URLs to urls.
func (x *htmlExtractor) extract(dst, b []byte, urls *urlSet) []byte {
	x.stack = x.stack[:0]
	x.hidden, x.pre = 0, 0
	x.out, x.start = dst, len(dst)
	x.pendSpace, x.pendNewline = false, false
	z := html.NewTokenizer(bytes.NewReader(b))
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			out := x.out
			x.out = nil
			return out
		case html.TextToken:
			if x.hidden == 0 {
				x.writeText(z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			var ts tagScanner
			name := ts.name(z.Raw())
			a := lookupAtom(name, &x.lname)
			x.implicitClose(a)
			// A void element is never pushed: whether it hides is moot.
			void := isVoid(a)
			hidden := void || isNeverShown(a)
			var seenStyle, seenHidden bool
			for {
				key, val, ok := ts.next()
				if !ok {
					break
				}
				switch {
				case len(key) == 5 && equalFoldASCII(key, "style"):
					if !seenStyle && !hidden && x.styleHidden(val) {
						hidden = true
					}
					seenStyle = true
				case len(key) == 6 && equalFoldASCII(key, "hidden"):
					if !seenHidden {
						hidden = true
					}
					seenHidden = true
				case urls != nil && (len(key) == 4 && equalFoldASCII(key, "href") || len(key) == 3 && equalFoldASCII(key, "src") ||
					len(key) == 10 && equalFoldASCII(key, "background") || len(key) == 6 && equalFoldASCII(key, "action")):
					if x.onData != nil && len(key) == 3 && len(val) > 5 && equalFoldASCII(val[:5], "data:") {
						x.onData(val)
						break
					}
					urls.addBytes(val)
				}
			}
			if k := blockKind(a); k != 0 && x.hidden == 0 {
				x.sep(k)
			}
			if void {
				continue
			}
			e := htmlElem{a: a, hidden: hidden}
			if a == 0 {
				e.name = string(x.lname)
			}
			x.push(e)
		case html.EndTagToken:
			var ts tagScanner
			name := ts.name(z.Raw())
			a := lookupAtom(name, &x.lname)
			name = x.lname
			if k := blockKind(a); k != 0 && x.hidden == 0 {
				x.sep(k)
			}
			if k := x.find(a, name); k >= 0 {
				x.popTo(k)
			}
			if k := blockKind(a); k != 0 && x.hidden == 0 {
				x.sep(k)
			}
		}
	}
}

// styleHidden reports whether an inline style hides the element:
// display:none, visibility:hidden/collapse, opacity:0, a font size of 0 or
// below 2px/2pt, or a zero (max-)height or width with overflow:hidden.
func (x *htmlExtractor) styleHidden(v []byte) bool {
	s := x.style[:0]
	for _, c := range v {
		if c <= ' ' {
			continue
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		s = append(s, c)
	}
	x.style = s
	if len(s) < 9 {
		return false
	}
	if val, ok := cssProp(s, "display"); ok && bytes.HasPrefix(val, []byte("none")) {
		return true
	}
	if val, ok := cssProp(s, "visibility"); ok &&
		(bytes.HasPrefix(val, []byte("hidden")) || bytes.HasPrefix(val, []byte("collapse"))) {
		return true
	}
	if val, ok := cssProp(s, "font-size"); ok {
		if n, unit, ok := cssNumber(val); ok {
			if n == 0 || (n < 2 && (unit == "px" || unit == "pt" || unit == "")) || (n < 0.2 && (unit == "em" || unit == "rem")) {
				return true
			}
		}
	}
	if val, ok := cssProp(s, "opacity"); ok {
		if n, _, ok := cssNumber(val); ok && n < 0.05 {
			return true
		}
	}
	if val, ok := cssProp(s, "overflow"); ok && bytes.HasPrefix(val, []byte("hidden")) {
		for _, p := range [...]string{"max-height", "height", "max-width", "width"} {
			if val, ok := cssProp(s, p); ok {
				if n, _, ok := cssNumber(val); ok && n == 0 {
					return true
				}
			}
		}
	}
	return false
}

// cssProp returns the value of the last declaration of prop in a
// compacted, lower-cased inline style.
func cssProp(s []byte, prop string) ([]byte, bool) {
	var val []byte
	found := false
	for i := 0; ; {
		j := bytes.Index(s[i:], []byte(prop))
		if j < 0 {
			break
		}
		k := i + j
		e := k + len(prop)
		if (k == 0 || s[k-1] == ';' || s[k-1] == '{' || s[k-1] == '"' || s[k-1] == '\'') &&
			e < len(s) && s[e] == ':' {
			v := s[e+1:]
			if m := bytes.IndexByte(v, ';'); m >= 0 {
				v = v[:m]
			}
			val, found = v, true
		}
		i = e
	}
	return val, found
}

// cssNumber parses the leading number of a CSS value and its unit.
func cssNumber(v []byte) (float64, string, bool) {
	i := 0
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, "", false
	}
	n, err := strconv.ParseFloat(string(v[:i]), 64)
	if err != nil {
		return 0, "", false
	}
	j := i
	for j < len(v) && v[j] >= 'a' && v[j] <= 'z' {
		j++
	}
	return n, string(v[i:j]), true
}

// lookupAtom lower-cases name into *buf and returns its atom (0 for
// unknown elements).
func lookupAtom(name []byte, buf *[]byte) atom.Atom {
	b := (*buf)[:0]
	for _, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	*buf = b
	return atom.Lookup(b)
}
