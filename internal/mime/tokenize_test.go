package mime

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"ascii unchanged", "Hello, World! 123", "Hello, World! 123"},
		{"zero width removed", "fr\u200bee of\u200cfer mo\u200dney w\u2060in \ufeffnow", "free offer money win now"},
		{"soft hyphen removed", "medi\u00adcation", "medication"},
		{"nfkc fullwidth", "\uff26\uff32\uff25\uff25 ｍｏｎｅｙ", "FREE money"},
		{"nfkc math bold and circled", "\U0001d41f\U0001d42b\U0001d41e\U0001d41e ⓥⓘⓐ", "free via"},
		{"nfkc ligature and nbsp", "\ufb01nance\u00a0now", "finance now"},
		{"cyrillic homoglyphs in latin word", "p\u0430yp\u0430l \u0421ASH", "paypal CASH"},
		{"greek homoglyphs in latin word", "\u039fFFER m\u03bfney", "OFFER money"},
		{"genuine russian untouched", "Привет, мир! Скидка", "Привет, мир! Скидка"},
		{"genuine greek untouched", "Καλημέρα κόσμε", "Καλημέρα κόσμε"},
		{"all-cyrillic lookalike word untouched", "рор сор", "рор сор"},
		{"combining marks stripped in latin words", "v\u0332i\u0332a\u0332g\u0332r\u0332a\u0332", "viagra"},
		{"precomposed accents kept", "cafe\u0301 naïve", "café naïve"},
		{"hindi marks kept", "नमस्ते", "नमस्ते"},
		{"mixed line", "Buy v\u0456\u0430gr\u0430 — Привет", "Buy viagra — Привет"},
	}
	var nz normalizer
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(nz.normalizeAppend(nil, []byte(tt.in), math.MaxInt))
			if got != tt.want {
				t.Errorf("normalize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func terms(toks []Token) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t.Term
	}
	return out
}

func TestTokenize(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		text    string
		opts    TokenOptions
		want    []string
	}{
		{"paper defaults", "Cheap MEDS", "Buy cheap meds now: 100mg for $5, v2 works, mp3s x1y2 abc abcd",
			TokenOptions{}, []string{"cheap", "meds", "cheap", "meds", "works", "mp3s", "abcd"}},
		{"lower-cased", "", "HELLO World ÉCOLE Straße", TokenOptions{}, []string{"hello", "world", "école", "straße"}},
		{"max length", "", "short " + strings.Repeat("a", 41) + " " + strings.Repeat("b", 40), TokenOptions{},
			[]string{"short", strings.Repeat("b", 40)}},
		{"urls not tokenized", "", "see http://www.example.com/offers/today and www.shop.example.net now https://x.example",
			TokenOptions{}, nil},
		{"email address words kept", "", "write to remove@example.com", TokenOptions{}, []string{"write", "remove", "example"}},
		{"custom options", "", "a bb ccc dddd 12ab 123abc", TokenOptions{MinLen: 2, MaxDigits: 2, MaxLen: 3},
			[]string{"bb", "ccc"}},
		{"cjk runs are words", "", "年度产品展示会 東京", TokenOptions{}, []string{"年度产品展示会"}},
		{"russian", "", "Кредит без справок", TokenOptions{}, []string{"кредит", "справок"}},
		{"digits other scripts", "", "١٢٣٤abc abcd٣", TokenOptions{}, []string{"abcd٣"}},
		{"combining marks continue words", "", "नमस्ते दुनिया", TokenOptions{}, []string{"नमस्ते", "दुनिया"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			toks := Tokenize(&Document{Subject: tt.subject, Text: tt.text}, tt.opts)
			if got := terms(toks); !slices.Equal(got, tt.want) {
				t.Errorf("terms = %q, want %q", got, tt.want)
			}
			for i, tok := range toks {
				if tok.Pos != i {
					t.Errorf("token %d has Pos %d", i, tok.Pos)
				}
			}
		})
	}
}

func TestTokenFlags(t *testing.T) {
	toks := Tokenize(&Document{Subject: "Great Deals", Text: "FREE Money today NOW Élan ÉCOLE"}, TokenOptions{})
	type flags struct {
		term                  string
		subj, capital, allCap bool
	}
	want := []flags{
		{"great", true, true, false}, {"deals", true, true, false},
		{"free", false, true, true}, {"money", false, true, false}, {"today", false, false, false},
		{"élan", false, true, false}, {"école", false, true, true},
	}
	if len(toks) != len(want) {
		t.Fatalf("got %d tokens %q, want %d", len(toks), terms(toks), len(want))
	}
	for i, w := range want {
		got := flags{toks[i].Term, toks[i].InSubject, toks[i].Capitalized, toks[i].AllCaps}
		if got != w {
			t.Errorf("token %d = %+v, want %+v", i, got, w)
		}
	}
}

func TestUniqueTerms(t *testing.T) {
	toks := Tokenize(&Document{Subject: "zeta alpha", Text: "beta Alpha ALPHA zeta gamma"}, TokenOptions{})
	got := UniqueTerms(toks)
	want := []string{"alpha", "beta", "gamma", "zeta"}
	if !slices.Equal(got, want) {
		t.Errorf("UniqueTerms = %q, want %q", got, want)
	}
	if got := UniqueTerms(nil); len(got) != 0 {
		t.Errorf("UniqueTerms(nil) = %q", got)
	}
	// Shared 6-byte prefixes, short terms, non-ASCII, many duplicates.
	var toks2 []Token
	words := strings.Fields("information informative inform informed info infor informa informative école écoles ab a zzzzzzzz zzzzzz zzzzzzza ü")
	for i := 0; i < 5000; i++ {
		toks2 = append(toks2, Token{Term: words[(i*7919)%len(words)]})
	}
	want = slices.Clone(words)
	slices.Sort(want)
	want = slices.Compact(want)
	if got := UniqueTerms(toks2); !slices.Equal(got, want) {
		t.Errorf("UniqueTerms = %q, want %q", got, want)
	}
	big := make([]Token, 70000)
	for i := range big {
		big[i].Term = words[i%len(words)]
	}
	if got := UniqueTerms(big); !slices.Equal(got, want) {
		t.Errorf("UniqueTerms(70000 tokens) = %q, want %q", got, want)
	}
}

// TestObfuscatedSpamMatchesClean checks the point of normalization: the
// obfuscated sample yields the same terms as its clean wording.
func TestObfuscatedSpamMatchesClean(t *testing.T) {
	d := Parse(readSample(t, "obfuscated-spam.eml"), Options{})
	got := UniqueTerms(Tokenize(d, TokenOptions{}))
	for _, w := range []string{"pharmacy", "genuine", "medications", "prices", "viagra", "cialis",
		"prescription", "needed", "delivery", "order", "store", "cheap", "meds", "remove"} {
		if _, ok := slices.BinarySearch(got, w); !ok {
			t.Errorf("term %q missing from %q", w, got)
		}
	}
	for _, w := range []string{"buster", "filler", "hidden", "lorem"} {
		if _, ok := slices.BinarySearch(got, w); ok {
			t.Errorf("hidden term %q present", w)
		}
	}
}

// TestNormalizeNFKCAgreesWithReference checks the piecewise NFKC of
// normalizeAppend against golang.org/x/text on random strings drawn from
// composing, compatibility and inert characters (no homoglyphs, so that
// step 3 leaves the text alone).
func TestNormalizeNFKCAgreesWithReference(t *testing.T) {
	// Compatibility characters repeat (the segment memo), astral letters,
	// Hangul jamo and Arabic letters that compose or expand.
	alphabet := []rune("ae Zé\u0301\u0323\u0308\u00a0\ufb01\uff21\u2026\u1100\u1161\u11a8\uac00\u0b47\u0b3e\u3099\u304b\u00bd\u2460\u4e00\u0627\u0653x1" +
		"\ufdfa\ufdfa\ufdfb\u3300\u3232\U0001d41a\U0001d7ce\u0344\u0f73\u1161\u0645\u0654\u1e9b\u212b\u2000\ufb2c")
	var nz normalizer
	rnd := uint64(1)
	compared := 0
	for n := 0; n < 20000; n++ {
		var b strings.Builder
		for k := 0; k < 1+n%12; k++ {
			rnd = rnd*6364136223846793005 + 1442695040888963407
			b.WriteRune(alphabet[(rnd>>33)%uint64(len(alphabet))])
		}
		in := b.String()
		want := norm.NFKC.String(in)
		if strings.ContainsFunc(want, func(r rune) bool { return r > 0x7f && runeInfo(r)&(rfHomoglyph|rfMn) != 0 }) {
			continue // step 3 may legitimately change these
		}
		if got := string(nz.normalizeAppend(nil, []byte(in), math.MaxInt)); got != want {
			t.Fatalf("normalize(%+q) = %+q, want NFKC %+q", in, got, want)
		}
		compared++
	}
	if compared < 5000 {
		t.Fatalf("only %d strings compared", compared)
	}
}

// TestNormalizeChunksAgree checks that chunked normalization of long text
// equals normalizing it in one piece.
func TestNormalizeChunksAgree(t *testing.T) {
	alphabet := []rune("ae Zé\u0301\u0323 \u00a0\ufb01\uff21\u2026\u1100\u1161 \u11a8\uac00\u0430\u0440 x1pq\u200b\u00ad \n")
	var nz, whole normalizer
	rnd := uint64(7)
	for n := 0; n < 300; n++ {
		var b strings.Builder
		for k := 0; k < 200+n*7; k++ {
			rnd = rnd*6364136223846793005 + 1442695040888963407
			b.WriteRune(alphabet[(rnd>>33)%uint64(len(alphabet))])
		}
		in := []byte(b.String())
		got := string(nz.normalizeAppend(nil, in, math.MaxInt))
		w, _ := whole.normalizeSlow(nil, in, math.MaxInt)
		want := string(w)
		if got != want {
			t.Fatalf("chunked %+q\n   whole %+q", got, want)
		}
	}
}

func TestSortKeys(t *testing.T) {
	rnd := uint64(3)
	for _, n := range []int{0, 1, 2, 31, 33, 100, 1000, 5000} {
		for _, spread := range []uint{8, 64} { // keys in few buckets, or all over
			keys := make([]uint64, n)
			for i := range keys {
				rnd = rnd*6364136223846793005 + 1442695040888963407
				keys[i] = rnd >> (spread - 8) // spread 8: top byte is 0
			}
			want := slices.Clone(keys)
			slices.Sort(want)
			if got := sortKeys(keys, make([]uint64, n)); !slices.Equal(got, want) {
				t.Fatalf("sortKeys(n=%d, spread=%d) not sorted", n, spread)
			}
		}
	}
}

// TestUniqueTermsOf checks UniqueTermsOf against UniqueTerms(Tokenize())
// on every sample, on random text and with custom options.
func TestUniqueTermsOf(t *testing.T) {
	var docs []*Document
	files, _ := filepath.Glob("testdata/*.eml")
	for _, f := range files {
		docs = append(docs, Parse(readSample(t, filepath.Base(f)), Options{}))
	}
	words := strings.Fields("Information informative INFORM informed info infor informa école ÉCOLE Écoles ab a zzzzzzzz zzzzzz zzzzzzzA ü İstanbul ΣΟΦΙΑ straße x1y2 mp3s")
	rnd := uint64(11)
	for n := 0; n < 50; n++ {
		var b strings.Builder
		for k := 0; k < n*n*3; k++ {
			rnd = rnd*6364136223846793005 + 1442695040888963407
			b.WriteString(words[(rnd>>33)%uint64(len(words))])
			b.WriteByte(" \n,"[(rnd>>20)%3])
		}
		docs = append(docs, &Document{Subject: words[n%len(words)], Text: b.String()})
	}
	// More distinct terms than the table's first size and than 16 bits.
	var big strings.Builder
	for i := 0; i < 70000; i++ {
		fmt.Fprintf(&big, "w%c%c%c%c ", 'a'+i%26, 'a'+i/26%26, 'a'+i/676%26, 'a'+i/17576%26)
	}
	docs = append(docs, &Document{Text: big.String()})
	for _, opts := range []TokenOptions{{}, {MinLen: 1, MaxDigits: 5, MaxLen: 6}} {
		for i, d := range docs {
			want := UniqueTerms(Tokenize(d, opts))
			if got := UniqueTermsOf(d, opts); !slices.Equal(got, want) {
				t.Fatalf("doc %d, %+v: UniqueTermsOf = %d terms %q…, want %d %q…", i, opts, len(got), got[:min(5, len(got))], len(want), want[:min(5, len(want))])
			}
		}
	}
}
