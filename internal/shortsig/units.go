package shortsig

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxUnitRunes bounds a word unit: longer runs of letters are hash
// busters or encoded data, not words.
const maxUnitRunes = 40

// unspaced are the scripts written without spaces between words: their
// runs become character bigrams.
var unspaced = []*unicode.RangeTable{unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar}

func isUnspaced(r rune) bool {
	if r < 0x0e00 {
		return false
	}
	return unicode.IsOneOf(unspaced, r)
}

// units appends the text units of s to dst, in order of appearance (see
// the package doc): lower-cased words of 2 to maxUnitRunes letters and
// digits (combining marks continue a word) with at most one digit, and
// the character bigrams of runs of an unspaced script; URLs in the text
// are skipped (a run of one
// character is a unit of its own). s is NFKC-normalized text (mime.Parse).
func units(dst []string, s string) []string {
	eachUnit(s, func(u string, _ int, f fold) bool {
		dst = append(dst, lower(u, f))
		return true
	})
	return dst
}

// maxUnitsRead bounds the units eachUnit reads from one text, repeats
// included: a text of a few words repeated a million times (padding) has
// few distinct units, and would otherwise be read to its end, once per
// component, whatever MaxUnits says.
const maxUnitsRead = 1 << 13

// eachUnit calls f with each text unit of s in order (see units), not
// lower-cased, its byte offset in s and how to lower-case it (see
// lower), until f returns false or maxUnitsRead units have been read. It
// reports whether it read s to its end.
func eachUnit(s string, f func(u string, at int, fl fold) bool) bool {
	read := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf && !isASCIIAlnum(c) {
			i++ // fast path: ASCII punctuation and space
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == 'h' || r == 'H' || r == 'w' || r == 'W') && isURLStart(s, i) {
			// A URL is in the links component, not in the text: its
			// changing parameters would make every copy's text differ.
			for i < len(s) && !isURLEnd(s[i]) {
				i++
			}
			continue
		}
		switch {
		case isUnspaced(r):
			j := i + size
			prev := i
			n := 1
			for j < len(s) {
				r2, sz := utf8.DecodeRuneInString(s[j:])
				if !isUnspaced(r2) {
					break
				}
				if read++; !f(s[prev:j+sz], prev, foldNone) || read >= maxUnitsRead {
					return false
				}
				prev = j
				j += sz
				n++
			}
			if n == 1 {
				if read++; !f(s[i:j], i, foldNone) || read >= maxUnitsRead {
					return false
				}
			}
			i = j
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			j := i
			runes, digits := 0, 0
			fl := foldNone
			lower := byte(0x20) // cleared by an upper-case ASCII letter
			for j < len(s) {
				if c := s[j]; c < utf8.RuneSelf {
					// fast path: ASCII letters and digits, counted
					// without a branch: digits are below 0x40, and of
					// letters and digits only upper-case letters have
					// bit 0x20 clear
					if !isASCIIAlnum(c) {
						break
					}
					digits += 1 - int(c>>6)
					lower &= c
					runes++
					j++
					continue
				}
				r2, sz := utf8.DecodeRuneInString(s[j:])
				if isUnspaced(r2) || !(unicode.IsLetter(r2) || unicode.IsDigit(r2) || unicode.IsMark(r2)) {
					break
				}
				fl = foldUnicode
				if unicode.IsDigit(r2) {
					digits++
				}
				runes++
				j += sz
			}
			if lower == 0 {
				fl = max(fl, foldASCII)
			}
			if runes >= 2 && runes <= maxUnitRunes && digits <= 1 {
				if read++; !f(s[i:j], i, fl) || read >= maxUnitsRead {
					return false
				}
			}
			i = j
		default:
			i += size
		}
	}
	return true
}

// isURLStart reports whether a URL (http://, https:// or www.) starts at
// s[i], not inside a word.
func isURLStart(s string, i int) bool {
	// Each prefix's second character is t or w, which no other character
	// folds to: most words are ruled out without EqualFold.
	if len(s)-i < 4 || s[i+1]|0x20 != 't' && s[i+1]|0x20 != 'w' {
		return false
	}
	return urlStartsAt(s, i)
}

// urlStartsAt is isURLStart without its shortcut on the second character.
func urlStartsAt(s string, i int) bool {
	if i > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:i])
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return false
		}
	}
	rest := s[i:]
	for _, p := range []string{"http://", "https://", "www."} {
		if len(rest) >= len(p) && strings.EqualFold(rest[:len(p)], p) {
			return true
		}
	}
	return false
}

// isURLEnd reports whether c ends a URL in text.
func isURLEnd(c byte) bool {
	return c <= ' ' || c == '<' || c == '>' || c == '"' || c == '\''
}

// isASCIIAlnum reports whether c is an ASCII letter or digit.
func isASCIIAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'z'
}
