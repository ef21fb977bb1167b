package eval

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
)

// synthetic builds a small labelled corpus on disk: ham messages of words
// drawn uniformly from a random vocabulary (so that no two are similar), and spam
// campaigns whose copies are spamgen variants of one base message. It also
// returns a lexicon built from the ham (the embedded Brown lexicon knows
// none of the random words).
var synthetic = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "nddmilter-eval-test-")
	if err != nil {
		return "", err
	}
	rng := rand.New(rand.NewPCG(7, 7))
	const letters = "abcdefghijklmnopqrstuvwxyz"
	vocab := make([]string, 3000)
	for i := range vocab {
		n := 5 + rng.IntN(5)
		b := make([]byte, n)
		for j := range b {
			b[j] = letters[rng.IntN(len(letters))]
		}
		vocab[i] = string(b)
	}
	text := func(n int) string {
		var paras []string
		for len(paras) < 3 {
			w := make([]string, n/3)
			for i := range w {
				w[i] = vocab[rng.IntN(len(vocab))]
			}
			paras = append(paras, strings.Join(w, " ")+".")
		}
		return strings.Join(paras, "\n\n")
	}
	write := func(sub string, i int, raw []byte) error {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, sub, fmt.Sprintf("%04d.eml", i)), raw, 0o644)
	}
	for i := 0; i < 300; i++ {
		if err := write("easy_ham", i, spamgen.NewMessage("note "+vocab[rng.IntN(len(vocab))], text(90), false)); err != nil {
			return "", err
		}
	}
	n := 0
	for c := 0; c < 5; c++ {
		base := spamgen.NewMessage("offer "+vocab[c], text(120), c%2 == 0)
		for k := 0; k < 10; k++ {
			raw, err := spamgen.Mutate(base, spamgen.Options{Kinds: []spamgen.Kind{spamgen.Typos}, Strength: 0.02, Seed: uint64(100*c + k)})
			if err != nil {
				return "", err
			}
			if err := write("spam", n, raw); err != nil {
				return "", err
			}
			n++
		}
	}
	// singleton spam
	for k := 0; k < 20; k++ {
		if err := write("spam", n, spamgen.NewMessage("single "+vocab[k], text(60), false)); err != nil {
			return "", err
		}
		n++
	}
	return dir, nil
})

func loadSynthetic(t *testing.T) (*Corpus, AccuracyOptions) {
	t.Helper()
	dir, err := synthetic()
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadCorpus(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := imatchbag.NewBuilder()
	for i := range c.Docs {
		if c.Docs[i].Class == Ham {
			b.Add(c.Docs[i].Terms)
		}
	}
	lex, err := b.Build(imatchbag.BuildOptions{IdfMin: 0.2, IdfMax: 0.8})
	if err != nil {
		t.Fatal(err)
	}
	return c, AccuracyOptions{Seeds: 2, ReportShare: 0.25, Lexicon: lex, TempDir: t.TempDir()}
}

func TestMain(m *testing.M) {
	if os.Getenv("NDD_EVAL_FAKE_BENCH") == "1" {
		fmt.Println("store           /tmp/x")
		fmt.Println("lookup known    100 msgs × 16 keys: p50 12.5µs  p90 20µs  p99 1.5ms  p99.9 3ms  max 4ms")
		fmt.Println("disk total      1000 bytes (0.0 MiB), 10.0 bytes/signature")
		os.Exit(0)
	}
	code := m.Run()
	if dir, err := synthetic(); err == nil && dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

func TestLoadCorpus(t *testing.T) {
	c, _ := loadSynthetic(t)
	if got := c.Count(Ham); got != 300 {
		t.Errorf("ham = %d, want 300", got)
	}
	if got := c.Count(Spam); got != 70 {
		t.Errorf("spam = %d, want 70", got)
	}
	for _, d := range c.Docs {
		if len(d.Terms) < MinUnique {
			t.Errorf("%s: %d terms", d.Path, len(d.Terms))
		}
		if !slices.IsSorted(d.Terms) {
			t.Errorf("%s: terms not sorted", d.Path)
		}
	}
	if _, err := LoadCorpus(t.TempDir(), LoadOptions{}); err == nil {
		t.Error("empty folder accepted")
	}
}

func TestTrivialDuplicates(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "spam"), 0o755)
	m := spamgen.NewMessage("hello there", "some words in a message body here today", false)
	os.WriteFile(filepath.Join(dir, "spam", "a"), m, 0o644)
	m2, _ := spamgen.Mutate(m, spamgen.Options{Kinds: []spamgen.Kind{spamgen.Reencode}, Seed: 3})
	os.WriteFile(filepath.Join(dir, "spam", "b"), m2, 0o644)
	c, err := LoadCorpus(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Docs[0].Dup != -1 || c.Docs[1].Dup != 0 {
		t.Errorf("dups = %d, %d; want -1, 0", c.Docs[0].Dup, c.Docs[1].Dup)
	}
}

func TestCosine(t *testing.T) {
	tests := []struct {
		a, b []string
		want float64
	}{
		{[]string{"a", "b", "c", "d"}, []string{"a", "b", "c", "d"}, 1},
		{[]string{"a", "b", "c", "d"}, []string{"e", "f"}, 0},
		{[]string{"a", "b", "c", "d"}, []string{"a", "b", "x", "y"}, 0.5},
		{[]string{"a"}, nil, 0},
		{[]string{"a", "b"}, []string{"b", "c", "d", "e", "f", "g", "h", "i"}, 1 / math.Sqrt(16)},
	}
	for _, tt := range tests {
		if got := Cosine(tt.a, tt.b); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Cosine(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestNeighbours checks the inverted-index ground truth against brute force.
func TestNeighbours(t *testing.T) {
	c, _ := loadSynthetic(t)
	var from []int
	for i := range c.Docs {
		if c.Docs[i].Class == Spam {
			from = append(from, i)
		}
	}
	got := neighbours(c, from, 0.9, 2)
	for _, q := range from {
		var want []int
		for j := range c.Docs {
			if j != q && c.Docs[j].usable() && Cosine(c.Docs[q].Terms, c.Docs[j].Terms) >= 0.9 {
				want = append(want, j)
			}
		}
		if !slices.Equal(got[q], want) {
			t.Errorf("neighbours of %d = %v, want %v", q, got[q], want)
		}
	}
}

func TestRunAccuracy(t *testing.T) {
	c, opts := loadSynthetic(t)
	opts.K = []int{0, 10}
	res, err := RunAccuracy(context.Background(), c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 13 {
		t.Fatalf("%d rows, want 13 (2 I-Match, ANDD, 3 SpotSigs, 2 PPJoin, 2 q-grams, 3 engine)", len(res.Rows))
	}
	// PPJoin at the ground truth's own cosine finds every neighbour.
	if r := res.Rows[6]; !strings.HasPrefix(r.Name, "PPJoin+") || r.Recall != 1 {
		t.Errorf("%s: recall %v, want 1", r.Name, r.Recall)
	}
	// (the synthetic texts have no stopwords: SpotSigs finds nothing)
	if r := res.Rows[3]; !strings.HasPrefix(r.Name, "SpotSigs") {
		t.Errorf("row 3 is %s", r.Name)
	}
	if res.UsableSpam != 70 || res.QueriesWithN == 0 {
		t.Errorf("usable %d, queries with neighbours %.1f", res.UsableSpam, res.QueriesWithN)
	}
	for _, r := range res.Rows {
		// The ham are random texts: I-Match must never match them. ANDD's
		// learned model (owned by internal/andd) is only held to ≤ 1%.
		if r.K >= 0 && r.HamFlagged != 0 || r.HamFlagged > 3 {
			t.Errorf("%s: %v ham flagged: %v", r.Name, r.HamFlagged, r.FalsePositives)
		}
		if r.Recall < 0 || r.Recall > 1 || r.RecallFlagged < r.Recall-1e-9 {
			t.Errorf("%s: recall %v, flagged %v", r.Name, r.Recall, r.RecallFlagged)
		}
		if r.HamChecked != 300 {
			t.Errorf("%s: %v ham checked", r.Name, r.HamChecked)
		}
	}
	if res.Rows[1].Recall < res.Rows[0].Recall {
		t.Errorf("bagging lowered recall: %v → %v", res.Rows[0].Recall, res.Rows[1].Recall)
	}
	daemon := res.Rows[len(res.Rows)-1]
	if daemon.Recall < 0.8 {
		t.Errorf("daemon recall %v on light typos", daemon.Recall)
	}
	if daemon.Actions["ham/accept"] < 297 {
		t.Errorf("actions %v", daemon.Actions)
	}
	var b bytes.Buffer
	res.WriteMarkdown(&b)
	for _, want := range []string{"| configuration |", "I-Match, 1 + 10 bagged lexicons", "daemon defaults: I-Match + ANDD", "| spam |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}

func TestRunAdversarial(t *testing.T) {
	c, opts := loadSynthetic(t)
	res, err := RunAdversarial(context.Background(), c, AdversarialOptions{
		Kinds:     []spamgen.Kind{spamgen.Reencode, spamgen.Typos},
		Strengths: []float64{0.05, 0.3},
		Accuracy:  opts,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cells) != 4 || res.Reported == 0 {
		t.Fatalf("cells %d, reported %d", len(res.Cells), res.Reported)
	}
	if cell := res.Cell(spamgen.Reencode, 0.05); cell.Rate < 0.99 {
		t.Errorf("re-encoding changes no word, yet detection is %v", cell.Rate)
	}
	if res.HamFlagged > 3 {
		t.Errorf("%d ham flagged", res.HamFlagged)
	}
	var b bytes.Buffer
	res.WriteMarkdown(&b)
	if !strings.Contains(b.String(), "| reencode |") {
		t.Errorf("markdown:\n%s", b.String())
	}

	acc, err := RunAccuracy(context.Background(), c, AccuracyOptions{Seeds: 1, K: []int{0, 2}, SkipEngine: true, Lexicon: opts.Lexicon})
	if err != nil {
		t.Fatal(err)
	}
	sp := &SpeedResult{Latency: map[string][]LatencyPoint{"signature pipeline (1 core)": {{50, 1}, {99, 3}}, "store noise probe": {{50, 1}}}}
	files, err := WritePlots(t.TempDir(), acc, res, sp)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("plots %v", files)
	}
	for _, f := range files {
		checkXML(t, f)
	}
}

func checkXML(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", path, err)
		}
	}
}

func TestParsePercentiles(t *testing.T) {
	got := parsePercentiles("p50 12.5µs  p90 20µs  p99 1.5ms  p99.9 3ms  max 4ms")
	want := []LatencyPoint{{50, 0.0125}, {90, 0.02}, {99, 1.5}, {99.9, 3}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i].Percentile != want[i].Percentile || math.Abs(got[i].Millis-want[i].Millis) > 1e-9 {
			t.Errorf("got %v, want %v", got[i], want[i])
		}
	}
	if parsePercentiles("nothing here") != nil {
		t.Error("figures from nothing")
	}
}

func TestRunSpeed(t *testing.T) {
	c, _ := loadSynthetic(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NDD_EVAL_FAKE_BENCH", "1")
	res, err := RunSpeed(context.Background(), c, SpeedOptions{
		MinDuration: 10 * time.Millisecond,
		Executable:  exe,
		Children:    [][]string{{"bench", "store", "--signatures", "1000000"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.MsgsPerSec <= 0 || len(res.Stages) != 5 || res.Passes < 1 {
		t.Errorf("pipeline: %+v", res)
	}
	if len(res.Children) != 1 || res.Children[0].Error != "" {
		t.Fatalf("children: %+v", res.Children)
	}
	if pts := res.Latency["store lookup known (1M)"]; len(pts) != 4 {
		t.Errorf("latency %v", res.Latency)
	}
	var b bytes.Buffer
	res.WriteMarkdown(&b)
	for _, want := range []string{"messages/s", "`nddlab bench store --signatures 1000000`", "10.0 bytes/signature"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
	if m := DescribeMachine(); m.Cores <= 0 || m.Go == "" {
		t.Errorf("machine %+v", m)
	}
}

// TestRunPadding: on the synthetic corpus, copies padded with 16 KiB of
// random words are detected with the short-message keys (the lead key),
// and the table says how many without them.
func TestRunPadding(t *testing.T) {
	c, opts := loadSynthetic(t)
	res, err := RunPadding(context.Background(), c, PaddingOptions{SizesKB: []int{0, 16}, Accuracy: opts})
	if err != nil {
		t.Fatal(err)
	}
	// daemon defaults, without short keys, SpotSigs alone: 2 sizes each
	if len(res.Rows) != 6 || res.Reported == 0 {
		t.Fatalf("rows %+v, reported %d", res.Rows, res.Reported)
	}
	for _, row := range res.Rows {
		if row.Config == "daemon defaults" && (row.Detected != row.Copies || row.ByLead != row.Detected) {
			t.Errorf("%+v: want every copy detected on its lead key", row)
		}
	}
	var b bytes.Buffer
	res.WriteMarkdown(&b)
	if !strings.Contains(b.String(), "| daemon defaults | 16 KiB | 1.000 |") {
		t.Errorf("markdown:\n%s", b.String())
	}
}

// TestRunReporters: every spam of the synthetic corpus reported by 3
// users, every message checked: no ham flagged, the spam acted on.
func TestRunReporters(t *testing.T) {
	c, opts := loadSynthetic(t)
	res, err := RunReporters(context.Background(), c, ReportersOptions{Accuracy: opts})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reporters != 3 || res.Ham != c.Count(Ham) || res.Spam != c.Count(Spam) {
		t.Fatalf("result %+v", res)
	}
	if len(res.FlaggedHam) != 0 || res.Actions["ham/accept"] != res.Ham {
		t.Errorf("ham flagged: %v, actions %v", res.FlaggedHam, res.Actions)
	}
	if res.Actions["spam/accept"] > res.Spam/10 {
		t.Errorf("reported spam accepted: %v", res.Actions)
	}
	var b bytes.Buffer
	if err := (&Results{Reporters: res}).WriteMarkdown(&b, "docs"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Every spam reported", "reported by 3 users", "| ham (", "Zero false positives when every spam is reported by 3 users"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}

func TestRunMistaken(t *testing.T) {
	c, opts := loadSynthetic(t)
	res, err := RunMistaken(context.Background(), c, MistakenOptions{Seeds: 2, Accuracy: opts})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 4 || res.Rows[0].Reporters != 1 || res.Rows[2].Reporters != 3 || res.Rows[1].Allowed != 0.05 ||
		res.Rows[1].AllowedCampaigns == 0 {
		t.Fatalf("rows %+v", res.Rows)
	}
	ham := float64(c.Count(Ham))
	for _, row := range res.Rows {
		if row.Reported+row.Checked != ham || row.Near+row.Far != row.Checked {
			t.Errorf("row %+v: reported + checked ≠ %g ham", row, ham)
		}
		// The synthetic ham are random texts: none is a near-copy of
		// another, and none may be flagged.
		if row.Near != 0 || row.Flagged(false) != 0 {
			t.Errorf("row %+v: near-copies or flagged ham", row)
		}
	}
	if got := res.Rows[0].Reported; got != math.Round(0.1*ham) {
		t.Errorf("1 reporter reported %g, want %g", got, math.Round(0.1*ham))
	}
	var b bytes.Buffer
	if err := (&Results{Mistaken: res}).WriteMarkdown(&b, "docs"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Mistaken reports", "| mistaken reporters |", "not-near-copies flagged 0: met"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}
