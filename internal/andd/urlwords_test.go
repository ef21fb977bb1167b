package andd

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// urlWordsReference is urlWords written plainly (strings.FieldsFuncSeq,
// new maps): the definition the faster one is checked against.
func urlWordsReference(doc *mime.Document) (words map[string]bool, hosts []string) {
	if doc == nil || (len(doc.URLs) == 0 && len(doc.Hosts) == 0) {
		return nil, nil
	}
	words = make(map[string]bool)
	add := func(s string) {
		for w := range strings.FieldsFuncSeq(strings.ToLower(s), func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r)
		}) {
			if len(w) >= 3 {
				words[w] = true
			}
		}
	}
	for _, u := range doc.URLs {
		if len(u) > 2048 {
			u = u[:2048]
		}
		add(u)
	}
	seen := map[string]bool{}
	for _, h := range doc.Hosts {
		add(h)
		if rh := registeredHost(strings.ToLower(h)); rh != "" && !seen[rh] {
			seen[rh] = true
			hosts = append(hosts, hostPrefix+rh)
		}
	}
	return words, hosts
}

// joiner returns a function that joins n pieces drawn at random by r.
func joiner(r *rand.Rand, pieces []string) func(n int) string {
	return func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return b.String()
	}
}

// TestURLWordsMatchesReference: urlWords (through one scratch reused, as
// the signer does) equals urlWordsReference on random URLs and hosts of
// ASCII, accented letters, digits, separators and invalid UTF-8.
func TestURLWordsMatchesReference(t *testing.T) {
	pieces := []string{"http://", "https://", "www.", "Example", "COM", ".", "/", "?", "=", "&", "-", "_", "%20", "x", "ab",
		"abc", "Ünïcödé", "İstanbul", "中文", "١٢٣", "42", "\xff", "\xe2\x82", ".co.uk", "#", ":8080"}
	r := rand.New(rand.NewPCG(31, 32))
	part := joiner(r, pieces)
	var sc scratch
	for i := range 2000 {
		doc := &mime.Document{}
		for range r.IntN(6) {
			doc.URLs = append(doc.URLs, part(r.IntN(20)))
		}
		if i%50 == 0 {
			doc.URLs = append(doc.URLs, part(1500)) // beyond the 2048 bytes read
		}
		for range r.IntN(4) {
			doc.Hosts = append(doc.Hosts, part(r.IntN(6)))
		}
		gw, gh := sc.urlWords(doc)
		ww, wh := urlWordsReference(doc)
		if gw.len() != len(ww) || !slices.Equal(gh, wh) {
			t.Fatalf("document %d %q %q: %d words, hosts %q, want %v %q", i, doc.URLs, doc.Hosts, gw.len(), gh, ww, wh)
		}
		for w := range ww {
			if !gw.has(w) {
				t.Fatalf("document %d %q %q: %q not among the words", i, doc.URLs, doc.Hosts, w)
			}
			if up := strings.ToUpper(w); up != w && gw.has(up) {
				t.Fatalf("document %d: %q among the words", i, up)
			}
		}
		for _, w := range []string{"zzzz", "ab", "exampl"} {
			if gw.has(w) != ww[w] {
				t.Fatalf("document %d %q %q: has(%q) %v", i, doc.URLs, doc.Hosts, w, !ww[w])
			}
		}
		sc.clearURLWords()
	}
	for i := range 2000 {
		s := part(r.IntN(12))
		var got []string
		eachAlnumWord(s, func(w string) { got = append(got, w) })
		want := strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("case %d %q: words %q, want %q", i, s, got, want)
		}
	}
}

// registeredHostReference is registeredHost written with strings.Split.
func registeredHostReference(host string) string {
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > 253 {
		return ""
	}
	labels := strings.Split(host, ".")
	n := 2
	if len(labels) >= 3 && len(labels[len(labels)-2]) <= 3 && len(labels[len(labels)-1]) == 2 {
		n = 3
	}
	if len(labels) < n {
		return host
	}
	return strings.Join(labels[len(labels)-n:], ".")
}

// TestRegisteredHostMatchesReference compares registeredHost with its
// plain form on random hosts of short and long labels, empty labels and
// trailing dots.
func TestRegisteredHostMatchesReference(t *testing.T) {
	pieces := []string{".", ".", "a", "co", "uk", "com", "mail", "example", "xn--p1ai", "中文", ""}
	r := rand.New(rand.NewPCG(33, 34))
	part := joiner(r, pieces)
	for i := range 20000 {
		var b strings.Builder
		b.WriteString(part(r.IntN(9)))
		if i%100 == 0 {
			b.WriteString(strings.Repeat("a.", 127))
		}
		h := b.String()
		if got, want := registeredHost(h), registeredHostReference(h); got != want {
			t.Fatalf("registeredHost(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestHasFirstWord: hasFirstWord(t) equals has(firstWord(t)) for terms
// that are, or start with, words of the set, and for others.
func TestHasFirstWord(t *testing.T) {
	pieces := []string{"abc", "abd", "com", "example", "xy", "Ünï", "中文", " ", "ab", "c", "42", "http", "\xff"}
	r := rand.New(rand.NewPCG(35, 36))
	part := joiner(r, pieces)
	var s wordSet
	for i := range 500 {
		for range r.IntN(8) {
			s.addWords(part(1 + r.IntN(4)))
		}
		for range 50 {
			term := part(r.IntN(5))
			if got, want := s.hasFirstWord(term), s.has(firstWord(term)); got != want {
				t.Fatalf("set %d: hasFirstWord(%q) = %v, has(firstWord) %v", i, term, got, want)
			}
		}
		s.reset()
	}
}
