package mime

import (
	"strings"
	"testing"
	"unicode/utf8"
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
		_ = UniqueTerms(toks)
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
	})
}
