package eval

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

func TestZZQ3(t *testing.T) {
	if os.Getenv("Q3") == "" {
		t.Skip()
	}
	ctx := context.Background()
	c, err := LoadCorpus("../../.cache/spamassassin", LoadOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ao AccuracyOptions
	if err := ao.defaults(); err != nil {
		t.Fatal(err)
	}
	if th, err := strconv.ParseFloat(os.Getenv("QTH"), 64); err == nil {
		ao.Engine.QGram.Threshold = th
	}
	st, err := store.Open(t.TempDir(), store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := campaign.New(st, ao.Lexicon, ao.Model, ao.Engine, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Docs {
		d := &c.Docs[i]
		if d.Class != Spam {
			continue
		}
		for r := range 3 {
			if _, err := eng.Report(ctx, d.Raw, store.KindSpam, fmt.Sprintf("r%d@x", r)); err != nil {
				t.Fatal(err)
			}
		}
	}
	flagged := 0
	for i := range c.Docs {
		d := &c.Docs[i]
		if d.Class != Ham {
			continue
		}
		v, err := eng.Evaluate(ctx, d.Raw)
		if err != nil {
			t.Fatal(err)
		}
		if v.Action != action.Accept {
			flagged++
			fmt.Println("FLAGGED", d.Path, v.Rule)
		}
		for _, ev := range v.Evidence {
			if ev.Family == campaign.FamilyQGram {
				fmt.Printf("QEV %s %.3f %s\n", d.Path, ev.Similarity, v.Action)
			}
		}
	}
	fmt.Println("ham flagged", flagged)
}

func TestZZQAdv(t *testing.T) {
	if os.Getenv("QADV") == "" {
		t.Skip()
	}
	c, err := LoadCorpus("../../.cache/spamassassin", LoadOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range []float64{0.45, 0.5, 0.55} {
		var ao AccuracyOptions
		ao.Workers = 1
		if err := ao.defaults(); err != nil {
			t.Fatal(err)
		}
		ao.Engine.QGram.Threshold = th
		r, err := RunAdversarial(context.Background(), c, AdversarialOptions{Kinds: []spamgen.Kind{spamgen.Typos, spamgen.Combo}, Strengths: []float64{0.2, 0.3}, Accuracy: ao})
		if err != nil {
			t.Fatal(err)
		}
		for _, cell := range r.Cells {
			fmt.Printf("th %.2f %s %.2f rate %.3f\n", th, cell.Kind, cell.Strength, cell.Rate)
		}
		fmt.Printf("th %.2f ham flagged %d\n", th, r.HamFlagged)
	}
}
