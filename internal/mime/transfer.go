package mime

import (
	"bytes"
	"slices"
	"strconv"
)

// base64 decoding table: 0..63 for the alphabet, 0xfe for white space,
// 0xfd for '=', 0xff for anything else. The URL-safe "-" and "_" are
// accepted too.
var b64table = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := 0; i < len(alpha); i++ {
		t[alpha[i]] = byte(i)
	}
	t['-'], t['_'] = 62, 63
	for _, c := range " \t\r\n\f\v" {
		t[c] = 0xfe
	}
	t['='] = 0xfd
	return t
}()

// decodeBase64Append decodes base64 leniently, appending to dst: white
// space is ignored, padding may appear between concatenated chunks, a line
// holding bytes outside the alphabet is skipped as a whole (corruption or
// trailing garbage) with a warning, and a trailing partial group yields the
// bytes it holds. Everything that decodes is kept.
func (p *parser) decodeBase64Append(dst, src []byte, what string) []byte {
	// slices.Grow, not an exact-size copy: the header decoder appends
	// word after word to one buffer, which must grow geometrically to stay
	// linear in the number of words.
	dst = slices.Grow(dst, len(src)*3/4+3)
	var q uint32
	n := 0
	bad := 0
	i := 0
	// State at the start of the current line, to drop a line that holds
	// invalid bytes (corruption, or trailing garbage) as a whole.
	lineDst, lineQ, lineN := len(dst), q, n
	for i < len(src) {
		// Fast path, at a group boundary: 4 alphabet bytes at a time.
		if n == 0 {
			for i+4 <= len(src) {
				a, b, c, d := b64table[src[i]], b64table[src[i+1]], b64table[src[i+2]], b64table[src[i+3]]
				if a|b|c|d >= 64 {
					break
				}
				v := uint32(a)<<18 | uint32(b)<<12 | uint32(c)<<6 | uint32(d)
				dst = append(dst, byte(v>>16), byte(v>>8), byte(v))
				i += 4
			}
			if i >= len(src) {
				break
			}
		}
		// Slow path: one byte.
		ch := src[i]
		c := b64table[ch]
		i++
		switch {
		case c < 64:
			q = q<<6 | uint32(c)
			n++
			if n == 4 {
				dst = append(dst, byte(q>>16), byte(q>>8), byte(q))
				q, n = 0, 0
			}
		case c == 0xfe:
			if ch == '\n' {
				lineDst, lineQ, lineN = len(dst), q, n
			}
		case c == 0xfd:
			dst = flushB64(dst, q, n)
			q, n = 0, 0
		default:
			bad++
			dst, q, n = dst[:lineDst], lineQ, lineN
			i--
			for i < len(src) && src[i] != '\n' {
				i++
			}
		}
	}
	dst = flushB64(dst, q, n)
	if p != nil {
		if bad > 0 {
			p.warn("bad base64 in " + what + ": " + strconv.Itoa(bad) + " lines skipped")
		}
		if n == 1 {
			p.warn("truncated base64 in " + what)
		}
	}
	return dst
}

func flushB64(dst []byte, q uint32, n int) []byte {
	switch n {
	case 2:
		dst = append(dst, byte(q>>4))
	case 3:
		dst = append(dst, byte(q>>10), byte(q>>2))
	}
	return dst
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// decodeQPAppend decodes quoted-printable leniently, appending to dst,
// line by line: trailing white space is removed, a line ending in "=" is
// joined to the next (soft break), "=XX" is a byte, an "=" that starts
// neither is kept literally, and line breaks become LF.
func decodeQPAppend(dst, src []byte) []byte {
	dst = slices.Grow(dst, len(src))
	for len(src) > 0 {
		var line []byte
		nl := bytes.IndexByte(src, '\n')
		if nl >= 0 {
			line, src = src[:nl], src[nl+1:]
		} else {
			line, src = src, nil
		}
		for len(line) > 0 {
			c := line[len(line)-1]
			if c != ' ' && c != '\t' && c != '\r' {
				break
			}
			line = line[:len(line)-1]
		}
		soft := len(line) > 0 && line[len(line)-1] == '='
		if soft {
			line = line[:len(line)-1]
		}
		for len(line) > 0 {
			k := bytes.IndexByte(line, '=')
			if k < 0 {
				dst = append(dst, line...)
				break
			}
			dst = append(dst, line[:k]...)
			if k+2 < len(line) && isHex(line[k+1]) && isHex(line[k+2]) {
				dst = append(dst, unhex(line[k+1])<<4|unhex(line[k+2]))
				line = line[k+3:]
				continue
			}
			dst = append(dst, '=')
			line = line[k+1:]
		}
		if nl >= 0 && !soft {
			dst = append(dst, '\n')
		}
	}
	return dst
}
