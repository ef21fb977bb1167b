package qgram

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// sketchReference is Sketcher.Sketch written plainly (a range over each
// text, drop and toLower per character, a table of 2n slots): the
// definition the fast path is checked against.
func sketchReference(o SketchOptions, texts ...string) (Sketch, bool) {
	o = o.withDefaults()
	n := 0
	for _, t := range texts {
		n += len(t)
	}
	n = min(n, o.MaxRunes)
	var sk Sketch
	if n < SketchQ {
		return sk, false
	}
	size := 64
	for size < 2*n {
		size <<= 1
	}
	table := make([]uint64, size)
	mask := uint64(size - 1)
	for i := range sk.Min {
		sk.Min[i] = emptyBin
	}
	var prev uint64
	read, seen := 0, 0
	distinct := uint32(0)
	for _, t := range texts {
		for _, r := range t {
			if read == o.MaxRunes || seen == 8*o.MaxRunes {
				break
			}
			seen++
			if drop(r) {
				continue
			}
			r = toLower(r)
			read++
			k := prev
			prev = (prev<<21 | uint64(r)) & (1<<63 - 1)
			if read < SketchQ {
				continue
			}
			h := sketchHash(k, r)
			if h == 0 {
				h = 1
			}
			j := h & mask
			for table[j] != 0 && table[j] != h {
				j = (j + 1) & mask
			}
			if table[j] == h {
				continue
			}
			table[j] = h
			distinct++
			bin, v := h>>(64-7), uint32(h)
			if v == emptyBin {
				v--
			}
			sk.Min[bin] = min(sk.Min[bin], v)
		}
	}
	if int(distinct) < o.MinGrams {
		return Sketch{}, false
	}
	sk.Size = distinct
	return sk, true
}

// TestSketchMatchesReference: Sketch equals sketchReference on texts of
// every kind (ASCII, accented and CJK letters, upper case, punctuation
// and symbols, invalid UTF-8, NUL, texts over the bounds), split into
// one to three texts, under small and default bounds.
func TestSketchMatchesReference(t *testing.T) {
	pieces := []string{"Hello", "WORLD", " ", "\n", "\t", ",", "!", "$", "€", "Ünïcödé", "ÉCOLE", "中文字", "ｆｕｌｌ",
		"\xff", "\xe2\x82", "\x00", "\u00a0", "\u2028", "ǅ", "İ", "ß", "42", "http://example.com/x?y=1", "--", "_"}
	r := rand.New(rand.NewPCG(11, 12))
	for _, o := range []SketchOptions{{}, {MinGrams: 1, MaxRunes: 16}, {MinGrams: 4, MaxRunes: 300}} {
		s := NewSketcher(o)
		for i := range 600 {
			var b strings.Builder
			for range r.IntN(1 << (i % 12)) {
				b.WriteString(pieces[r.IntN(len(pieces))])
			}
			text := b.String()
			a, c := r.IntN(len(text)+1), r.IntN(len(text)+1)
			a, c = min(a, c), max(a, c)
			for _, texts := range [][]string{{text}, {text[:a], text[a:]}, {text[:a], "\n", text[a:c], text[c:]}} {
				got, ok := s.Sketch(texts...)
				want, wok := sketchReference(o, texts...)
				if ok != wok || got != want {
					t.Fatalf("options %+v, texts %q: Sketch %v %v, reference %v %v", o, texts, ok, got.Size, wok, want.Size)
				}
			}
		}
	}
}
