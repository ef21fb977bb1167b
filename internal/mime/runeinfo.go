package mime

import (
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Per-rune properties used by normalization and tokenization, computed
// once for the Basic Multilingual Plane so that the hot loops do one table
// lookup per rune instead of several Unicode range searches. Runes above
// the BMP use the same functions directly.
const (
	rcNone   = 0 // not part of a word
	rcLetter = 1 // a letter that is not upper-case
	rcUpper  = 2 // an upper- or title-case letter
	rcDigit  = 3
	rcMark   = 4 // a combining mark (Mn, Mc): continues a word
	rcClass  = 7 // mask of the classes above

	rfLatin     = 1 << 3 // a Latin letter
	rfHomoglyph = 1 << 4 // homoglyph(r) != 0
	rfInert     = 1 << 5 // NFKC leaves it alone whatever surrounds it
	rfInvisible = 1 << 6 // isInvisible(r)
	rfMn        = 1 << 7 // a non-spacing mark
)

var bmpInfo = sync.OnceValue(func() *[0x10000]uint8 {
	var t [0x10000]uint8
	for r := rune(0); r < 0x10000; r++ {
		t[r] = computeRuneInfo(r)
	}
	return &t
})

func computeRuneInfo(r rune) uint8 {
	var f uint8
	switch {
	case unicode.IsLetter(r):
		f = rcLetter
		if unicode.IsUpper(r) || unicode.IsTitle(r) {
			f = rcUpper
		}
	case unicode.IsDigit(r):
		f = rcDigit
	case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r):
		f = rcMark
	}
	if unicode.Is(unicode.Latin, r) {
		f |= rfLatin
	}
	if homoglyph(r) != 0 {
		f |= rfHomoglyph
	}
	if isInvisible(r) {
		f |= rfInvisible
	}
	if unicode.Is(unicode.Mn, r) {
		f |= rfMn
	}
	if r < 0xd800 || r > 0xdfff {
		var buf [utf8.UTFMax]byte
		s := utf8.AppendRune(buf[:0], r)
		if norm.NFKC.IsNormal(s) && norm.NFKC.Properties(s).BoundaryBefore() {
			f |= rfInert
		}
	}
	return f
}

// runeInfo returns the properties of r.
func runeInfo(r rune) uint8 {
	if r < 0x10000 {
		if r < 0 {
			return 0
		}
		return bmpInfo()[r]
	}
	return astralInfo(r)
}

// astralBlocks caches the properties of runes above the BMP by blocks of
// 256, computed on first use: text of astral letters (mathematical
// alphanumerics, CJK extensions, emoji) would otherwise pay several
// Unicode table searches per rune. Blocks are immutable once stored;
// two goroutines computing the same block store equal values.
var astralBlocks [(utf8.MaxRune + 1) >> 8]atomic.Pointer[astralBlock]

type astralBlock struct {
	info     [256]uint8
	boundary [4]uint64 // see nfkcBoundary
}

func astralBlockOf(r rune) *astralBlock {
	b := astralBlocks[r>>8].Load()
	if b == nil {
		b = new(astralBlock)
		base := r &^ 0xff
		var buf [utf8.UTFMax]byte
		for i := range b.info {
			c := base + rune(i)
			b.info[i] = computeRuneInfo(c)
			if norm.NFKC.Properties(utf8.AppendRune(buf[:0], c)).BoundaryBefore() {
				b.boundary[i>>6] |= 1 << (i & 63)
			}
		}
		astralBlocks[r>>8].Store(b)
	}
	return b
}

// astralInfo returns the properties of a rune above the BMP.
func astralInfo(r rune) uint8 {
	if r > utf8.MaxRune {
		return 0
	}
	return astralBlockOf(r).info[r&0xff]
}

// bmpBoundary marks the BMP runes that start an NFKC segment: nothing
// before them combines with them (norm.Properties.BoundaryBefore).
var bmpBoundary = sync.OnceValue(func() *[0x10000 / 64]uint64 {
	var t [0x10000 / 64]uint64
	var buf [utf8.UTFMax]byte
	for r := rune(0); r < 0x10000; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue
		}
		if norm.NFKC.Properties(utf8.AppendRune(buf[:0], r)).BoundaryBefore() {
			t[r>>6] |= 1 << (r & 63)
		}
	}
	return &t
})

// nfkcBoundary reports whether r starts an NFKC segment.
func nfkcBoundary(r rune) bool {
	if r < utf8.RuneSelf {
		return true
	}
	if r < 0x10000 {
		return bmpBoundary()[r>>6]&(1<<(r&63)) != 0
	}
	if r > utf8.MaxRune {
		return true
	}
	i := r & 0xff
	return astralBlockOf(r).boundary[i>>6]&(1<<(i&63)) != 0
}
