package imatchbag

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/mailbox"
	"github.com/nddmilter/nddmilter/internal/mime"
)

// TestTuneCorpus prints the tuning table (docs/design/imatch.md) for the plain
// text documents under $NDD_TUNE_DIR (scripts/build-default-lexicon.sh
// --tune sets it). Optional: NDD_TUNE_WINDOWS ("0.1-0.3,0.2-0.4"),
// NDD_TUNE_MINRATIO, NDD_TUNE_MINTERMS, NDD_TUNE_K.
func TestTuneCorpus(t *testing.T) {
	var negNames []string
	dir := os.Getenv("NDD_TUNE_DIR")
	if dir == "" {
		t.Skip("set NDD_TUNE_DIR to a directory of plain-text documents")
	}
	var docs [][]string
	err := mailbox.Walk(context.Background(), []string{dir}, mailbox.Options{Mbox: mailbox.MboxNever}, func(m mailbox.Message) error {
		toks := mime.Tokenize(&mime.Document{Text: string(m.Raw)}, mime.TokenOptions{})
		terms := make([]string, len(toks))
		for i, tk := range toks {
			terms[i] = tk.Term
		}
		if len(terms) > 0 {
			docs = append(docs, terms)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var o TuneOptions
	if w := os.Getenv("NDD_TUNE_WINDOWS"); w != "" {
		for _, part := range strings.Split(w, ",") {
			var a, b float64
			if _, err := fmt.Sscanf(part, "%g-%g", &a, &b); err != nil {
				t.Fatalf("NDD_TUNE_WINDOWS: %v", err)
			}
			o.Windows = append(o.Windows, [2]float64{a, b})
		}
	}
	o.Signer.MinRatio, _ = strconv.ParseFloat(os.Getenv("NDD_TUNE_MINRATIO"), 64)
	o.Signer.MinTerms, _ = strconv.Atoi(os.Getenv("NDD_TUNE_MINTERMS"))
	o.Signer.K, _ = strconv.Atoi(os.Getenv("NDD_TUNE_K"))
	o.ShortWords, _ = strconv.Atoi(os.Getenv("NDD_TUNE_SHORT"))
	if neg := os.Getenv("NDD_TUNE_NEGATIVES"); neg != "" {
		var names []string
		err := mailbox.Walk(context.Background(), strings.Split(neg, ","), mailbox.Options{}, func(m mailbox.Message) error {
			o.Negatives = append(o.Negatives, MessageTerms(m.Raw, mime.Options{}, mime.TokenOptions{}))
			names = append(names, m.Path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { t.Logf("negatives: %d messages", len(names)) }()
		negNames = names
	}
	rep, err := Tune(docs, o)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("corpus %s; options %+v\n%s", dir, o.Signer, rep.Markdown())
	for _, row := range rep.Rows {
		if row.NegDissimilar > 0 {
			fmt.Printf("[%g, %g] example dissimilar pair: %s %s\n", row.IdfMin, row.IdfMax, negNames[row.NegExample[0]], negNames[row.NegExample[1]])
		}
	}
}

func TestTuneSynthetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var docs [][]string
	for range 400 {
		var d []string
		for range 80 {
			d = append(d, fmt.Sprintf("w%03d", int(rng.ExpFloat64()*150)))
		}
		docs = append(docs, d)
	}
	rep, err := Tune(docs, TuneOptions{Windows: [][2]float64{{0.1, 0.4}, {0.2, 0.6}}, Negatives: docs[:50], Signer: Options{MinTerms: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Eval != 80 || len(rep.Rows) != 2 {
		t.Fatalf("eval %d rows %d", rep.Eval, len(rep.Rows))
	}
	for _, r := range rep.Rows {
		for i := range r.Recall {
			if r.Recall[i] < r.RecallPlain[i] || r.Recall[i] > 1 {
				t.Errorf("window [%g, %g] %s: bagged recall %.3f below the original lexicon's %.3f", r.IdfMin, r.IdfMax, rep.Perturbations[i], r.Recall[i], r.RecallPlain[i])
			}
		}
		if r.Signed <= 0 || r.NegDissimilar > r.NegFalsePairs || r.FalsePairsPlain > r.FalsePairs {
			t.Errorf("row %+v", r)
		}
	}
	if md := rep.Markdown(); !strings.Contains(md, "| [0.1, 0.4] |") {
		t.Errorf("markdown:\n%s", md)
	}
	if _, err := Tune(docs[:3], TuneOptions{}); err == nil {
		t.Error("3 documents: want an error")
	}
}
