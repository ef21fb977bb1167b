package pairs

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/mime"
)

// TestDebugWorstPairs prints the near-duplicate pairs the default model
// scores lowest on a SpamAssassin-derived set (NDD_PAIRS_DEBUG=spamdir:hamdir).
func TestDebugWorstPairs(t *testing.T) {
	env := os.Getenv("NDD_PAIRS_DEBUG")
	if env == "" {
		t.Skip("NDD_PAIRS_DEBUG not set")
	}
	items, _, err := SpamAssassinSet(context.Background(), []string{env + "/dev_spam"}, []string{env + "/dev_ham"}, SpamAssassinOptions{Bases: 60, Ham: 100})
	if err != nil {
		t.Fatal(err)
	}
	pp, err := Prepare(context.Background(), items, Options{Methods: []string{MethodANDDRawCos}})
	if err != nil {
		t.Fatal(err)
	}
	type pr struct {
		i, j int
		s    float64
	}
	var pos []pr
	for i := range items {
		for j := i + 1; j < len(items); j++ {
			if items[i].Cluster == items[j].Cluster {
				pos = append(pos, pr{i, j, pp.score(MethodANDDRawCos, i, j)})
			}
		}
	}
	slices.SortFunc(pos, func(a, b pr) int {
		if a.s < b.s {
			return -1
		}
		return 1
	})
	m, _ := andd.DefaultModel()
	s, _ := andd.NewSigner(m, pp.opts.Lexicon)
	for _, p := range pos[:8] {
		t.Logf("%.3f %s | %s", p.s, items[p.i].Name, items[p.j].Name)
		for _, k := range []int{p.i, p.j} {
			doc := mime.Parse(items[k].Raw, mime.Options{})
			toks := mime.Tokenize(doc, mime.TokenOptions{})
			v := s.Weigh(doc, toks)
			t.Logf("   %d toks, %d active: %v", len(toks), len(v), v)
		}
	}
}
