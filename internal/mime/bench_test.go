package mime

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
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

// runRaw runs fn over msgs, one message per op, reporting the average
// message size and the CPU time per op.
func runRaw(b *testing.B, msgs [][]byte, total int, fn func([]byte)) {
	b.SetBytes(int64(total / len(msgs)))
	b.ReportAllocs()
	m := startCPU(b)
	for i := 0; i < b.N; i++ {
		fn(msgs[i%len(msgs)])
	}
	m.stop(b)
}

// runDocs parses msgs first (untimed), then runs fn over the documents.
func runDocs(b *testing.B, msgs [][]byte, total int, fn func(*Document)) {
	docs := make([]*Document, len(msgs))
	for i, m := range msgs {
		docs[i] = Parse(m, Options{})
	}
	b.SetBytes(int64(total / len(msgs)))
	b.ReportAllocs()
	m := startCPU(b)
	for i := 0; i < b.N; i++ {
		fn(docs[i%len(docs)])
	}
	m.stop(b)
}

// The stages over the sample mix (benchMix) and over a real corpus
// (NDD_CORPUS, loadCorpus); one op is one message.

func BenchmarkParse(b *testing.B) {
	msgs, total := benchMix(b)
	runRaw(b, msgs, total, func(m []byte) { Parse(m, Options{}) })
}

// BenchmarkTokenize is Tokenize + UniqueTerms of parsed documents.
func BenchmarkTokenize(b *testing.B) {
	msgs, total := benchMix(b)
	runDocs(b, msgs, total, func(d *Document) { UniqueTerms(Tokenize(d, TokenOptions{})) })
}

// BenchmarkUniqueTermsOf is BenchmarkTokenize's work through UniqueTermsOf.
func BenchmarkUniqueTermsOf(b *testing.B) {
	msgs, total := benchMix(b)
	runDocs(b, msgs, total, func(d *Document) { UniqueTermsOf(d, TokenOptions{}) })
}

// BenchmarkAnalyze is BenchmarkUniqueTermsOf plus the per-term statistics.
func BenchmarkAnalyze(b *testing.B) {
	msgs, total := benchMix(b)
	runDocs(b, msgs, total, func(d *Document) { Analyze(d, TokenOptions{}) })
}

// BenchmarkParseTokenize is the whole of this package's share of the
// pipeline: raw message → document → sorted unique terms.
func BenchmarkParseTokenize(b *testing.B) {
	msgs, total := benchMix(b)
	runRaw(b, msgs, total, parseTokenize)
}

func BenchmarkCorpusParse(b *testing.B) {
	msgs, total := loadCorpus(b)
	runRaw(b, msgs, total, func(m []byte) { Parse(m, Options{}) })
}

func BenchmarkCorpusTokenize(b *testing.B) {
	msgs, total := loadCorpus(b)
	runDocs(b, msgs, total, func(d *Document) { UniqueTerms(Tokenize(d, TokenOptions{})) })
}

func BenchmarkCorpusUniqueTermsOf(b *testing.B) {
	msgs, total := loadCorpus(b)
	runDocs(b, msgs, total, func(d *Document) { UniqueTermsOf(d, TokenOptions{}) })
}

func BenchmarkCorpusParseTokenize(b *testing.B) {
	msgs, total := loadCorpus(b)
	runRaw(b, msgs, total, parseTokenize)
}

func parseTokenize(m []byte) { UniqueTerms(Tokenize(Parse(m, Options{}), TokenOptions{})) }

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

// BenchmarkHostile is the whole of this package's share of the pipeline
// (Parse, then Analyze) on each hostile message of spamgen at about the
// milter's default body cap (1 MiB): its MB/s is scanned bytes per second
// of the raw message, its cpu-ns/op the CPU one message costs. Run with
// -cpu 1.
func BenchmarkHostile(b *testing.B) {
	for _, kind := range spamgen.HostileKinds() {
		raw := spamgen.NewHostile(kind, 1<<20)
		b.Run(string(kind), func(b *testing.B) {
			runRaw(b, [][]byte{raw}, len(raw), func(m []byte) { Analyze(Parse(m, Options{}), TokenOptions{}) })
		})
	}
}
