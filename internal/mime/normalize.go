package mime

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// isInvisible reports whether r is removed by normalization: zero-width
// characters, the soft hyphen, invisible formatting and joiner
// characters, variation selectors and Unicode tag characters. These render
// as nothing and are a classic way to break words apart.
func isInvisible(r rune) bool {
	switch {
	case r < 0xad:
		return false
	case r == 0xad, r == 0x34f, r == 0x61c, r == 0x115f, r == 0x1160,
		r == 0x17b4, r == 0x17b5, r == 0x180e, r == 0x3164, r == 0xfeff, r == 0xffa0:
		return true
	case 0x180b <= r && r <= 0x180d:
		return true
	case 0x200b <= r && r <= 0x200f:
		return true
	case 0x202a <= r && r <= 0x202e:
		return true
	case 0x2060 <= r && r <= 0x206f:
		return true
	case 0xfe00 <= r && r <= 0xfe0f:
		return true
	case 0x1d173 <= r && r <= 0x1d17a:
		return true
	case 0xe0000 <= r && r <= 0xe0fff:
		return true
	}
	return false
}

// homoglyph returns the Latin letter that the Cyrillic, Greek or Armenian
// letter r looks like, or 0.
func homoglyph(r rune) rune {
	switch r {
	// Cyrillic lower case
	case 'а':
		return 'a'
	case 'е':
		return 'e'
	case 'о':
		return 'o'
	case 'р':
		return 'p'
	case 'с':
		return 'c'
	case 'у':
		return 'y'
	case 'х':
		return 'x'
	case 'і':
		return 'i'
	case 'ј':
		return 'j'
	case 'ѕ':
		return 's'
	case 'ԁ':
		return 'd'
	case 'ԛ':
		return 'q'
	case 'ԝ':
		return 'w'
	case 'һ':
		return 'h'
	case 'ӏ':
		return 'l'
	case 'к':
		return 'k'
	case 'ү':
		return 'y'
	case 'ɡ':
		return 'g'
	// Cyrillic upper case
	case 'А':
		return 'A'
	case 'В':
		return 'B'
	case 'Е':
		return 'E'
	case 'К':
		return 'K'
	case 'М':
		return 'M'
	case 'Н':
		return 'H'
	case 'О':
		return 'O'
	case 'Р':
		return 'P'
	case 'С':
		return 'C'
	case 'Т':
		return 'T'
	case 'Х':
		return 'X'
	case 'У', 'Ү':
		return 'Y'
	case 'І', 'Ӏ':
		return 'I'
	case 'Ј':
		return 'J'
	case 'Ѕ':
		return 'S'
	case 'Ԛ':
		return 'Q'
	case 'Ԝ':
		return 'W'
	case 'Һ':
		return 'H'
	// Greek
	case 'Α':
		return 'A'
	case 'Β':
		return 'B'
	case 'Ε':
		return 'E'
	case 'Ζ':
		return 'Z'
	case 'Η':
		return 'H'
	case 'Ι':
		return 'I'
	case 'Κ':
		return 'K'
	case 'Μ':
		return 'M'
	case 'Ν':
		return 'N'
	case 'Ο':
		return 'O'
	case 'Ρ':
		return 'P'
	case 'Τ':
		return 'T'
	case 'Υ':
		return 'Y'
	case 'Χ':
		return 'X'
	case 'α':
		return 'a'
	case 'ε':
		return 'e'
	case 'ι':
		return 'i'
	case 'κ':
		return 'k'
	case 'ν':
		return 'v'
	case 'ο':
		return 'o'
	case 'ρ':
		return 'p'
	case 'τ':
		return 't'
	case 'υ':
		return 'u'
	case 'χ':
		return 'x'
	case 'γ':
		return 'y'
	// Armenian
	case 'օ':
		return 'o'
	case 'ս':
		return 'u'
	case 'հ':
		return 'h'
	case 'ո':
		return 'n'
	}
	return 0
}

func isLatinLetter(r rune) bool {
	if r < 0x80 {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
	}
	return unicode.Is(unicode.Latin, r)
}

// isWordRune reports whether r belongs to a word: a letter, a digit, or a
// combining mark continuing a word.
func isWordRune(r rune) bool {
	if r < 0x80 {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)
}

// normalizer holds scratch buffers for normalizeAppend.
type normalizer struct {
	clean []byte
	nfkc  []byte
}

// normalizeAppend appends the normalized form of s to dst:
//
//  1. invisible characters (zero-width, soft hyphen, …) are removed;
//  2. the text is put in Unicode NFKC (fullwidth, mathematical and circled
//     letters, ligatures, no-break spaces become plain ones);
//  3. inside a word that contains at least one Latin letter, Cyrillic,
//     Greek and Armenian look-alikes are folded to Latin and the combining
//     marks that NFKC could not compose are dropped ("pаypаl" with
//     Cyrillic а becomes "paypal", "v̲i̲a̲" becomes "via"), while words with
//     no Latin letter (genuine Russian or Greek text) are left untouched.
//
// Case is kept. Pure ASCII input is copied as is.
func (nz *normalizer) normalizeAppend(dst, s []byte) []byte {
	if isASCII(s) {
		return append(dst, s...)
	}
	// 1. invisible characters; invalid UTF-8 becomes U+FFFD.
	c := nz.clean[:0]
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			c = append(c, b)
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			c = append(c, "\uFFFD"...) // invalid UTF-8
		case !isInvisible(r):
			c = append(c, s[i:i+size]...)
		}
		i += size
	}
	nz.clean = c
	// 2. NFKC.
	if !norm.NFKC.IsNormal(c) {
		nz.nfkc = norm.NFKC.Append(nz.nfkc[:0], c...)
		c = nz.nfkc
	}
	// 3. homoglyphs, word by word.
	for i := 0; i < len(c); {
		b := c[i]
		if b < utf8.RuneSelf && !isWordRune(rune(b)) {
			dst = append(dst, b)
			i++
			continue
		}
		// Find the word.
		j := i
		latin, glyph, marks := false, false, false
		for j < len(c) {
			r, size := rune(c[j]), 1
			if r >= utf8.RuneSelf {
				r, size = utf8.DecodeRune(c[j:])
			}
			if !isWordRune(r) {
				break
			}
			if r < utf8.RuneSelf {
				if r > '9' {
					latin = true
				}
			} else if homoglyph(r) != 0 {
				glyph = true
			} else if unicode.Is(unicode.Mn, r) {
				marks = true
			} else if !latin && unicode.Is(unicode.Latin, r) {
				latin = true
			}
			j += size
		}
		if j == i { // a non-word rune
			_, size := utf8.DecodeRune(c[i:])
			dst = append(dst, c[i:i+size]...)
			i += size
			continue
		}
		if !latin || (!glyph && !marks) {
			dst = append(dst, c[i:j]...)
			i = j
			continue
		}
		for k := i; k < j; {
			r, size := utf8.DecodeRune(c[k:])
			k += size
			if g := homoglyph(r); g != 0 {
				dst = append(dst, byte(g))
				continue
			}
			if r >= 0x300 && unicode.Is(unicode.Mn, r) {
				continue
			}
			dst = utf8.AppendRune(dst, r)
		}
		i = j
	}
	return dst
}
