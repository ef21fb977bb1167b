package mime

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
	"golang.org/x/text/encoding/traditionalchinese"

	// Registers every charset go-message knows for message.CharsetReader;
	// the lookup below covers the same names.
	_ "github.com/emersion/go-message/charset"
)

// lookupCharset returns the decoder for a MIME charset name, or nil when the
// name is unknown or unsupported. Names are matched like mail clients do:
// the WHATWG table first (so iso-8859-1 is read as its windows-1252
// superset, gb2312 as GBK, ks_c_5601-1987 as EUC-KR), then the IANA MIME
// names; UTF-16 without a byte order mark is big-endian (RFC 2781).
func lookupCharset(name string) encoding.Encoding {
	switch name {
	case "utf-16", "utf16", "unicode", "ucs-2":
		e, _ := ianaindex.MIME.Encoding("utf-16")
		return e
	case "utf-16be", "utf-16le":
		e, _ := ianaindex.MIME.Encoding(name)
		return e
	case "iso-8859-1", "latin1", "iso8859-1", "iso_8859-1", "l1", "cp819", "ibm819":
		return charmap.Windows1252
	}
	if e, err := htmlindex.Get(name); err == nil && e != nil {
		return e
	}
	if e, err := ianaindex.MIME.Encoding(name); err == nil && e != nil {
		return e
	}
	if e, err := ianaindex.MIME.Encoding("cs" + name); err == nil && e != nil {
		return e
	}
	// A few aliases seen in spam and old clients.
	if base, ok := strings.CutSuffix(name, "_charset"); ok && base != "default" {
		return lookupCharset(base)
	}
	switch strings.TrimPrefix(strings.TrimPrefix(name, "x-"), "cs") {
	case "chinesebig5", "big5-hkscs":
		return traditionalchinese.Big5
	case "cp1251", "win-1251", "windows1251":
		return charmap.Windows1251
	case "cp1250", "windows1250":
		return charmap.Windows1250
	case "cp1252", "windows1252", "ansi":
		return charmap.Windows1252
	case "cp866", "ibm866":
		return charmap.CodePage866
	}
	return nil
}

func isUTF8Name(cs string) bool {
	switch cs {
	case "utf-8", "utf8", "x-utf_8j", "unicode-1-1-utf-8":
		return true
	}
	return false
}

func isASCIIName(cs string) bool {
	switch cs {
	case "us-ascii", "ascii", "ansi_x3.4-1968", "iso646-us", "us", "7bit":
		return true
	}
	return false
}

// decodeCharset converts b from charset cs (lower-case) to UTF-8. It never
// fails: unknown charsets are read as UTF-8 when b is valid UTF-8 and as
// windows-1252 (a latin-1 superset) otherwise; invalid UTF-8 is replaced
// by U+FFFD. Each fallback records a warning naming what (e.g. "text/plain
// part"). The result may alias b.
func (p *parser) decodeCharset(b []byte, cs, what string) []byte {
	return p.decodeCharsetASCII(b, cs, what, isASCII(b))
}

// decodeCharsetASCII is decodeCharset for b known to be all ASCII or
// not.
func (p *parser) decodeCharsetASCII(b []byte, cs, what string, ascii bool) []byte {
	switch {
	case cs == "" || isASCIIName(cs):
		if ascii || utf8.Valid(b) {
			return b
		}
		guess := guessSingleByte(b)
		if p.charset == "" && guess != "windows-1252" {
			p.charset = guess // for 8-bit headers too
		}
		if cs == "" {
			p.warn("undeclared 8-bit charset in " + what + ": decoded as " + guess)
		} else {
			p.warn("8-bit bytes in " + cs + " " + what + ": decoded as " + guess)
		}
		return p.decodeCharsetASCII(b, guess, what, false)
	case isUTF8Name(cs):
		if ascii || utf8.Valid(b) {
			return b
		}
		p.warn("invalid UTF-8 in " + what + ": replaced")
		return bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	enc := lookupCharset(cs)
	if enc == nil {
		if utf8.Valid(b) {
			p.warn("unknown charset " + strconv.Quote(cs) + " in " + what + ": decoded as utf-8")
			return b
		}
		p.warn("unknown charset " + strconv.Quote(cs) + " in " + what + ": decoded as latin-1")
		out, _ := charmap.Windows1252.NewDecoder().Bytes(b)
		return out
	}
	if ascii && asciiCompatible(cs) {
		return b
	}
	if cm, ok := enc.(*charmap.Charmap); ok {
		// Single-byte charsets: a table lookup per byte, no transformer.
		out := p.csbuf[:0]
		asciiOK := asciiCompatible(cs)
		for len(b) > 0 {
			if asciiOK {
				// Runs of ASCII are copied as they are.
				n := asciiPrefix(b)
				out = append(out, b[:n]...)
				if b = b[n:]; len(b) == 0 {
					break
				}
			}
			out = utf8.AppendRune(out, cm.DecodeByte(b[0]))
			b = b[1:]
		}
		p.csbuf = out
		return out
	}
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		p.warn("bad " + cs + " text in " + what + ": decoded as latin-1")
		out, _ = charmap.Windows1252.NewDecoder().Bytes(b)
		return out
	}
	if !utf8.Valid(out) {
		out = bytes.ToValidUTF8(out, []byte("\uFFFD"))
	}
	return out
}

func isASCII(b []byte) bool {
	return asciiPrefix(b) == len(b)
}

// asciiPrefix returns the length of the longest prefix of b without a
// byte ≥ 0x80. It reads 32 bytes, then 8 bytes at a time.
func asciiPrefix(b []byte) int {
	const high = 0x8080808080808080
	i := 0
	for ; len(b)-i >= 32; i += 32 {
		w := b[i : i+32 : i+32]
		if (binary.LittleEndian.Uint64(w)|binary.LittleEndian.Uint64(w[8:])|
			binary.LittleEndian.Uint64(w[16:])|binary.LittleEndian.Uint64(w[24:]))&high != 0 {
			break
		}
	}
	for ; len(b)-i >= 8; i += 8 {
		if binary.LittleEndian.Uint64(b[i:])&high != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] >= 0x80 {
			return i
		}
	}
	return i
}

// asciiCompatible reports whether ASCII bytes stand for themselves in cs.
func asciiCompatible(cs string) bool {
	return !strings.HasPrefix(cs, "utf-16") && !strings.HasPrefix(cs, "utf-32") &&
		!strings.HasPrefix(cs, "iso-2022") && cs != "utf-7" && cs != "hz-gb-2312" &&
		!strings.HasPrefix(cs, "ibm") && !strings.HasPrefix(cs, "cp0") && !strings.Contains(cs, "ebcdic")
}

// guessSingleByte guesses the charset of undeclared 8-bit text that is not
// UTF-8: Russian text (most letters are 8-bit, nearly all in 0xC0-0xFF)
// is windows-1251 when its lower-case letters sit in 0xE0-0xFF and KOI8-R
// when they sit in 0xC0-0xDF (the two charsets swap the cases); anything
// else is windows-1252, the latin-1 superset of Western mail.
func guessSingleByte(b []byte) string {
	var ascii, high, c0, e0 int
	for _, c := range b {
		switch {
		case 'a' <= c|0x20 && c|0x20 <= 'z':
			ascii++
		case c >= 0xe0:
			e0++
		case c >= 0xc0:
			c0++
		case c >= 0x80:
			high++
		}
	}
	letters := c0 + e0
	if letters >= 4 && letters > ascii && high*10 < letters {
		if e0 >= c0 {
			return "windows-1251"
		}
		return "koi8-r"
	}
	return "windows-1252"
}
