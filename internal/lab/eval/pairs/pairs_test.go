package pairs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
)

// texts are base documents for synthetic campaigns: distinct topics, so
// that campaigns are unrelated to each other.
var texts = []string{
	"Refinance your mortgage today at the lowest rates ever offered. Our lenders compete for your business and approval takes minutes. Visit our website and fill the short application form to save thousands of dollars every year.",
	"Exclusive pharmacy discounts on brand medications shipped overnight without prescription. Order viagra cialis and other quality medicine from our licensed online drugstore with complete privacy and fast delivery worldwide.",
	"Congratulations, your email address has won the international lottery draw held last week. To claim your prize of two million dollars contact our claims agent with your full name, address and bank details immediately.",
	"Work from home and earn five thousand dollars weekly with our proven system. No experience required, just a computer and internet connection. Thousands of satisfied members already changed their lives, join them now.",
	"Dear friend, I am the son of the late minister of finance and need your assistance to transfer funds out of the country. You will receive thirty percent of the total sum for your cooperation and discretion in this matter.",
	"Lose weight fast with our revolutionary herbal supplement. Clinical studies prove that customers lose up to thirty pounds in the first month without dieting or exercise. Order your free trial bottle while supplies last.",
}

var hamTexts = []string{
	"Hi team, the quarterly planning meeting moves to Thursday afternoon in the large conference room. Please bring your project status and budget estimates for the next quarter.",
	"The build server will be down for maintenance on Saturday morning while we upgrade the disks. Commits pushed during the window will be tested on Monday.",
	"Thanks for the draft of the paper. I left comments on the evaluation section; the baseline numbers look inconsistent with the table in the appendix.",
	"Reminder: the library closes early on Friday for the holiday. Books due during the closure can be returned the following Tuesday without penalty.",
}

func testItems(t *testing.T, copies int) []Item {
	t.Helper()
	var bases []Item
	for i, tx := range texts {
		b := BaseFromText(fmt.Sprintf("base%d", i), tx, true)
		bases = append(bases, b)
	}
	items := Synthesize(bases, 0, SynthOptions{Copies: copies, Seed: 3, Kinds: []spamgen.Kind{spamgen.HashBuster, spamgen.Typos}})
	for i, h := range hamTexts {
		it := BaseFromText(fmt.Sprintf("ham%d", i), h, false)
		it.Cluster = -1
		items = append(items, it)
	}
	return items
}

func TestCompare(t *testing.T) {
	items := testItems(t, 3)
	st := Describe(items)
	if st.Clusters != len(texts) || st.Positives != len(texts)*6 || st.Singletons != len(hamTexts) {
		t.Fatalf("Describe = %+v", st)
	}
	rows, err := Compare(context.Background(), items, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(AllMethods()) {
		t.Fatalf("%d rows", len(rows))
	}
	var buf bytes.Buffer
	if err := Markdown(&buf, rows); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + buf.String())
	for _, r := range rows {
		if r.Positives != st.Positives {
			t.Errorf("%s: %d positives, want %d", r.Method, r.Positives, st.Positives)
		}
		if r.F1 < 0 || r.F1 > 1 || r.Precision < 0 || r.Recall > 1 {
			t.Errorf("%s: bad PRF %+v", r.Method, r.PRF)
		}
		switch r.Method {
		case MethodANDDRawCos, MethodANDDLSHCos, MethodTFIDF, MethodBinary:
			// Light randomization of very different topics: easy.
			if r.F1 < 0.9 {
				t.Errorf("%s: Max F1 %.3f < 0.9", r.Method, r.F1)
			}
		}
	}
}

func TestScoresOrder(t *testing.T) {
	items := testItems(t, 1)
	pp, err := Prepare(context.Background(), items, Options{Methods: []string{MethodBinary}})
	if err != nil {
		t.Fatal(err)
	}
	s := pp.Scores(MethodBinary)
	n := len(items)
	k := 0
	for i := range n {
		for j := i + 1; j < n; j++ {
			if got, want := s[k], pp.score(MethodBinary, i, j); got != want {
				t.Fatalf("pair (%d,%d) at %d: %v != %v", i, j, k, got, want)
			}
			k++
		}
	}
	if k != len(s) {
		t.Fatalf("%d scores for %d pairs", len(s), k)
	}
}

func TestBands(t *testing.T) {
	items := testItems(t, 3)
	pp, err := Prepare(context.Background(), items, Options{Methods: []string{MethodANDDLSHCos}})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pp.Bands(0.7, []BandConfig{{8, 16}, {32, 8}})
	if err != nil {
		t.Fatal(err)
	}
	// Shorter bands: more recall, more candidates.
	if rows[1].Recall < rows[0].Recall || rows[1].Candidates < rows[0].Candidates {
		t.Errorf("band rows not monotonic: %+v", rows)
	}
	if rows[1].Recall < 0.9 {
		t.Errorf("32×8 recall %.3f", rows[1].Recall)
	}
	var buf bytes.Buffer
	BandsMarkdown(&buf, 0.7, rows)
	t.Log("\n" + buf.String())
}

func TestMergeNaturalDuplicates(t *testing.T) {
	a := BaseFromText("a", texts[0], false)
	b := BaseFromText("b", texts[0]+" today", false) // near-duplicate
	c := BaseFromText("c", texts[1], false)
	a.Cluster, b.Cluster, c.Cluster = -1, -1, 5
	items := []Item{a, b, c}
	if n := MergeNaturalDuplicates(items, 0.9); n != 1 {
		t.Errorf("%d merges, want 1", n)
	}
	if items[0].Cluster != items[1].Cluster || items[0].Cluster == items[2].Cluster || items[2].Cluster != 5 {
		t.Errorf("clusters %d %d %d", items[0].Cluster, items[1].Cluster, items[2].Cluster)
	}
}

func TestLoadClustersAndCSV(t *testing.T) {
	dir := t.TempDir()
	for i, tx := range texts[:2] {
		sub := filepath.Join(dir, fmt.Sprintf("camp%d", i))
		os.MkdirAll(sub, 0o755)
		for c := range 2 {
			raw := BaseFromText("x", tx+strings.Repeat(" more", c), false).Raw
			os.WriteFile(filepath.Join(sub, fmt.Sprintf("%d.eml", c)), raw, 0o644)
		}
	}
	items, names, err := LoadClusters(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 4 || len(names) != 2 || items[0].Cluster != 0 || items[3].Cluster != 1 {
		t.Fatalf("LoadClusters: %d items, names %v", len(items), names)
	}
	csvPath := filepath.Join(dir, "labels.csv")
	os.WriteFile(csvPath, []byte("path,cluster\ncamp0/0.eml,spam-a\ncamp1/0.eml,spam-b\ncamp0/1.eml,spam-a\n"), 0o644)
	items, names, err = LoadCSV(context.Background(), csvPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 3 || len(names) != 2 || items[0].Cluster != items[2].Cluster || items[1].Cluster == items[0].Cluster {
		t.Fatalf("LoadCSV: %+v %v", items, names)
	}
	os.WriteFile(csvPath, []byte("only-one-field\n"), 0o644)
	if _, _, err := LoadCSV(context.Background(), csvPath); err == nil {
		t.Error("bad CSV accepted")
	}
	if _, _, err := LoadClusters(context.Background(), filepath.Join(dir, "camp0")); err == nil {
		t.Error("directory without sub-directories accepted")
	}
}

func TestUnknownMethod(t *testing.T) {
	if _, err := Prepare(context.Background(), nil, Options{Methods: []string{"nope"}}); err == nil {
		t.Error("unknown method accepted")
	}
	if _, err := andd.DefaultJaccardModel(); err != nil {
		t.Fatal(err)
	}
}
