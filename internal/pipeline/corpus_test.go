package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/corpus-evidence.txt")

// corpusDir is the directory of real messages the corpus tests and
// benchmarks read: NDD_CORPUS, else the SpamAssassin public corpus that
// scripts/fetch-corpus.sh fetches into .cache/spamassassin at the module
// root.
func corpusDir() string {
	if d := os.Getenv("NDD_CORPUS"); d != "" {
		return d
	}
	return filepath.Join("..", "..", ".cache", "spamassassin")
}

var corpus struct {
	once  sync.Once
	msgs  [][]byte
	names []string
	total int
	err   error
}

// loadCorpus reads every regular file under corpusDir, in path order
// (as internal/mime's loadCorpus: dot files and "cmds" left out), once
// per process, or skips when there is none.
func loadCorpus(tb testing.TB) (msgs [][]byte, names []string, total int) {
	tb.Helper()
	dir := corpusDir()
	if _, err := os.Stat(dir); err != nil {
		tb.Skipf("no corpus (NDD_CORPUS, or bash scripts/fetch-corpus.sh): %v", err)
	}
	corpus.once.Do(func() {
		corpus.err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") || d.Name() == "cmds" {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			corpus.msgs = append(corpus.msgs, b)
			corpus.names = append(corpus.names, filepath.ToSlash(rel))
			corpus.total += len(b)
			return nil
		})
	})
	if corpus.err != nil {
		tb.Fatalf("load corpus: %v", corpus.err)
	}
	if len(corpus.msgs) == 0 {
		tb.Fatalf("no messages under %s", dir)
	}
	return corpus.msgs, corpus.names, corpus.total
}

// BenchmarkCorpusSign is Sign, what the campaign engine calls per
// message, over every message of the corpus in turn (default options:
// I-Match, ANDD, short-message keys, q-gram sketch). One op is one
// message; cpu-ns/op is the CPU one message costs. Run with -cpu 1.
func BenchmarkCorpusSign(b *testing.B) {
	msgs, _, _ := loadCorpus(b)
	im, ad, _ := signers(b)
	p, err := New(im, ad, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	benchLoop(b, msgs, func(raw []byte) {
		if _, err := p.Sign(ctx, raw); err != nil {
			b.Fatal(err)
		}
	})
}

// TestCorpusEvidence signs every message of the corpus and compares the
// digest of their evidence (MarshalEvidence with the term hashes: every
// key, sketch, sample and skip reason) with testdata/corpus-evidence.txt,
// so that a change meant to keep signatures proves it keeps them on real
// mail. It is skipped without the corpus; a deliberate change of
// signatures rewrites the file with -update.
func TestCorpusEvidence(t *testing.T) {
	msgs, names, _ := loadCorpus(t)
	im, ad, _ := signers(t)
	p, err := New(im, ad, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for i, raw := range msgs {
		m, err := p.Sign(context.Background(), raw)
		if err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		ev, err := m.MarshalEvidence(EvidenceOptions{Terms: true})
		if err != nil {
			t.Fatalf("%s: evidence: %v", names[i], err)
		}
		h.Write([]byte(names[i]))
		h.Write([]byte{0})
		h.Write(ev)
	}
	got := hex.EncodeToString(h.Sum(nil))
	const file = "testdata/corpus-evidence.txt"
	if *update {
		if err := os.WriteFile(file, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.TrimSpace(string(want)); got != w {
		t.Errorf("evidence of %d corpus messages: digest %s, want %s: a change of signatures must be deliberate (bump the family's version, then -update)", len(msgs), got, w)
	}
}
