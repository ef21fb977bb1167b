package pipeline

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"mime/quotedprintable"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
)

// signers returns the default I-Match signer (K = 10) and ANDD signer.
func signers(tb testing.TB) (*imatchbag.Signer, *andd.Signer, *imatchbag.Lexicon) {
	tb.Helper()
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		tb.Fatal(err)
	}
	im, err := imatchbag.NewSigner(lex, imatchbag.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	m, err := andd.DefaultModel()
	if err != nil {
		tb.Fatal(err)
	}
	ad, err := andd.NewSigner(m, lex)
	if err != nil {
		tb.Fatal(err)
	}
	return im, ad, lex
}

// messages returns a realistic mix of ~5 KB messages (plain, HTML,
// multipart/alternative, quoted-printable ISO-8859-1, base64, the words
// drawn from the default lexicon with a Zipf law, a tenth of them
// capitalized) plus the sample messages of internal/mime/testdata (a dozen
// charsets, malformed MIME). It mirrors BenchmarkPipeline of
// internal/imatchbag and BenchmarkWeighSketch of internal/andd.
func messages(tb testing.TB, lex *imatchbag.Lexicon) [][]byte {
	tb.Helper()
	vocab := append(slices.Clone(lex.Primary()), lex.Secondary()...)
	rng := rand.New(rand.NewPCG(5, 5))
	z := rand.NewZipf(rng, 1.1, 2, uint64(len(vocab)-1))
	short := []string{"the", "of", "and", "to", "a", "in", "is", "for", "on", "you"}
	text := func(n int) string {
		var b strings.Builder
		for w := 0; b.Len() < n; w++ {
			word := vocab[z.Uint64()]
			if rng.IntN(3) == 0 {
				word = short[rng.IntN(len(short))]
			}
			if w%12 == 0 {
				word = strings.ToUpper(word[:1]) + word[1:]
			}
			b.WriteString(word)
			switch {
			case w%60 == 59:
				b.WriteString(".\n\n")
			case w%12 == 11:
				b.WriteString(". ")
			default:
				b.WriteByte(' ')
			}
		}
		return b.String()
	}
	var msgs [][]byte
	for i := range 50 {
		body := text(4200)
		var b bytes.Buffer
		fmt.Fprintf(&b, "From: Sender <sender@example.com>\r\nTo: rcpt@example.org\r\nSubject: %s\r\nMessage-ID: <%d@example.com>\r\nMIME-Version: 1.0\r\n",
			strings.TrimSpace(strings.ReplaceAll(text(30), "\n", " ")), i)
		html := "<html><head><style>p{color:#333}</style></head><body><div class=\"x\">" +
			strings.ReplaceAll(strings.ReplaceAll(body, "\n\n", "</p><p>"), ". ", ". <b></b>") +
			"</div><a href=\"https://shop.example.net/offer?id=42\">click here</a></body></html>"
		switch i % 5 {
		case 0:
			b.WriteString("Content-Type: text/plain; charset=us-ascii\r\n\r\n")
			b.WriteString(strings.ReplaceAll(body, "\n", "\r\n"))
		case 1:
			b.WriteString("Content-Type: text/html; charset=utf-8\r\n\r\n")
			b.WriteString(html)
		case 2:
			b.WriteString("Content-Type: multipart/alternative; boundary=\"BND\"\r\n\r\n--BND\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
			b.WriteString(body[:len(body)/2])
			b.WriteString("\r\n--BND\r\nContent-Type: text/html; charset=utf-8\r\n\r\n")
			b.WriteString(html[:len(html)/2] + "</div></body></html>")
			b.WriteString("\r\n--BND--\r\n")
		case 3:
			b.WriteString("Content-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
			w := quotedprintable.NewWriter(&b)
			w.Write([]byte(strings.ReplaceAll(body, "e ", "\xe9 ")))
			w.Close()
		case 4:
			b.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n")
			enc := base64.StdEncoding.EncodeToString([]byte(body))
			for len(enc) > 76 {
				b.WriteString(enc[:76] + "\r\n")
				enc = enc[76:]
			}
			b.WriteString(enc + "\r\n")
		}
		msgs = append(msgs, b.Bytes())
	}
	files, _ := filepath.Glob("../mime/testdata/*.eml")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		msgs = append(msgs, raw)
	}
	return msgs
}

// separate is the reference: each package called on its own, through
// the token list.
func separate(im *imatchbag.Signer, ad *andd.Signer, raw []byte, opts Options) *Result {
	doc := mime.Parse(raw, opts.Mime)
	toks := mime.Tokenize(doc, opts.Tokens)
	terms := mime.UniqueTerms(toks)
	r := &Result{Doc: doc, Terms: &mime.Terms{Sorted: terms}}
	if im != nil {
		r.IMatch = im.Sign(terms)
	}
	if ad != nil && len(terms) >= opts.ANDDMinTerms {
		r.Sketch = ad.SketchDocument(doc, toks)
		if !r.Sketch.IsEmpty() {
			r.BandKeys = ad.BandKeys(r.Sketch)
		}
	}
	return r
}

func sameResult(t *testing.T, name string, got, want *Result) {
	t.Helper()
	if !slices.Equal(got.Terms.Sorted, want.Terms.Sorted) {
		t.Fatalf("%s: terms differ", name)
	}
	g, w := got.IMatch, want.IMatch
	if !slices.Equal(g.Signatures, w.Signatures) || g.Unique != w.Unique || g.Terms != w.Terms ||
		g.Secondary != w.Secondary || g.Reason != w.Reason {
		t.Fatalf("%s: I-Match %+v, want %+v", name, g, w)
	}
	if !slices.Equal(got.Sketch.Bits, want.Sketch.Bits) || !slices.Equal(got.Sketch.MinHash, want.Sketch.MinHash) {
		t.Fatalf("%s: sketch %x, want %x", name, got.Sketch.Bits, want.Sketch.Bits)
	}
	if !slices.EqualFunc(got.BandKeys, want.BandKeys, bytes.Equal) {
		t.Fatalf("%s: band keys differ", name)
	}
}

// TestAnalyzeMatchesSeparateCalls checks that the one-pass pipeline
// gives exactly the signatures, sketch and band keys of the separate
// package calls, on the benchmark mix and the malformed samples, with
// several options.
func TestAnalyzeMatchesSeparateCalls(t *testing.T) {
	im, ad, lex := signers(t)
	msgs := messages(t, lex)
	msgs = append(msgs, nil, []byte("Subject: x\r\n\r\n"), []byte("\xff\xfe garbage"))
	m, err := andd.DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	adNoDF, err := andd.NewSigner(m, nil) // not the I-Match lexicon: no shared look-ups
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		im     *imatchbag.Signer
		ad     *andd.Signer
		opts   Options
		sketch bool
	}{
		{"defaults", im, ad, Options{}, true},
		{"imatch only", im, nil, Options{}, false},
		{"andd only", nil, ad, Options{}, true},
		{"short words", im, ad, Options{Tokens: mime.TokenOptions{MinLen: 2, MaxDigits: 3}}, true},
		{"min terms", im, ad, Options{ANDDMinTerms: 200}, true},
		{"other df", im, adNoDF, Options{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.im, tt.ad, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			sketches, sigs := 0, 0
			for i, raw := range msgs {
				got := p.Analyze(raw)
				sameResult(t, fmt.Sprintf("message %d", i), got, separate(tt.im, tt.ad, raw, tt.opts))
				if !got.Sketch.IsEmpty() {
					sketches++
				}
				sigs += len(got.IMatch.Signatures)
			}
			if tt.sketch != (sketches > 0) {
				t.Errorf("%d sketches", sketches)
			}
			if (tt.im != nil) != (sigs > 0) {
				t.Errorf("%d I-Match signatures", sigs)
			}
		})
	}
}

func TestNew(t *testing.T) {
	if _, err := New(nil, nil, Options{}); err == nil {
		t.Fatal("New(nil, nil) succeeded")
	}
	im, ad, _ := signers(t)
	p, err := New(im, ad, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := p.AnalyzeDocument(nil)
	if len(r.Terms.Sorted) != 0 || !r.Sketch.IsEmpty() || len(r.IMatch.Signatures) != 0 {
		t.Fatalf("AnalyzeDocument(nil) = %+v", r)
	}
}

func ExamplePipeline_Analyze() {
	lex, _ := imatchbag.DefaultLexicon()
	im, _ := imatchbag.NewSigner(lex, imatchbag.Options{})
	m, _ := andd.DefaultModel()
	ad, _ := andd.NewSigner(m, lex)
	p, _ := New(im, ad, Options{})
	raw := []byte("Subject: Your invoice is ready\r\n\r\n" +
		"Dear customer, please find attached the invoice for your recent order. " +
		"Payment is due within thirty days. Contact our billing department with any question.\r\n")
	r := p.Analyze(raw)
	fmt.Println(len(r.Terms.Sorted), "terms,", len(r.IMatch.Signatures), "I-Match signatures,",
		64*len(r.Sketch.Bits), "sketch bits,", len(r.BandKeys), "band keys")
	// Output: 19 terms, 11 I-Match signatures, 384 sketch bits, 32 band keys
}
