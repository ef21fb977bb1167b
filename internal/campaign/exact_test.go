package campaign

import (
	"testing"

	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/ppjoin"
	"github.com/nddmilter/nddmilter/internal/store"
)

// An ANDD-only match is verified against the campaign's kept term sets
// when Options.ANDDExactCosine is set; a campaign that keeps none is not
// held to it.
func TestEngineANDDExact(t *testing.T) {
	tests := []struct {
		name      string
		exact     float64
		keepTerms bool
		match     bool
	}{
		{"off", 0, true, true},
		{"reached", 0.2, true, true},
		{"missed: a misspelled copy has other terms", 0.999, true, false},
		{"campaign without term sets", 0.999, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{ANDDExactCosine: tt.exact})
			if f.eng.Checker.andd == nil {
				t.Skip("no ANDD model")
			}
			s, err := f.sign(baseMessage(1))
			if err != nil || !s.HasSketch() {
				t.Fatalf("sign: %v", err)
			}
			in := store.ReportInput{Time: f.clock.Now(), Kind: store.KindSpam, Reporter: "x",
				Keys: s.BandKeys, Sketch: s.SketchBytes, Create: true, Index: true}
			if tt.keepTerms {
				in.Terms = pipeline.EncodeTerms(s.TermHashes())
			}
			r, err := f.st.Report(f.ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			cp := copyOf(t, 1, 3, spamgen.Typos)
			v := f.check(t, cp)
			if got := v.Campaign == r.Campaign; got != tt.match {
				t.Fatalf("matched %v, want %v: %+v", got, tt.match, v)
			}
			if !tt.match || tt.exact == 0 || !tt.keepTerms {
				return
			}
			cs, err := f.sign(cp)
			if err != nil {
				t.Fatal(err)
			}
			want := ppjoin.Similarity(ppjoin.Cosine, cs.TermHashes(), s.TermHashes())
			if len(v.Evidence) != 1 || v.Evidence[0].Exact != want || want < tt.exact {
				t.Errorf("evidence %+v, want the exact cosine %v", v.Evidence, want)
			}
		})
	}
}

// A spam report keeps its term set only when the exact check is on.
func TestReportKeepsTerms(t *testing.T) {
	for _, exact := range []float64{0, 0.5} {
		f := newFixture(t, Options{ANDDExactCosine: exact})
		o := f.report(t, baseMessage(2), store.KindSpam, "x")
		c, err := f.st.Get(f.ctx, o.Campaign)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(c.Terms) > 0; got != (exact > 0) {
			t.Errorf("exact %v: %d term sets kept", exact, len(c.Terms))
		}
		for _, b := range c.Terms {
			if _, err := pipeline.DecodeTerms(b); err != nil {
				t.Errorf("kept term set: %v", err)
			}
		}
	}
}
