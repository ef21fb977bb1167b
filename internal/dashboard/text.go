package dashboard

import (
	"fmt"
	"strings"
	"unicode"
)

// clean makes attacker-controlled text (a campaign's sample) safe to
// show as text: invalid UTF-8 becomes U+FFFD; bidirectional controls
// (which could make text read backwards, or run over the page's own text)
// and other invisible control characters are shown as [U+XXXX]; with
// oneLine, line breaks and tabs become spaces; at most maxRunes
// characters are kept, then "…". html/template escapes the result; the
// templates also isolate it (<bdi>) for bidirectional text.
func clean(s string, maxRunes int, oneLine bool) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(min(len(s), maxRunes*4))
	n := 0
	for _, r := range s {
		if n >= maxRunes {
			b.WriteString("…")
			break
		}
		switch {
		case r == '\n' || r == '\t':
			if oneLine {
				r = ' '
			}
			b.WriteRune(r)
		case r == '\r':
			continue
		case isBidiControl(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) && r != '\u200d':
			fmt.Fprintf(&b, "[U+%04X]", r)
		default:
			b.WriteRune(r)
		}
		n++
	}
	return b.String()
}

// isBidiControl reports the explicit bidirectional formatting characters
// (embeddings, overrides, isolates, marks).
func isBidiControl(r rune) bool {
	switch {
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069',
		r == '\u200e', r == '\u200f', r == '\u061c':
		return true
	}
	return false
}

// shortHash is a reporter hash as the API shows it.
func shortHash(h uint64) string { return fmt.Sprintf("%016x", h) }
