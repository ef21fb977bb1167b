package mime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
)

// The tests of this file prove that parsing, normalization and
// tokenization are linear in their input and bounded by Options and
// TokenOptions, without timing anything: they count the bytes the
// repeatable scans examine (Document.work), the term-table slots visited
// (Terms.probes) and the bytes allocated, on hostile messages growing 1×,
// 4× and 16×.

// costOf parses and analyzes raw, returning the document, its terms and
// the bytes allocated meanwhile (after a first, warming run, so that
// pooled buffers do not count).
func costOf(raw []byte, opts Options) (*Document, *Terms, uint64) {
	Analyze(Parse(raw, opts), TokenOptions{})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	doc := Parse(raw, opts)
	terms := Analyze(doc, TokenOptions{})
	runtime.ReadMemStats(&after)
	return doc, terms, after.TotalAlloc - before.TotalAlloc
}

// Bounds per input byte that hold for every hostile message, whatever its
// size: the work of the scans (1 for each scan over the input, and up to
// ~33 for normalization, which writes the NFKC expansion of U+FDFA), and
// the bytes allocated (the text, its scratch buffers grown by append and
// the terms: at most ~13 times the normalized text, itself at most 11
// times the input). Term-table probes are bounded per token. The work per
// byte must moreover not grow with the input; allocation is only held to
// its bound, as pooled buffers make it vary from run to run (a quadratic
// decoder, as the one of issue 11, allocates thousands of bytes per input
// byte at these sizes).
const (
	maxWorkPerByte   = 48
	maxAllocPerByte  = 256
	maxProbesPerTerm = 4
)

func TestHostileLinear(t *testing.T) {
	sizes := []int{32 << 10, 128 << 10, 512 << 10} // 1×, 4×, 16×
	if testing.Short() {
		sizes = sizes[:2]
	}
	for _, kind := range spamgen.HostileKinds() {
		t.Run(string(kind), func(t *testing.T) {
			var firstWork float64
			for k, size := range sizes {
				raw := spamgen.NewHostile(kind, size)
				doc, terms, alloc := costOf(raw, Options{})
				checkDocument(t, doc)
				n := float64(len(raw))
				work, perAlloc := float64(doc.work)/n, float64(alloc)/n
				t.Logf("%7d bytes: work %.2f/B, alloc %.2f B/B, %d tokens, %d probes, text %d", len(raw), work, perAlloc, terms.Tokens, terms.probes, len(doc.Text))
				if work > maxWorkPerByte {
					t.Errorf("%d bytes: work %.1f per input byte, want <= %d", len(raw), work, maxWorkPerByte)
				}
				if perAlloc > maxAllocPerByte {
					t.Errorf("%d bytes: %.1f bytes allocated per input byte, want <= %d", len(raw), perAlloc, maxAllocPerByte)
				}
				if terms.probes > maxProbesPerTerm*terms.Tokens+64 {
					t.Errorf("%d bytes: %d term-table probes for %d tokens", len(raw), terms.probes, terms.Tokens)
				}
				if k == 0 {
					firstWork = work
					continue
				}
				// Linear: the work per byte does not grow with the input.
				if work > 2*firstWork+1 {
					t.Errorf("work per byte grows: %.2f at %d bytes, %.2f at the smallest size", work, len(raw), firstWork)
				}
			}
		})
	}
}

// checkDocument checks what every document must satisfy.
func checkDocument(t *testing.T, doc *Document) {
	t.Helper()
	for _, w := range doc.Warnings {
		if strings.HasPrefix(w, "internal error") {
			t.Fatalf("panic inside Parse: %s", w)
		}
	}
	if !utf8.ValidString(doc.Text) || !utf8.ValidString(doc.Subject) {
		t.Fatal("invalid UTF-8 in document")
	}
	if len(doc.Text) > defaultMaxTextBytes || len(doc.Subject) > defaultMaxHeaderBytes {
		t.Fatalf("text %d bytes, subject %d bytes: over the default budgets", len(doc.Text), len(doc.Subject))
	}
}

// TestHostileUnbudgetedLinear checks that the budgets are not what keeps
// the header decoder, the URL scan and the term table linear: with the
// budgets lifted, encoded-word floods and near misses cost the same per
// byte at every size (the base64 encoded-word decoding of issue 11 was
// quadratic: 10k / 40k / 200k words took 0.27 / 1.64 / 38.5 s).
func TestHostileUnbudgetedLinear(t *testing.T) {
	open := Options{MaxHeaderBytes: 1 << 30, MaxEncodedWords: 1 << 30, MaxTextBytes: 1 << 30, MaxComposeBytes: 1 << 30}
	for _, kind := range []spamgen.Hostile{spamgen.EncodedWordFlood, spamgen.MixedCharsetFlood,
		spamgen.BrokenEncodedWords, spamgen.URLNearMiss, spamgen.PrefixTerms} {
		t.Run(string(kind), func(t *testing.T) {
			var first float64
			for k, size := range []int{32 << 10, 128 << 10, 512 << 10} {
				raw := spamgen.NewHostile(kind, size)
				doc, terms, alloc := costOf(raw, open)
				if doc.OverBudget {
					t.Fatalf("%d bytes: over budget: %q", len(raw), doc.Warnings)
				}
				work, perAlloc := float64(doc.work)/float64(len(raw)), float64(alloc)/float64(len(raw))
				if perAlloc > maxAllocPerByte {
					t.Errorf("%d bytes: %.1f bytes allocated per input byte, want <= %d", len(raw), perAlloc, maxAllocPerByte)
				}
				if terms.probes > maxProbesPerTerm*terms.Tokens+64 {
					t.Errorf("%d bytes: %d term-table probes for %d tokens", len(raw), terms.probes, terms.Tokens)
				}
				if k == 0 {
					first = work
					continue
				}
				if work > 2*first+1 {
					t.Errorf("%d bytes: work %.2f/B; %.2f at the smallest size", len(raw), work, first)
				}
			}
		})
	}
}

// TestHostileBudgets checks the attacks of issue 11 one by one: each is
// parsed on its bounded prefix, with a warning, and keeps the ordinary
// text that came before the hostile content.
func TestHostileBudgets(t *testing.T) {
	tests := []struct {
		kind    spamgen.Hostile
		size    int
		warning string // a budget warning expected, "" for none
		subject string // a substring of the subject, "" to skip
	}{
		// 340,000 × U+FDFA (1 MB) would normalize to 11 MB.
		{spamgen.FDFAPadding, 1 << 20, "normalized text longer than 1048576 bytes", ""},
		{spamgen.LigaturePadding, 1 << 20, "normalized text longer than", ""},
		// A ~0.5 MB header of base64 encoded-words.
		{spamgen.EncodedWordFlood, 512 << 10, "subject longer than 65536 bytes", "Prize waiting! Prize waiting!"},
		{spamgen.MixedCharsetFlood, 512 << 10, "subject longer than 65536 bytes", "win"},
		{spamgen.HugeHeader, 1 << 20, "subject longer than 65536 bytes", "start word another longer"},
		{spamgen.DeepNesting, 64 << 10, "MIME nesting deeper than 16", "Nested"},
		{spamgen.ManyParts, 256 << 10, "more than 256 MIME parts", "Parts"},
		{spamgen.CombiningMarks, 1 << 20, "too much text to compose", ""},
		{spamgen.HTMLNesting, 256 << 10, "", ""},
		{spamgen.URLNearMiss, 512 << 10, "", ""},
		{spamgen.PrefixTerms, 512 << 10, "", ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			raw := spamgen.NewHostile(tt.kind, tt.size)
			doc := Parse(raw, Options{})
			checkDocument(t, doc)
			found := slices.ContainsFunc(doc.Warnings, func(w string) bool { return strings.Contains(w, tt.warning) })
			if tt.warning != "" && (!found || !doc.OverBudget) {
				t.Errorf("warnings %q (over budget %v), want one containing %q", doc.Warnings, doc.OverBudget, tt.warning)
			}
			if tt.warning == "" && doc.OverBudget {
				t.Errorf("over budget: %q", doc.Warnings)
			}
			if tt.subject != "" && !strings.Contains(doc.Subject, tt.subject) {
				t.Errorf("subject %.80q…, want it to contain %q", doc.Subject, tt.subject)
			}
			terms := Analyze(doc, TokenOptions{}).Sorted
			for _, w := range []string{"customer", "account", "attention"} {
				if _, ok := slices.BinarySearch(terms, w); !ok && tt.kind != spamgen.EncodedWordFlood &&
					tt.kind != spamgen.MixedCharsetFlood && tt.kind != spamgen.HugeHeader &&
					tt.kind != spamgen.DeepNesting && tt.kind != spamgen.ManyParts {
					t.Errorf("term %q of the ordinary text lost", w)
				}
			}
		})
	}
}

// TestOrdinaryWithinBudgets checks that no sample message reaches a
// budget: the budgets change no signature of ordinary mail.
func TestOrdinaryWithinBudgets(t *testing.T) {
	files, err := filepath.Glob("testdata/*.eml")
	if err != nil || len(files) == 0 {
		t.Fatalf("samples: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc := Parse(raw, Options{})
		if doc.OverBudget {
			t.Errorf("%s: over budget: %q", f, doc.Warnings)
		}
		if Analyze(doc, TokenOptions{}).OverBudget {
			t.Errorf("%s: over the token budget", f)
		}
	}
}

// TestCorpusWithinBudgets is TestOrdinaryWithinBudgets over a real corpus
// (NDD_CORPUS, e.g. the SpamAssassin public corpus).
func TestCorpusWithinBudgets(t *testing.T) {
	msgs, _ := loadCorpus(t)
	for _, m := range msgs {
		doc := Parse(m, Options{})
		if doc.OverBudget || Analyze(doc, TokenOptions{}).OverBudget {
			t.Errorf("message %q over budget: %q", doc.MessageID, doc.Warnings)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	got := Options{}.withDefaults()
	want := Options{MaxBytes: 4 << 20, MaxDepth: 16, MaxParts: 256, MaxTextBytes: 1 << 20,
		MaxHeaderBytes: 64 << 10, MaxEncodedWords: 1024, MaxComposeBytes: 256 << 10}
	if got != want {
		t.Errorf("Options defaults %+v, want %+v", got, want)
	}
	if got := (TokenOptions{}).withDefaults(); got != (TokenOptions{MinLen: 4, MaxDigits: 1, MaxLen: 40, MaxTokens: 1 << 15}) {
		t.Errorf("TokenOptions defaults %+v", got)
	}
}

func TestMaxTextBytesCutsAtWord(t *testing.T) {
	text := strings.Repeat("alpha beta gamma delta ", 100)
	raw := []byte("Subject: s\r\n\r\n" + text)
	doc := Parse(raw, Options{MaxTextBytes: 100})
	if !doc.OverBudget || len(doc.Text) > 100 || len(doc.Text) < 80 {
		t.Fatalf("text %d bytes %q, over budget %v", len(doc.Text), doc.Text, doc.OverBudget)
	}
	if !strings.HasPrefix(text, doc.Text) || !strings.HasSuffix(doc.Text, " ") && !strings.HasPrefix(text[len(doc.Text):], " ") {
		t.Errorf("text %q is not cut at a word boundary", doc.Text)
	}
	// The same with non-ASCII text that NFKC expands.
	doc = Parse([]byte("Subject: s\r\n\r\n"+strings.Repeat("ﬃce \uFDFA ", 100)), Options{MaxTextBytes: 200})
	if !doc.OverBudget || len(doc.Text) > 200 || len(doc.Text) < 150 || !utf8.ValidString(doc.Text) {
		t.Fatalf("text %d bytes %q, over budget %v", len(doc.Text), doc.Text, doc.OverBudget)
	}
}

func TestMaxEncodedWords(t *testing.T) {
	var b strings.Builder
	b.WriteString("Subject: ")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "=?utf-8?q?w%d?= x ", i)
	}
	b.WriteString("\r\n\r\nbody\r\n")
	doc := Parse([]byte(b.String()), Options{MaxEncodedWords: 3})
	if doc.Subject != "w0 x w1 x w2 x" || !doc.OverBudget {
		t.Errorf("subject %q, over budget %v, warnings %q", doc.Subject, doc.OverBudget, doc.Warnings)
	}
}

func TestMaxTokens(t *testing.T) {
	doc := &Document{Subject: "alpha beta", Text: "gamma delta alpha epsilon zeta"}
	opts := TokenOptions{MaxTokens: 4}
	terms := Analyze(doc, opts)
	if terms.Tokens != 4 || !terms.OverBudget {
		t.Fatalf("Analyze: %d tokens, over budget %v", terms.Tokens, terms.OverBudget)
	}
	want := []string{"alpha", "beta", "delta", "gamma"}
	if !slices.Equal(terms.Sorted, want) {
		t.Errorf("terms %q, want %q", terms.Sorted, want)
	}
	toks := Tokenize(doc, opts)
	if len(toks) != 4 || !slices.Equal(UniqueTerms(toks), want) || !slices.Equal(UniqueTermsOf(doc, opts), want) {
		t.Errorf("Tokenize / UniqueTermsOf disagree with Analyze: %v", toks)
	}
	if Analyze(doc, TokenOptions{MaxTokens: 7}).OverBudget {
		t.Error("exactly MaxTokens tokens reported over budget")
	}
}

func TestParseContext(t *testing.T) {
	raw := spamgen.NewHostile(spamgen.ManyParts, 64<<10)
	doc, err := ParseContext(context.Background(), raw, Options{})
	if err != nil || doc.Text != Parse(raw, Options{}).Text {
		t.Fatalf("ParseContext(Background) = %v, text differs from Parse", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	doc, err = ParseContext(ctx, raw, Options{})
	if !errors.Is(err, context.Canceled) || doc == nil {
		t.Fatalf("ParseContext(canceled) = %v, %v; want a document and context.Canceled", doc, err)
	}
	if doc.Text != "" || !slices.ContainsFunc(doc.Warnings, func(w string) bool { return strings.HasPrefix(w, "parsing abandoned") }) {
		t.Errorf("canceled parse: text %q, warnings %q", doc.Text, doc.Warnings)
	}
	// The pooled parser does not keep the canceled context.
	if doc := Parse(raw, Options{}); len(doc.Text) == 0 {
		t.Error("Parse after a canceled ParseContext read nothing")
	}
}

// FuzzDecodeHeader checks the RFC 2047 decoder on any header value: valid
// UTF-8 out, an output bounded by the input (a byte decodes to at most 3
// UTF-8 bytes), and the bytes its scans examine bounded per input byte.
// Seeds: testdata/fuzz/FuzzDecodeHeader.
func FuzzDecodeHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, v string) {
		p := new(parser)
		p.opts = Options{}.withDefaults()
		out := p.decodeHeaderText(v, "subject", "")
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 %q", out)
		}
		if len(out) > 3*len(v)+8 {
			t.Fatalf("%d bytes decoded to %d", len(v), len(out))
		}
		if p.work > 4*len(v)+16 {
			t.Fatalf("%d bytes examined for %d bytes of header", p.work, len(v))
		}
	})
}

// FuzzNormalize checks the normalizer on any text: valid UTF-8 out, the
// output limit and the compose budget respected, the result equal to the
// unbounded one when nothing was cut, and the bytes examined bounded per
// input byte (U+FDFA writes 33 bytes for 3 and each is examined at most
// a few times). Seeds: testdata/fuzz/FuzzNormalize.
func FuzzNormalize(f *testing.F) {
	f.Fuzz(func(t *testing.T, s []byte) {
		limit := 2*len(s) + 16
		nz := normalizer{maxCompose: len(s)/2 + 8}
		out := nz.normalizeAppend(nil, s, limit)
		if !utf8.Valid(out) {
			t.Fatalf("invalid UTF-8 %q", out)
		}
		if len(out) > limit || nz.composed > nz.maxCompose {
			t.Fatalf("output %d bytes (limit %d), composed %d (budget %d)", len(out), limit, nz.composed, nz.maxCompose)
		}
		if nz.work > 48*len(s)+64 {
			t.Fatalf("%d bytes examined for %d bytes of text", nz.work, len(s))
		}
		if !nz.cut {
			var whole normalizer
			if want := whole.normalizeAppend(nil, s, 1<<30); string(out) != string(want) {
				t.Fatalf("bounded %q, unbounded %q", out, want)
			}
		}
	})
}
