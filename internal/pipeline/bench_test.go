package pipeline

import (
	"strings"

	"context"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
)

// report reports CPU time per message (what one core spends, whatever
// else runs on the machine) and messages per CPU second.
func report(b *testing.B, cpu time.Duration) {
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "msgs/cpu-s")
	}
}

func benchLoop(b *testing.B, msgs [][]byte, fn func(raw []byte)) {
	size := 0
	for _, m := range msgs {
		size += len(m)
	}
	b.SetBytes(int64(size / len(msgs)))
	b.ReportAllocs()
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		fn(msgs[i%len(msgs)])
	}
	report(b, cpuTime()-cpu)
}

// BenchmarkFull is the whole signature computation of a ~5 KB message:
// raw → document → terms → 11 I-Match signatures + 384-bit ANDD sketch +
// 32 band keys. Separate is the same through the separate package calls
// (token list, UniqueTerms, SketchDocument); run both in one command to
// compare them on the same machine load.
func BenchmarkFull(b *testing.B) {
	im, ad, lex := signers(b)
	msgs := messages(b, lex)
	p, err := New(im, ad, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Pipeline", func(b *testing.B) {
		benchLoop(b, msgs, func(raw []byte) { p.Analyze(raw) })
	})
	b.Run("Separate", func(b *testing.B) {
		benchLoop(b, msgs, func(raw []byte) { separate(im, ad, raw, Options{}) })
	})
}

// BenchmarkIMatch is the I-Match part alone (issue #2's target: parse →
// text → terms → K+1 signatures): through Analyze, through a Pipeline
// without ANDD signer (Analyze + SignSorted), through UniqueTermsOf (with
// Sign or SignSorted) and through the separate calls (Tokenize,
// UniqueTerms).
func BenchmarkIMatch(b *testing.B) {
	im, _, lex := signers(b)
	msgs := messages(b, lex)
	b.Run("Analyze", func(b *testing.B) {
		benchLoop(b, msgs, func(raw []byte) {
			im.Sign(mime.Analyze(mime.Parse(raw, mime.Options{}), mime.TokenOptions{}).Sorted)
		})
	})
	only, err := New(im, nil, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Pipeline", func(b *testing.B) {
		benchLoop(b, msgs, func(raw []byte) { only.Analyze(raw) })
	})
	b.Run("UniqueTermsOfSorted", func(b *testing.B) {
		benchLoop(b, msgs, func(raw []byte) {
			im.SignSorted(mime.UniqueTermsOf(mime.Parse(raw, mime.Options{}), mime.TokenOptions{}))
		})
	})
	b.Run("UniqueTermsOf", func(b *testing.B) {
		benchLoop(b, msgs, func(raw []byte) {
			im.Sign(mime.UniqueTermsOf(mime.Parse(raw, mime.Options{}), mime.TokenOptions{}))
		})
	})
	b.Run("Tokenize", func(b *testing.B) {
		benchLoop(b, msgs, func(raw []byte) {
			d := mime.Parse(raw, mime.Options{})
			im.Sign(mime.UniqueTerms(mime.Tokenize(d, mime.TokenOptions{})))
		})
	})
}

// BenchmarkStages splits the pipeline's time between its stages, each
// measured on precomputed inputs.
func BenchmarkStages(b *testing.B) {
	im, ad, lex := signers(b)
	msgs := messages(b, lex)
	docs := make([]*mime.Document, len(msgs))
	ans := make([]*mime.Terms, len(msgs))
	sks := make([]andd.Sketch, len(msgs))
	for i, m := range msgs {
		docs[i] = mime.Parse(m, mime.Options{})
		ans[i] = mime.Analyze(docs[i], mime.TokenOptions{})
		sks[i] = ad.SketchTerms(docs[i], ans[i])
	}
	stage := func(name string, fn func(i int)) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			for i := 0; b.Loop(); i++ {
				fn(i % len(msgs))
			}
			report(b, cpuTime()-cpu)
		})
	}
	stage("Parse", func(i int) { mime.Parse(msgs[i], mime.Options{}) })
	stage("Analyze", func(i int) { mime.Analyze(docs[i], mime.TokenOptions{}) })
	stage("UniqueTermsOf", func(i int) { mime.UniqueTermsOf(docs[i], mime.TokenOptions{}) })
	stage("Sign", func(i int) { im.Sign(ans[i].Sorted) })
	stage("SketchTerms", func(i int) { ad.SketchTerms(docs[i], ans[i]) })
	stage("BandKeys", func(i int) { ad.BandKeys(sks[i]) })
	stage("Sign+SketchTerms", func(i int) {
		im.Sign(ans[i].Sorted)
		ad.SketchTerms(docs[i], ans[i])
	})
	_ = imatchbag.SignatureVersion
}

// BenchmarkSign is Sign (what the engine calls: footer located, short
// message keys) with and without the short-message keys; run both in one
// command to compare them on the same machine load.
func BenchmarkSign(b *testing.B) {
	im, ad, lex := signers(b)
	msgs := messages(b, lex)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		opts Options
	}{{"Short", Options{}}, {"NoShort", Options{DisableShort: true}}} {
		p, err := New(im, ad, bc.opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			benchLoop(b, msgs, func(raw []byte) {
				if _, err := p.Sign(ctx, raw); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkSignHostile signs a campaign copy followed by each kind of
// hostile content of about 1 MiB (spamgen.HostileCopy): bounded work per
// message (docs/SECURITY.md, "Hostile content"). MB/s is of raw bytes
// scanned on one core.
func BenchmarkSignHostile(b *testing.B) {
	im, ad, _ := signers(b)
	p, err := New(im, ad, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	text := strings.Repeat("Cheap meds online, order today and save on every refill you need. ", 12)
	for _, h := range spamgen.HostileKinds() {
		raw := spamgen.HostileCopy(h, 1<<20, "Your order is waiting", text)
		b.Run(string(h), func(b *testing.B) {
			benchLoop(b, [][]byte{raw}, func(raw []byte) {
				if _, err := p.Sign(ctx, raw); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
