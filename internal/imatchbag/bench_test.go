package imatchbag

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"mime/quotedprintable"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// zipfText returns about n bytes of English-like text: words of the default
// lexicon drawn with their document frequencies (so frequent words are
// frequent), in sentences and paragraphs.
func zipfText(rng *rand.Rand, lex *Lexicon, n int) string {
	var b strings.Builder
	total := 0
	for _, t := range lex.ranked {
		total += int(t.df)
	}
	pick := func() string {
		x := rng.IntN(total)
		for _, t := range lex.ranked {
			x -= int(t.df)
			if x < 0 {
				return t.term
			}
		}
		return "the"
	}
	short := []string{"the", "of", "and", "to", "a", "in", "is", "for", "on", "you"}
	words := 0
	for b.Len() < n {
		if rng.IntN(3) == 0 {
			b.WriteString(short[rng.IntN(len(short))])
		} else {
			w := pick()
			if words%12 == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
		}
		words++
		switch {
		case words%60 == 0:
			b.WriteString(".\n\n")
		case words%12 == 0:
			b.WriteString(". ")
		default:
			b.WriteByte(' ')
		}
	}
	return b.String()
}

const benchHeader = "From: Sender <sender@example.com>\r\nTo: rcpt@example.org\r\nSubject: %s\r\nDate: Mon, 2 Jan 2026 10:00:00 +0000\r\nMessage-ID: <%d@example.com>\r\nMIME-Version: 1.0\r\n"

// benchMessages returns a realistic mix of ~5 KB messages (plain, HTML,
// multipart/alternative, quoted-printable ISO-8859-1, base64) plus the
// sample messages of internal/mime/testdata.
func benchMessages(tb testing.TB, lex *Lexicon) [][]byte {
	rng := rand.New(rand.NewPCG(5, 5))
	var msgs [][]byte
	for i := range 50 {
		text := zipfText(rng, lex, 4200)
		subj := zipfText(rng, lex, 30)
		subj = strings.TrimSpace(strings.ReplaceAll(subj, "\n", " "))
		var b bytes.Buffer
		fmt.Fprintf(&b, benchHeader, subj, i)
		html := "<html><head><style>p{color:#333}</style></head><body><div class=\"x\">" +
			strings.ReplaceAll(strings.ReplaceAll(text, "\n\n", "</p><p>"), ". ", ". <b></b>") +
			"</div><a href=\"https://shop.example.net/offer?id=42\">click here</a></body></html>"
		switch i % 5 {
		case 0:
			b.WriteString("Content-Type: text/plain; charset=us-ascii\r\n\r\n")
			b.WriteString(strings.ReplaceAll(text, "\n", "\r\n"))
		case 1:
			b.WriteString("Content-Type: text/html; charset=utf-8\r\n\r\n")
			b.WriteString(html)
		case 2:
			b.WriteString("Content-Type: multipart/alternative; boundary=\"BND\"\r\n\r\n--BND\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
			b.WriteString(text[:len(text)/2])
			b.WriteString("\r\n--BND\r\nContent-Type: text/html; charset=utf-8\r\n\r\n")
			b.WriteString(html[:len(html)/2] + "</div></body></html>")
			b.WriteString("\r\n--BND--\r\n")
		case 3:
			b.WriteString("Content-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
			w := quotedprintable.NewWriter(&b)
			w.Write([]byte(strings.ReplaceAll(text, "e ", "\xe9 ")))
			w.Close()
		case 4:
			b.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n")
			enc := base64.StdEncoding.EncodeToString([]byte(text))
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

// reportRates reports items per wall-clock second and per CPU second (the
// latter is what one core achieves, whatever else runs on the machine).
func reportRates(b *testing.B, cpu time.Duration, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit+"/s")
	if cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), unit+"/cpu-s")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func BenchmarkSign(b *testing.B) {
	lex, err := DefaultLexicon()
	if err != nil {
		b.Fatal(err)
	}
	s := mustSigner(b, lex, Options{})
	rng := rand.New(rand.NewPCG(9, 9))
	var docs [][]string
	for range 50 {
		docs = append(docs, TextTerms(zipfText(rng, lex, 4200), mime.TokenOptions{}))
	}
	b.ReportAllocs()
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		s.Sign(docs[i%len(docs)])
	}
	reportRates(b, cpuTime()-cpu, "docs")
}

// BenchmarkPipeline measures raw message → mime.Parse → Tokenize →
// UniqueTerms → Sign (K = 10) over a realistic mix of ~5 KB messages.
func BenchmarkPipeline(b *testing.B) {
	lex, err := DefaultLexicon()
	if err != nil {
		b.Fatal(err)
	}
	s := mustSigner(b, lex, Options{})
	msgs := benchMessages(b, lex)
	size := 0
	for _, m := range msgs {
		size += len(m)
	}
	b.SetBytes(int64(size / len(msgs)))
	b.ReportAllocs()
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		s.Sign(MessageTerms(msgs[i%len(msgs)], mime.Options{}, mime.TokenOptions{}))
	}
	reportRates(b, cpuTime()-cpu, "msgs")
}

// BenchmarkPipelineStages splits the pipeline's time between its stages.
func BenchmarkPipelineStages(b *testing.B) {
	lex, err := DefaultLexicon()
	if err != nil {
		b.Fatal(err)
	}
	s := mustSigner(b, lex, Options{})
	msgs := benchMessages(b, lex)
	docs := make([]*mime.Document, len(msgs))
	toks := make([][]mime.Token, len(msgs))
	terms := make([][]string, len(msgs))
	for i, m := range msgs {
		docs[i] = mime.Parse(m, mime.Options{})
		toks[i] = mime.Tokenize(docs[i], mime.TokenOptions{})
		terms[i] = mime.UniqueTerms(toks[i])
	}
	b.Run("Parse", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime()
		for i := 0; b.Loop(); i++ {
			mime.Parse(msgs[i%len(msgs)], mime.Options{})
		}
		reportRates(b, cpuTime()-cpu, "msgs")
	})
	b.Run("Tokenize", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime()
		for i := 0; b.Loop(); i++ {
			mime.Tokenize(docs[i%len(docs)], mime.TokenOptions{})
		}
		reportRates(b, cpuTime()-cpu, "msgs")
	})
	b.Run("UniqueTerms", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime()
		for i := 0; b.Loop(); i++ {
			mime.UniqueTerms(toks[i%len(toks)])
		}
		reportRates(b, cpuTime()-cpu, "msgs")
	})
	b.Run("Sign", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime()
		for i := 0; b.Loop(); i++ {
			s.Sign(terms[i%len(terms)])
		}
		reportRates(b, cpuTime()-cpu, "msgs")
	})
}
