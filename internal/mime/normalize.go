package mime

import (
	"bytes"
	"slices"
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

// normalizer holds scratch buffers for normalizeAppend and the state of
// the normalization budget of one message.
type normalizer struct {
	clean []byte
	nfkc  []byte
	// memo holds the NFKC form of short segments (a starter and the marks
	// that follow it) already met, so that text repeating a few
	// compatibility characters (U+FDFA, ligatures, fullwidth letters, the
	// same accented letter in decomposed form) costs a map lookup per
	// segment instead of a pass through the Unicode normalizer.
	memo map[string]string
	// composed counts the bytes that went through the Unicode normalizer
	// (golang.org/x/text/unicode/norm) for this message; maxCompose bounds
	// it (0: defaultMaxComposeBytes).
	composed   int
	maxCompose int
	// cut is set when a budget dropped text.
	cut bool
	// work counts the bytes examined, for the tests of linearity (the
	// parser zeroes it for each message).
	work int
	// done, when set, is asked every 64 KiB of input whether to stop
	// (the parse's context is done); stopping sets cut.
	done func() bool
}

// Bounds of normalizer.memo.
const (
	maxMemoSegment = 32
	maxMemoEntries = 4096
)

// reset prepares nz for a new message whose text may send maxCompose
// bytes through the Unicode normalizer.
func (nz *normalizer) reset(maxCompose int) {
	nz.composed, nz.maxCompose = 0, maxCompose
	nz.cut = false
	if len(nz.memo) > maxMemoEntries {
		clear(nz.memo)
	}
}

// normalizeAppend appends the normalized form of s to dst, stopping when
// dst reaches limit bytes (the rest of s is dropped and nz.cut is set):
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
//
// The work is linear in len(s) and the output bounded by limit whatever
// the input: NFKC expands some characters 18-fold (U+FDFA), so the
// expansion stops at limit rather than after it, and the bytes sent
// through the Unicode normalizer are bounded by nz.maxCompose. A cut
// text ends at a word boundary when one is near.
func (nz *normalizer) normalizeAppend(dst, s []byte, limit int) []byte {
	const chunk = 64
	// The length of the ASCII prefix of s, found in one pass: its chunks
	// are copied without a test of their own.
	ascii := asciiPrefix(s)
	if ascii == len(s) && len(s) < 64<<10 && len(dst)+len(s) <= limit {
		// What the loop does with such text (nz.done is not yet due).
		nz.work += len(s)
		return append(dst, s...)
	}
	start := len(dst)
	next := len(s) - 64<<10 // when to ask nz.done next
	for len(s) > 0 {
		if len(dst) >= limit {
			nz.cut = true
			break
		}
		if len(s) <= next && nz.done != nil {
			if nz.done() {
				nz.cut = true
				break
			}
			next = len(s) - 64<<10
		}
		n := len(s)
		if n > 2*chunk {
			if k := bytes.IndexByte(s[chunk:], ' '); k >= 0 {
				n = chunk + k + 1
			}
		}
		nz.work += n
		if n <= ascii || isASCII(s[:n]) {
			dst = append(dst, s[:n]...)
		} else {
			var stop bool
			dst, stop = nz.normalizeSlow(dst, s[:n], limit)
			if stop {
				nz.cut = true
				break
			}
		}
		s = s[n:]
		ascii = max(0, ascii-n)
	}
	if len(dst) > limit {
		nz.cut = true
		dst = cutText(dst, start, limit)
	}
	return dst
}

// cutText shortens b to at most limit bytes, not below start, at a rune
// boundary, and drops the word the cut went through when a word boundary
// is within reach.
func cutText(b []byte, start, limit int) []byte {
	if limit < start {
		limit = start
	}
	if len(b) <= limit {
		return b
	}
	i := limit
	for i > start && !utf8.RuneStart(b[i]) {
		i--
	}
	for j := i; j > start && j > i-64; {
		r, size := utf8.DecodeLastRune(b[start:j])
		if !isWordRune(r) {
			i = j
			break
		}
		j -= size
	}
	return b[:i]
}

// normalizeSlow is normalizeAppend for a chunk holding non-ASCII bytes.
// stop reports that a budget ended the text inside the chunk.
func (nz *normalizer) normalizeSlow(dst, s []byte, limit int) (_ []byte, stop bool) {
	tab := bmpInfo()
	info := func(r rune) uint8 {
		if r < 0x10000 {
			return tab[r]
		}
		return astralInfo(r)
	}
	// 1. invisible characters, invalid UTF-8; note whether steps 2 and 3
	// can change anything.
	c := nz.clean[:0]
	if cap(c) < len(s) {
		c = make([]byte, 0, len(s)+len(s)/8) // one allocation, not a series of growths
	}
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
	nz.work += len(c)
	// 2. NFKC, bounded: step 3 never lengthens the text, so what NFKC
	// writes beyond the room left in dst would be cut anyway.
	if !inert {
		if n := norm.NFKC.QuickSpan(c); n < len(c) {
			room := limit - len(dst)
			nz.nfkc, stop = nz.nfkcAppend(slices.Grow(nz.nfkc[:0], min(room, 2*len(c))+64), c, n, room)
			c = nz.nfkc
			nz.work += len(c)
			fold = true
		}
	}
	if !fold {
		return append(dst, c...), stop
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
	return dst, stop
}

// nfkcAppend appends the NFKC form of c to dst, given that c[:n] is
// already normalized, and stops (stop true) once it has written room
// bytes or when the compose budget runs out. Only the stretches that need
// it are normalized: a stretch ends before a rune that NFKC leaves alone
// whatever surrounds it. A stretch is then cut into segments, each a rune
// that nothing before it can combine with (norm.Properties.BoundaryBefore)
// and the runes that follow it up to the next such rune: NFKC of the
// stretch is NFKC of each segment in turn, which is what the Unicode
// normalizer computes too. Short segments are memoized.
func (nz *normalizer) nfkcAppend(dst, c []byte, n, room int) (_ []byte, stop bool) {
	for n < len(c) {
		dst = append(dst, c[:n]...)
		c = c[n:]
		// c[0] starts a stretch that may change; find its end.
		_, m := utf8.DecodeRune(c)
		seg := 0
		for m < len(c) {
			b := c[m]
			if b < utf8.RuneSelf {
				break // ASCII is inert
			}
			r, size := utf8.DecodeRune(c[m:])
			if runeInfo(r)&rfInert != 0 {
				break
			}
			if nfkcBoundary(r) {
				if dst, stop = nz.segment(dst, c[seg:m]); stop {
					return dst, true
				}
				seg = m
				if len(dst) >= room {
					return dst, true
				}
			}
			m += size
		}
		if dst, stop = nz.segment(dst, c[seg:m]); stop {
			return dst, true
		}
		if len(dst) >= room {
			return dst, true
		}
		c = c[m:]
		n = norm.NFKC.QuickSpan(c)
	}
	return append(dst, c...), false
}

// segment appends the NFKC form of the segment s to dst, from the memo or
// through the Unicode normalizer while the compose budget lasts (stop is
// true when it has run out).
func (nz *normalizer) segment(dst, s []byte) (_ []byte, stop bool) {
	// Only a segment that starts with a boundary is independent of what
	// precedes it (the normalizer may rewrite the tail of dst otherwise).
	r, _ := utf8.DecodeRune(s)
	memo := len(s) <= maxMemoSegment && nfkcBoundary(r)
	if memo {
		if v, ok := nz.memo[string(s)]; ok {
			return append(dst, v...), false
		}
	}
	maxCompose := nz.maxCompose
	if maxCompose <= 0 {
		maxCompose = defaultMaxComposeBytes
	}
	if nz.composed+len(s) > maxCompose {
		return dst, true
	}
	nz.composed += len(s)
	start := len(dst)
	dst = norm.NFKC.Append(dst, s...)
	nz.work += len(s) + len(dst) - start
	if memo && len(nz.memo) < maxMemoEntries {
		if nz.memo == nil {
			nz.memo = make(map[string]string)
		}
		nz.memo[string(s)] = string(dst[start:])
	}
	return dst, false
}
