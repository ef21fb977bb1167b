package train

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/lab/eval/pairs"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
)

var texts = []string{
	"Refinance your mortgage today at the lowest rates ever offered. Our lenders compete for your business and approval takes minutes. Visit our website and fill the short application form to save thousands of dollars every year.",
	"Exclusive pharmacy discounts on brand medications shipped overnight without prescription. Order quality medicine from our licensed online drugstore with complete privacy and fast delivery worldwide.",
	"Congratulations, your email address has won the international lottery draw held last week. To claim your prize of two million dollars contact our claims agent with your full name, address and bank details immediately.",
	"Work from home and earn five thousand dollars weekly with our proven system. No experience required, just a computer and internet connection. Thousands of satisfied members already changed their lives, join them now.",
	"Lose weight fast with our revolutionary herbal supplement. Clinical studies prove that customers lose up to thirty pounds in the first month without dieting or exercise. Order your free trial bottle while supplies last.",
	"Hi team, the quarterly planning meeting moves to Thursday afternoon in the large conference room. Please bring your project status and budget estimates for the next quarter.",
}

// writeClusters writes one sub-directory of randomized copies per text.
func writeClusters(t *testing.T, copies int) string {
	t.Helper()
	dir := t.TempDir()
	for i, tx := range texts {
		sub := filepath.Join(dir, fmt.Sprintf("camp%d", i))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		base := pairs.BaseFromText("x", tx, true).Raw
		for c := range copies {
			raw, err := spamgen.Mutate(base, spamgen.Options{Seed: uint64(10*i + c), Strength: 0.05, Kinds: []spamgen.Kind{spamgen.Typos}})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("%d.eml", c)), raw, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// TestTrainAndCompare trains a small model from labeled campaigns, reads
// it back, and compares methods on the same campaigns.
func TestTrainAndCompare(t *testing.T) {
	dir := writeClusters(t, 4)
	out := filepath.Join(t.TempDir(), "model.json")
	var stdout bytes.Buffer
	o := Options{Clusters: dir, Out: out, Seed: 1, Pairs: 200, L2: 0.001, Scale: 10, Sim: andd.SimCosine,
		Holdout: 0.5, MaxIter: 5, NGram: 1, LSH: andd.LSH{MinHashes: -1}, Quiet: true, MinRecall: 0.8, MaxFPR: 1e-4}
	if err := Train(context.Background(), o, &stdout); err != nil {
		t.Fatalf("train: %v\n%s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), "wrote "+out) || !strings.Contains(stdout.String(), "λ[") {
		t.Errorf("train output:\n%s", stdout.String())
	}
	m, err := loadModel(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Training.Source != "clusters "+dir {
		t.Errorf("model source %q", m.Training.Source)
	}
	if err := Train(context.Background(), Options{Out: out}, &stdout); err == nil ||
		!strings.Contains(err.Error(), "exactly one") {
		t.Errorf("no source: %v", err)
	}

	stdout.Reset()
	co := CompareOptions{Clusters: dir, Model: out, Methods: []string{pairs.MethodANDDLSHCos, pairs.MethodTFIDF}, Bands: []string{"16x12"}, Quiet: true}
	if err := Compare(context.Background(), co, &stdout); err != nil {
		t.Fatalf("compare: %v\n%s", err, stdout.String())
	}
	for _, want := range []string{"24 messages, 6 campaigns", "ANDD-LSH-Cos at the model's threshold"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("compare output lacks %q:\n%s", want, stdout.String())
		}
	}
	if err := Compare(context.Background(), CompareOptions{}, &stdout); err == nil {
		t.Error("compare without a test set succeeded")
	}
}
