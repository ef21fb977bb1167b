package pipeline

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/qgram"
)

// Sign gives, for a message without a mailing-list footer, the
// signatures, sketch and band keys of Analyze, with the keys in one slice.
func TestSignMatchesAnalyze(t *testing.T) {
	im, ad, lex := signers(t)
	p, err := New(im, ad, Options{ANDDMinTerms: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, raw := range messages(t, lex) {
		m, err := p.Sign(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		r := p.Analyze(raw)
		if m.FooterAt >= 0 {
			continue // checked in TestSignFooter
		}
		if !slices.Equal(m.IMatch, r.IMatch.Signatures) || m.FooterIMatch != 0 {
			t.Errorf("message %d: I-Match %v, Analyze %v", i, m.IMatch, r.IMatch.Signatures)
		}
		if !slices.Equal(m.Sketch.Bits, r.Sketch.Bits) || !slices.EqualFunc(m.BandKeys, r.BandKeys, bytes.Equal) {
			t.Errorf("message %d: sketch or band keys differ from Analyze's", i)
		}
		want := slices.Concat(m.IMatchKeys, m.ShortKeys, m.ShortLookup, m.BandKeys, m.QKeys)
		if !slices.EqualFunc(m.Keys(), want, bytes.Equal) {
			t.Errorf("message %d: %d keys, want %d + %d + %d + %d + %d", i, len(m.Keys()), len(m.IMatchKeys), len(m.ShortKeys), len(m.ShortLookup), len(m.BandKeys), len(m.QKeys))
		}
		if exact := len(m.IMatchKeys) + len(m.ShortKeys) + len(m.ShortLookup); m.ExactKeys() != exact {
			t.Errorf("message %d: %d exact keys, want %d", i, m.ExactKeys(), exact)
		}
		if sk, ok := qgram.NewSketcher(qgram.SketchOptions{}).Sketch(r.Doc.Subject, "\n", r.Doc.Text); m.Skip == NoSkip && (ok != m.HasQSketch() || ok && sk != m.QSketch) {
			t.Errorf("message %d: q-gram sketch differs from the subject's and text's", i)
		}
		if m.HasSketch() != !m.Sketch.IsEmpty() || m.Unique == 0 && len(m.ShortKeys) == 0 && m.Skip != TooShort {
			t.Errorf("message %d: sketch %v, unique %d, skip %v", i, m.HasSketch(), m.Unique, m.Skip)
		}
		if b := m.Body(); b.HasFooter {
			t.Errorf("message %d: a body without a footer", i)
		}
	}
}

// A mailing-list footer is located, and the body's sketch leaves it out.
func TestSignFooter(t *testing.T) {
	im, ad, _ := signers(t)
	p, err := New(im, ad, Options{})
	if err != nil {
		t.Fatal(err)
	}
	body := "Has anyone built the kernel module against the new headers? The build fails at the linking step with\n" +
		"undefined references to the scheduler symbols, and the configuration options look right to me.\n"
	footer := "_______________________________________________\nKernel-users mailing list\nKernel-users@lists.example.org\nhttps://lists.example.org/mailman/listinfo/kernel-users\n"
	raw := []byte("List-Id: <kernel-users.lists.example.org>\r\nSubject: build fails\r\n\r\n" + body + footer)
	m, err := p.Sign(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if m.FooterAt != len(body) {
		t.Fatalf("footer at %d, want %d", m.FooterAt, len(body))
	}
	b := m.Body()
	if !b.HasFooter || !b.HasSketch() || len(b.BandKeys) == 0 {
		t.Fatalf("body: %+v", b)
	}
	if andd.Cosine(b.Sketch, m.Sketch) >= 1 {
		t.Error("the body's sketch is the whole message's")
	}
	if m.Body() != b {
		t.Error("Body computed twice")
	}
}

func TestSignSkipAndARF(t *testing.T) {
	im, ad, _ := signers(t)
	p, err := New(im, ad, Options{ANDDMinTerms: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := p.Sign(ctx, []byte("Subject: hi\r\n\r\nok\r\n"))
	if err != nil || m.Skip != TooShort || len(m.Keys()) != 0 {
		t.Errorf("short message: %+v %v", m, err)
	}
	arf, err := os.ReadFile(filepath.Join("..", "mime", "testdata", "arf.eml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err = p.SignReport(ctx, arf)
	if err != nil || !m.ARF {
		t.Errorf("ARF report: ARF %v, %v", m != nil && m.ARF, err)
	}
	if m, err := p.Sign(ctx, arf); err != nil || m.ARF {
		t.Errorf("Sign does not unwrap: %v", err)
	}
}

func TestSignCanceled(t *testing.T) {
	im, ad, _ := signers(t)
	p, err := New(im, ad, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, sign := range []func(context.Context, []byte) (*Message, error){p.Sign, p.SignReport} {
		if m, err := sign(ctx, []byte("Subject: x\r\n\r\nsome words\r\n")); !errors.Is(err, context.Canceled) || m != nil {
			t.Errorf("canceled: %v %v", m, err)
		}
	}
}

// Short-message keys: an image alone is signed (not skipped); a one-line
// post to a list is signed without the list's footer, so it has no key
// and stays skipped; DisableShort turns them off.
func TestSignShort(t *testing.T) {
	im, ad, _ := signers(t)
	ctx := context.Background()
	img := make([]byte, 4096)
	for i := range img {
		img[i] = byte(i * 7)
	}
	imageOnly := []byte("Subject: hi\r\nMIME-Version: 1.0\r\nContent-Type: application/octet-stream\r\n\r\n" + string(img))
	footer := "_______________________________________________\nKernel-users mailing list\nKernel-users@lists.example.org\nhttps://lists.example.org/mailman/listinfo/kernel-users\n"
	oneLine := []byte("List-Id: <kernel-users.lists.example.org>\r\nSubject: thanks\r\n\r\nthanks!\n" + footer)
	for _, tc := range []struct {
		name    string
		opts    Options
		raw     []byte
		skip    Skip
		short   bool
		noBands bool
	}{
		{"image only", Options{}, imageOnly, NoSkip, true, true},
		{"image only, short keys off", Options{DisableShort: true}, imageOnly, TooShort, false, true},
		{"one-line list post", Options{}, oneLine, m0(t, im, ad, oneLine), false, false},
	} {
		p, err := New(im, ad, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		m, err := p.Sign(ctx, tc.raw)
		if err != nil {
			t.Fatal(err)
		}
		if m.Skip != tc.skip || (len(m.ShortKeys) > 0) != tc.short || (tc.noBands && len(m.BandKeys) > 0) {
			t.Errorf("%s: skip %v, %d short keys, %d band keys", tc.name, m.Skip, len(m.ShortKeys), len(m.BandKeys))
		}
	}
}

// m0 is the skip reason of raw without short-message keys.
func m0(t *testing.T, im *imatchbag.Signer, ad *andd.Signer, raw []byte) Skip {
	t.Helper()
	p, err := New(im, ad, Options{DisableShort: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Sign(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	return m.Skip
}

func TestExcerpt(t *testing.T) {
	long := strings.Repeat("a", MaxExcerpt-1) + "é and more"
	tests := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"trimmed", "  hello\n", "hello"},
		{"cut between characters", long, strings.Repeat("a", MaxExcerpt-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := excerpt(tt.in); got != tt.want {
				t.Errorf("excerpt = %q, want %q", got, tt.want)
			}
		})
	}
	im, ad, _ := signers(t)
	p, err := New(im, ad, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Sign(context.Background(), []byte("Subject: s\r\n\r\nthe visible text\r\n"))
	if err != nil || m.Excerpt != "the visible text" {
		t.Errorf("Sign: Excerpt %q, %v", m.Excerpt, err)
	}
}
