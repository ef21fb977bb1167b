package mime

import (
	"os"
	"path/filepath"
	"testing"
)

// cpuMeter reports CPU time per op next to wall time: on a loaded machine
// wall time is noise, CPU time (run with -cpu=1) is what one core spends.
type cpuMeter struct{ start int64 }

func startCPU(b *testing.B) cpuMeter {
	b.ResetTimer()
	return cpuMeter{processCPU()}
}

func (m cpuMeter) stop(b *testing.B) {
	b.StopTimer()
	if m.start > 0 && b.N > 0 {
		b.ReportMetric(float64(processCPU()-m.start)/float64(b.N), "cpu-ns/op")
	}
}

// benchMix is the sample mix of testdata: plain, HTML, multipart,
// base64/QP and a dozen non-UTF-8 charsets, plus the malformed samples.
func benchMix(b *testing.B) (msgs [][]byte, total int) {
	b.Helper()
	files, err := filepath.Glob("testdata/*.eml")
	if err != nil || len(files) == 0 {
		b.Fatalf("samples: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, raw)
		total += len(raw)
	}
	return msgs, total
}

// BenchmarkParse measures Parse over the sample mix; one op is one
// message.
func BenchmarkParse(b *testing.B) {
	msgs, total := benchMix(b)
	b.SetBytes(int64(total / len(msgs)))
	b.ReportAllocs()
	m := startCPU(b)
	for i := 0; i < b.N; i++ {
		Parse(msgs[i%len(msgs)], Options{})
	}
	m.stop(b)
}

// BenchmarkTokenize measures Tokenize + UniqueTerms over the parsed mix.
func BenchmarkTokenize(b *testing.B) {
	msgs, total := benchMix(b)
	docs := make([]*Document, len(msgs))
	for i, m := range msgs {
		docs[i] = Parse(m, Options{})
	}
	b.SetBytes(int64(total / len(msgs)))
	b.ReportAllocs()
	m := startCPU(b)
	for i := 0; i < b.N; i++ {
		UniqueTerms(Tokenize(docs[i%len(docs)], TokenOptions{}))
	}
	m.stop(b)
}

// BenchmarkParseTokenize is the whole of this package's share of the
// pipeline: raw message → document → sorted unique terms.
func BenchmarkParseTokenize(b *testing.B) {
	msgs, total := benchMix(b)
	b.SetBytes(int64(total / len(msgs)))
	b.ReportAllocs()
	m := startCPU(b)
	for i := 0; i < b.N; i++ {
		d := Parse(msgs[i%len(msgs)], Options{})
		UniqueTerms(Tokenize(d, TokenOptions{}))
	}
	m.stop(b)
}

// BenchmarkHTML measures visible-text extraction of the HTML sample body.
func BenchmarkHTML(b *testing.B) {
	d := []byte(htmlBenchDoc)
	b.SetBytes(int64(len(d)))
	b.ReportAllocs()
	m := startCPU(b)
	for i := 0; i < b.N; i++ {
		VisibleTextFromHTML(d)
	}
	m.stop(b)
}

const htmlBenchDoc = `<html><head><title>t</title><style>p{}</style></head><body>
<div style="display:none">preheader</div><table><tr><td><h1>Spring Edition</h1>
<p>The weather finally turned, and the <b>community garden</b> is open again every
Saturday morning from eight until noon. We need volunteers for the compost
station, the seedling exchange and the children's corner. Please sign up on the
<a href="https://garden.example.org/volunteer?utm_source=news">volunteer page</a>
before the first weekend of April.</p><p>Our annual plant sale takes place on May&nbsp;12th
in the parking lot behind the library. Members receive a discount on perennials.</p>
<ul><li>Pruning fruit trees</li><li>Growing tomatoes on a balcony</li></ul>
</td></tr></table></body></html>`

// BenchmarkUniqueTermsOf is BenchmarkTokenize's work (the sorted unique
// terms of a parsed document) through UniqueTermsOf.
func BenchmarkUniqueTermsOf(b *testing.B) {
	msgs, total := benchMix(b)
	docs := make([]*Document, len(msgs))
	for i, m := range msgs {
		docs[i] = Parse(m, Options{})
	}
	b.SetBytes(int64(total / len(msgs)))
	b.ReportAllocs()
	m := startCPU(b)
	for i := 0; i < b.N; i++ {
		UniqueTermsOf(docs[i%len(docs)], TokenOptions{})
	}
	m.stop(b)
}
