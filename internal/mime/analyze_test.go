package mime

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// analyzeRef is Analyze computed from the token list.
func analyzeRef(toks []Token) (sorted []string, stats map[string]TermStats) {
	stats = make(map[string]TermStats)
	for _, tk := range toks {
		st, ok := stats[tk.Term]
		if !ok {
			st.First = int32(tk.Pos)
		}
		st.TF++
		if tk.Capitalized {
			st.Capitalized++
		}
		if tk.AllCaps {
			st.AllCaps++
		}
		st.InSubject = st.InSubject || tk.InSubject
		stats[tk.Term] = st
	}
	return UniqueTerms(toks), stats
}

// checkAnalyze fails t when Analyze(doc, opts) disagrees with toks =
// Tokenize(doc, opts).
func checkAnalyze(t *testing.T, doc *Document, toks []Token, opts TokenOptions) {
	t.Helper()
	a := Analyze(doc, opts)
	sorted, stats := analyzeRef(toks)
	if !slices.Equal(a.Sorted, sorted) {
		t.Fatalf("Analyze terms = %q, want %q", a.Sorted, sorted)
	}
	if a.Tokens != len(toks) || len(a.Stats) != len(a.Sorted) {
		t.Fatalf("Analyze: %d tokens, %d stats for %d terms; want %d tokens", a.Tokens, len(a.Stats), len(a.Sorted), len(toks))
	}
	for i, term := range a.Sorted {
		if a.Stats[i] != stats[term] {
			t.Fatalf("Analyze stats of %q = %+v, want %+v", term, a.Stats[i], stats[term])
		}
	}
}

func TestAnalyze(t *testing.T) {
	tests := []struct {
		name string
		doc  *Document
		opts TokenOptions
		want map[string]TermStats
	}{
		{"empty", &Document{}, TokenOptions{}, map[string]TermStats{}},
		{"subject first", &Document{Subject: "Cheap PILLS online", Text: "cheap Cheap pills r2d2 ONLINE ab"},
			TokenOptions{},
			map[string]TermStats{
				"cheap":  {TF: 3, First: 0, Capitalized: 2, InSubject: true},
				"pills":  {TF: 2, First: 1, Capitalized: 1, AllCaps: 1, InSubject: true},
				"online": {TF: 2, First: 2, Capitalized: 1, AllCaps: 1, InSubject: true},
			}},
		{"body only", &Document{Text: "Hello HELLO hello wörld WÖRLD"}, TokenOptions{MinLen: 5},
			map[string]TermStats{
				"hello": {TF: 3, First: 0, Capitalized: 2, AllCaps: 1},
				"wörld": {TF: 2, First: 3, Capitalized: 1, AllCaps: 1},
			}},
		{"nil doc", nil, TokenOptions{}, map[string]TermStats{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Analyze(tt.doc, tt.opts)
			if len(a.Sorted) != len(tt.want) {
				t.Fatalf("terms %q, want %d", a.Sorted, len(tt.want))
			}
			for i, term := range a.Sorted {
				if a.Stats[i] != tt.want[term] {
					t.Errorf("%q: %+v, want %+v", term, a.Stats[i], tt.want[term])
				}
			}
			if tt.doc != nil {
				checkAnalyze(t, tt.doc, Tokenize(tt.doc, tt.opts), tt.opts)
			}
		})
	}
}

// TestAnalyzeSamples compares Analyze with Tokenize on every sample
// message and on a document with many terms sharing 6-byte prefixes.
func TestAnalyzeSamples(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.eml")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := Parse(raw, Options{})
		for _, o := range []TokenOptions{{}, {MinLen: 1, MaxDigits: 5}} {
			checkAnalyze(t, d, Tokenize(d, o), o)
		}
	}
	var b strings.Builder
	for i := range 3000 {
		b.WriteString("Prefixed")
		for j := i; j > 0; j /= 26 {
			b.WriteByte(byte('a' + j%26))
		}
		b.WriteString(" prefix ")
	}
	d := &Document{Subject: "PREFIXED words", Text: b.String()}
	checkAnalyze(t, d, Tokenize(d, TokenOptions{}), TokenOptions{})
}

// TestAnalyzeReuse checks that AnalyzeReuse gives Analyze's terms and
// statistics whatever the memory it is given holds.
func TestAnalyzeReuse(t *testing.T) {
	var stats []TermStats
	for _, f := range []string{"html.eml", "plain.eml", "obfuscated-spam.eml", "windows-1251.eml", "plain.eml"} {
		doc := Parse(readSample(t, f), Options{})
		want := Analyze(doc, TokenOptions{})
		for i := range stats[:cap(stats)] {
			stats[:cap(stats)][i] = TermStats{TF: -1, First: -1, InSubject: true}
		}
		got := AnalyzeReuse(doc, TokenOptions{}, stats)
		if !slices.Equal(got.Sorted, want.Sorted) || !slices.Equal(got.Stats, want.Stats) || got.Tokens != want.Tokens {
			t.Fatalf("%s: AnalyzeReuse differs from Analyze", f)
		}
		stats = got.Stats[:0]
	}
}
