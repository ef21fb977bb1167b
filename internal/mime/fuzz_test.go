package mime

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// FuzzParse checks that Parse never panics (the recover in Parse turns a
// panic into a warning, so a warning mentioning an internal error fails
// the fuzzer too), always returns valid UTF-8, and that Tokenize and
// UnwrapARF accept whatever Parse accepted. Seeds: testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := Parse(raw, Options{MaxBytes: 1 << 20, MaxParts: 64})
		for _, w := range d.Warnings {
			if strings.HasPrefix(w, "internal error") {
				t.Fatalf("panic inside Parse: %s", w)
			}
		}
		if !utf8.ValidString(d.Text) || !utf8.ValidString(d.Subject) {
			t.Fatalf("invalid UTF-8 in document: %q / %q", d.Subject, d.Text)
		}
		toks := Tokenize(d, TokenOptions{})
		for _, tok := range toks {
			if n := utf8.RuneCountInString(tok.Term); n < 4 || n > 40 {
				t.Fatalf("term %q out of length bounds", tok.Term)
			}
		}
		if want, got := UniqueTerms(toks), UniqueTermsOf(d, TokenOptions{}); !slices.Equal(got, want) {
			t.Fatalf("UniqueTermsOf = %q, want %q", got, want)
		}
		checkAnalyze(t, d, toks, TokenOptions{})
		_, _ = UnwrapARF(raw)
	})
}

// FuzzHTML checks that HTML extraction never panics and yields valid
// UTF-8 text without the content of script elements it was given as a
// marker. Seeds: testdata/fuzz/FuzzHTML.
func FuzzHTML(f *testing.F) {
	f.Fuzz(func(t *testing.T, html []byte) {
		text, urls := VisibleTextFromHTML(html)
		if !utf8.ValidString(text) {
			t.Fatalf("invalid UTF-8 text %q", text)
		}
		for _, u := range urls {
			if _, ok := urlHost(u); !ok {
				t.Fatalf("non-web URL %q collected", u)
			}
		}
		checkTagScanner(t, html)
	})
}

// crlf converts line breaks as the tokenizer does in attribute values.
func crlf(b []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
}

// checkTagScanner compares tagScanner with the tokenizer's own TagName
// and TagAttr on every tag of b.
func checkTagScanner(t *testing.T, b []byte) {
	z := html.NewTokenizer(bytes.NewReader(b))
	fix := func(v []byte) string { return strings.ReplaceAll(string(v), "\x00", "\uFFFD") }
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken && tt != html.EndTagToken {
			continue
		}
		var ts tagScanner
		raw := bytes.Clone(z.Raw())
		name := ts.name(raw)
		var lname []byte
		lookupAtom(name, &lname)
		wantName, hasAttr := z.TagName()
		if fix(lname) != string(wantName) {
			t.Fatalf("tag %q: name %q, tokenizer says %q", raw, lname, wantName)
		}
		if tt == html.EndTagToken {
			continue
		}
		seen := map[string]bool{}
		for hasAttr {
			var k, v []byte
			k, v, hasAttr = z.TagAttr()
			// The tokenizer keeps the first of duplicate attributes.
			var key, val []byte
			for {
				var ok bool
				key, val, ok = ts.next()
				if !ok {
					t.Fatalf("tag %q: scanner ends before attribute %q", raw, k)
				}
				var lk []byte
				lookupAtom(key, &lk)
				if !seen[string(lk)] {
					break
				}
			}
			var lk []byte
			lookupAtom(key, &lk)
			seen[string(lk)] = true
			var lkey []byte
			lookupAtom(key, &lkey) // ASCII lower-casing, as the tokenizer does
			if fix(lkey) != string(k) || html.UnescapeString(fix(crlf(val))) != string(v) {
				t.Fatalf("tag %q: attribute %q=%q, tokenizer says %q=%q", raw, key, val, k, v)
			}
		}
	}
}
