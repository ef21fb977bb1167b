package shortsig

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// The signing of an earlier version, written plainly (a unit at a time
// through closures, a map per message, the body's units read again):
// the definition the faster sign is checked against.

func (s *Signer) signReference(doc *mime.Document, unsigned bool) Result {
	var r Result
	if doc == nil {
		return r
	}
	o := &s.opts
	subj := refFirstUnits(doc.Subject, o.MaxUnits)
	// The body's units: all of them for a short message; for a long one
	// (known once it has more than MaxTextUnits), only until the lead is
	// complete, so that a long text costs little. seen holds every unit
	// of the text, with inLead set for those of the lead.
	const inText, inLead = 1, 2
	leadMax := o.LeadLevels[len(o.LeadLevels)-1]
	seen := make(map[string]uint8, o.MaxTextUnits+1)
	for _, u := range subj {
		seen[u] = inText
	}
	lead := make([]string, 0, leadMax)
	refEachUnit(doc.Text, func(u string) bool {
		f := seen[u]
		if len(lead) < leadMax && f&inLead == 0 {
			f |= inLead
			lead = append(lead, u)
		}
		seen[u] = f | inText
		return len(seen) < o.MaxUnits && (unsigned || len(seen) <= o.MaxTextUnits || len(lead) < leadMax)
	})
	r.Units = len(seen)
	r.Short = unsigned || len(seen) <= o.MaxTextUnits
	if r.Short {
		// Media and links matter to short messages only.
		media := s.media(doc.Parts)
		links, domains, linksUsable := s.links(new(scratch), doc.URLs)
		r.Media, r.Links = len(media), len(links)
		text := make([]string, 0, len(seen))
		for u := range seen {
			text = append(text, u)
		}
		slices.Sort(text)
		mediaUsable := len(media) > 0
		textUsable := len(text) >= o.MinTextUnits
		if mediaUsable || linksUsable || textUsable {
			r.Keys = append(r.Keys, key(KindAll, media, links, text))
		}
		if mediaUsable && !textUsable {
			r.Keys = append(r.Keys, key(KindMedia, media, domains))
		}
		if linksUsable && len(doc.Parts) == 0 && !textUsable {
			r.Keys = append(r.Keys, key(KindLinks, links))
		}
		if rest, ok := afterFirstLine(doc.Text); ok {
			if bu := sortedSet(refFirstUnits(rest, o.MaxUnits)); len(bu) >= o.MinTextUnits {
				r.Keys = append(r.Keys, key(KindBody, media, domains, bu))
				r.SignedNote = len(sortedSet(refFirstUnits(rest[:mime.SignatureAt(rest)], o.MaxUnits))) < o.MinTextUnits
			}
		}
	}
	if doc.List == "" {
		subjSet := sortedSet(subj)
		for i := len(o.LeadLevels) - 1; i >= 0; i-- {
			n := o.LeadLevels[i]
			if len(lead) < n {
				continue
			}
			k := key(KindLead, subjSet, lead[:n])
			if len(r.Keys) > 0 && r.Keys[len(r.Keys)-1][2] == byte(KindLead) {
				r.Lookup = append(r.Lookup, k)
			} else {
				r.Keys = append(r.Keys, k)
			}
		}
	}
	return r
}

func refFirstUnits(s string, max int) []string {
	seen := map[string]bool{}
	var out []string
	refEachUnit(s, func(u string) bool {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
		return len(out) < max
	})
	return out
}

func refEachUnit(s string, f func(u string) bool) {
	read := 0
	f0 := f
	f = func(u string) bool {
		read++
		return f0(u) && read < maxUnitsRead
	}
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
				if !f(s[prev : j+sz]) {
					return
				}
				prev = j
				j += sz
				n++
			}
			if n == 1 && !f(s[i:j]) {
				return
			}
			i = j
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			j := i
			runes, digits := 0, 0
			for j < len(s) {
				if c := s[j]; c < utf8.RuneSelf {
					// fast path: ASCII letters and digits
					if !isASCIIAlnum(c) {
						break
					}
					if c <= '9' {
						digits++
					}
					runes++
					j++
					continue
				}
				r2, sz := utf8.DecodeRuneInString(s[j:])
				if isUnspaced(r2) || !(unicode.IsLetter(r2) || unicode.IsDigit(r2) || unicode.IsMark(r2)) {
					break
				}
				if unicode.IsDigit(r2) {
					digits++
				}
				runes++
				j += sz
			}
			if runes >= 2 && runes <= maxUnitRunes && digits <= 1 && !f(strings.ToLower(s[i:j])) {
				return
			}
			i = j
		default:
			i += size
		}
	}
}

// TestSignMatchesReference: sign equals signReference (Sign and
// SignUnsigned, default and small bounds) on the golden documents, the
// samples of internal/mime/testdata and random texts of words, CJK runs,
// URLs, repeats and blank lines, short and long.
func TestSignMatchesReference(t *testing.T) {
	var docs []*mime.Document
	for _, g := range goldenDocs {
		docs = append(docs, &g.doc)
	}
	files, _ := filepath.Glob("../mime/testdata/*.eml")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, mime.Parse(raw, mime.Options{}))
	}
	pieces := []string{"Hello", "world", "WORLD", "x2", "ab12", "中文字符", "カタカナ", "Привет", " ", " ", " ", "\n", "\n\n", ", ",
		"http://example.com/a?id=1 ", "www.example.org ", "Ünïcödé", "a", "42", "\t", "seven", "eight", "nine", "ten"}
	r := rand.New(rand.NewPCG(21, 22))
	for i := range 400 {
		var b strings.Builder
		n := []int{0, 3, 10, 40, 150, 1200, 20000}[i%7]
		for range n {
			p := pieces[r.IntN(len(pieces))]
			if r.IntN(4) == 0 {
				p = fmt.Sprintf("w%c%c%d", 'a'+r.IntN(26), 'a'+r.IntN(26), r.IntN(3))
			}
			b.WriteString(p)
		}
		d := &mime.Document{Subject: pieces[r.IntN(len(pieces))] + " offer", Text: b.String()}
		if i%5 == 0 {
			d.URLs = []string{"http://pills.example.com/buy?u=1"}
		}
		if i%11 == 0 {
			d.List = "users"
		}
		docs = append(docs, d)
	}
	for _, o := range []Options{{}, {MaxUnits: 70, MaxTextUnits: 10, MinTextUnits: 2}, {LeadLevels: []int{2, 5}}} {
		s := New(o)
		for i, d := range docs {
			for _, unsigned := range []bool{false, true} {
				got, want := s.sign(d, unsigned), s.signReference(d, unsigned)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("options %+v, document %d (unsigned %v, %d bytes of text): sign %+v, reference %+v", o, i, unsigned, len(d.Text), got, want)
				}
			}
		}
	}
}

// TestURLStartMatchesReference: isURLStart equals urlStartsAt (the test
// without its shortcut) on the prefixes in every case, cut short, and
// with characters that fold to ASCII letters (K, ſ) or look like them,
// at every offset.
func TestURLStartMatchesReference(t *testing.T) {
	pieces := []string{"h", "H", "t", "T", "p", "P", "s", "S", "w", "W", ":", "/", ".", " ", "x", "ſ", "K", "ｔ", "\xff", "é"}
	r := rand.New(rand.NewPCG(31, 32))
	for range 20000 {
		var b strings.Builder
		for range 1 + r.IntN(10) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		for i := range len(s) {
			if got, want := isURLStart(s, i), urlStartsAt(s, i); got != want {
				t.Fatalf("isURLStart(%q, %d) = %v, want %v", s, i, got, want)
			}
		}
	}
	for _, s := range []string{"http://a", "HTTPS://a", "WwW.a", " www.x", "xhttp://a", "hTtP:/", "www"} {
		for i := range len(s) {
			if got, want := isURLStart(s, i), urlStartsAt(s, i); got != want {
				t.Fatalf("isURLStart(%q, %d) = %v, want %v", s, i, got, want)
			}
		}
	}
}
