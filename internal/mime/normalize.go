package mime

import (
	"bytes"
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

// isWordRune reports whether r belongs to a word: a letter, a digit, or a
// combining mark continuing a word.
func isWordRune(r rune) bool {
	if r < 0x80 {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return runeInfo(r)&rcClass != rcNone
}

// normalizer holds scratch buffers for normalizeAppend.
type normalizer struct {
	clean []byte
	nfkc  []byte
}

// normalizeAppend appends the normalized form of s to dst:
//
//  1. invisible characters (zero-width, soft hyphen, …) are removed and
//     invalid UTF-8 becomes U+FFFD;
//  2. the text is put in Unicode NFKC (fullwidth, mathematical and circled
//     letters, ligatures, no-break spaces become plain ones);
//  3. inside a word that contains at least one Latin letter, Cyrillic,
//     Greek and Armenian look-alikes are folded to Latin and the combining
//     marks that NFKC could not compose are dropped ("pаypаl" with
//     Cyrillic а becomes "paypal", "v̲i̲a̲" becomes "via"), while words with
//     no Latin letter (genuine Russian or Greek text) are left untouched.
//
// Case is kept. Pure ASCII input is copied as is: the text is processed in
// chunks of about 64 bytes cut after a space (a space ends a word and
// NFKC never joins it with what follows, so chunks are independent), and
// chunks without a non-ASCII byte are copied in bulk.
func (nz *normalizer) normalizeAppend(dst, s []byte) []byte {
	const chunk = 64
	for len(s) > 0 {
		n := len(s)
		if n > 2*chunk {
			if k := bytes.IndexByte(s[chunk:], ' '); k >= 0 {
				n = chunk + k + 1
			}
		}
		if isASCII(s[:n]) {
			dst = append(dst, s[:n]...)
		} else {
			dst = nz.normalizeSlow(dst, s[:n])
		}
		s = s[n:]
	}
	return dst
}

// normalizeSlow is normalizeAppend for a chunk holding non-ASCII bytes.
func (nz *normalizer) normalizeSlow(dst, s []byte) []byte {
	tab := bmpInfo()
	info := func(r rune) uint8 {
		if r < 0x10000 {
			return tab[r]
		}
		return computeRuneInfo(r)
	}
	// 1. invisible characters, invalid UTF-8; note whether steps 2 and 3
	// can change anything.
	c := nz.clean[:0]
	inert, fold := true, false
	// Step 3 is needed only for a word that mixes Latin letters with
	// look-alikes or holds stray marks; track that per word here.
	wordLatin, wordGlyph := false, false
	endWord := func() {
		if wordLatin && wordGlyph {
			fold = true
		}
		wordLatin, wordGlyph = false, false
	}
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case 'a' <= b|0x20 && b|0x20 <= 'z':
				wordLatin = true
			case '0' <= b && b <= '9':
			default:
				endWord()
			}
			c = append(c, b)
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			endWord()
			c = append(c, "\uFFFD"...)
			i++
			continue
		}
		if r == 0xa0 { // no-break space, everywhere in HTML: NFKC maps it to a space
			endWord()
			c = append(c, ' ')
			i += size
			continue
		}
		f := info(r)
		i += size
		if f&rfInvisible != 0 {
			continue
		}
		if f&rfInert == 0 {
			inert = false
		}
		switch {
		case f&rcClass == rcNone:
			endWord()
		case f&(rfHomoglyph|rfMn) != 0:
			wordGlyph = true
			if f&rfLatin != 0 {
				wordLatin = true
			}
		case f&rfLatin != 0:
			wordLatin = true
		}
		c = utf8.AppendRune(c, r)
	}
	endWord()
	nz.clean = c
	// 2. NFKC.
	if !inert {
		if n := norm.NFKC.QuickSpan(c); n < len(c) {
			nz.nfkc = nfkcAppend(nz.nfkc[:0], c, n, info)
			c = nz.nfkc
			fold = true
		}
	}
	if !fold {
		return append(dst, c...)
	}
	// 3. homoglyphs and stray marks, word by word.
	for i := 0; i < len(c); {
		b := c[i]
		if b < utf8.RuneSelf && !isWordRune(rune(b)) {
			dst = append(dst, b)
			i++
			continue
		}
		// Find the word.
		j := i
		latin, glyph := false, false
		for j < len(c) {
			r, size := rune(c[j]), 1
			if r >= utf8.RuneSelf {
				r, size = utf8.DecodeRune(c[j:])
			} else if !isWordRune(r) {
				break
			} else if r > '9' {
				latin = true
				j++
				continue
			}
			f := info(r)
			if f&rcClass == rcNone {
				break
			}
			if f&rfLatin != 0 {
				latin = true
			}
			if f&(rfHomoglyph|rfMn) != 0 {
				glyph = true
			}
			j += size
		}
		if j == i { // a non-word rune
			_, size := utf8.DecodeRune(c[i:])
			dst = append(dst, c[i:i+size]...)
			i += size
			continue
		}
		if !latin || !glyph {
			dst = append(dst, c[i:j]...)
			i = j
			continue
		}
		for k := i; k < j; {
			r, size := utf8.DecodeRune(c[k:])
			k += size
			if r < utf8.RuneSelf {
				dst = append(dst, byte(r))
				continue
			}
			f := info(r)
			if f&rfHomoglyph != 0 {
				if g := homoglyph(r); g != 0 {
					dst = append(dst, byte(g))
					continue
				}
			}
			if f&rfMn != 0 {
				continue
			}
			dst = utf8.AppendRune(dst, r)
		}
		i = j
	}
	return dst
}

// nfkcAppend appends the NFKC form of c to dst, given that c[:n] is
// already normalized. Only the stretches that need it go through the
// normalizer: a stretch ends before a rune that NFKC leaves alone whatever
// surrounds it.
func nfkcAppend(dst, c []byte, n int, info func(rune) uint8) []byte {
	for n < len(c) {
		dst = append(dst, c[:n]...)
		c = c[n:]
		// c[0] starts a stretch that may change; find its end.
		m := 0
		_, size := utf8.DecodeRune(c)
		m += size
		for m < len(c) {
			b := c[m]
			if b < utf8.RuneSelf {
				break // ASCII is inert
			}
			r, size := utf8.DecodeRune(c[m:])
			if info(r)&rfInert != 0 {
				break
			}
			m += size
		}
		dst = norm.NFKC.Append(dst, c[:m]...)
		c = c[m:]
		n = norm.NFKC.QuickSpan(c)
	}
	return append(dst, c...)
}
