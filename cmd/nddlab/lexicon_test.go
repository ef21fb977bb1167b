package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
)

func runLexiconCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newLexiconCmd(&globalFlags{})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// lexiconCorpus writes a small corpus: plain-text documents, an mbox and
// a Maildir of messages, with words of graded document frequencies.
func lexiconCorpus(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	word := func(i int) string { return fmt.Sprintf("word%c%c", 'a'+i/26, 'a'+i%26) }
	text := func(d int) string {
		var b strings.Builder
		for w := range 120 {
			// word w appears in documents d with d % (w%20+1) == 0
			if d%(w%20+1) == 0 {
				b.WriteString(word(w) + " ")
			}
		}
		return b.String()
	}
	var mbox strings.Builder
	for d := range 60 {
		switch d % 3 {
		case 0:
			os.MkdirAll(filepath.Join(dir, "text"), 0o755)
			os.WriteFile(filepath.Join(dir, "text", fmt.Sprintf("%02d.txt", d)), []byte(text(d)), 0o644)
		case 1:
			fmt.Fprintf(&mbox, "From x@example.com Mon Jan  1 00:00:00 2024\nSubject: doc %d\n\n%s\n\n", d, text(d))
		case 2:
			p := filepath.Join(dir, "Maildir", "cur", fmt.Sprintf("%d:2,S", d))
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.MkdirAll(filepath.Join(dir, "Maildir", "new"), 0o755)
			os.MkdirAll(filepath.Join(dir, "Maildir", "tmp"), 0o755)
			os.WriteFile(p, []byte("Subject: doc\nContent-Type: text/plain\n\n"+text(d)+"\n"), 0o644)
		}
	}
	os.WriteFile(filepath.Join(dir, "box.mbox"), []byte(mbox.String()), 0o644)
	return dir
}

func TestLexiconBuildShow(t *testing.T) {
	dir := lexiconCorpus(t)
	out1 := filepath.Join(t.TempDir(), "a.lex")
	out2 := filepath.Join(t.TempDir(), "b.lex")
	list := filepath.Join(t.TempDir(), "list")
	os.WriteFile(list, []byte("# corpus\n"+filepath.Join(dir, "box.mbox")+"\n\n"), 0o644)
	msg, err := runLexiconCmd(t, "build", "--keep-duplicates", "--idf-min", "0.1", "--idf-max", "0.5", "--seed", "42", "-o", out1,
		filepath.Join(dir, "text"), filepath.Join(dir, "Maildir"), filepath.Join(dir, "box.mbox"))
	if err != nil {
		t.Fatalf("build: %v\n%s", err, msg)
	}
	if !strings.Contains(msg, "read 60 documents") {
		t.Errorf("build output %q, want 60 documents read", msg)
	}
	// Same corpus, other path order, one path through --files-from.
	if msg, err := runLexiconCmd(t, "build", "--keep-duplicates", "--idf-min", "0.1", "--idf-max", "0.5", "--seed", "42", "-o", out2,
		"--files-from", list, filepath.Join(dir, "Maildir"), filepath.Join(dir, "text")); err != nil {
		t.Fatalf("build: %v\n%s", err, msg)
	}
	a, _ := os.ReadFile(out1)
	b, _ := os.ReadFile(out2)
	if !bytes.Equal(a, b) {
		t.Fatal("lexicon build is not deterministic")
	}
	lex, err := imatchbag.ReadLexicon(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	if lex.N() != 60 || len(lex.Primary()) == 0 {
		t.Fatalf("N = %d, |L| = %d", lex.N(), len(lex.Primary()))
	}
	show, err := runLexiconCmd(t, "show", out1)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("id:              %08x", lex.ID()), "documents (N):   60", "nidf window:     [0.1, 0.5]", "bagging seed:    42",
		fmt.Sprintf("primary |L|:     %d terms", len(lex.Primary()))} {
		if !strings.Contains(show, want) {
			t.Errorf("show output lacks %q:\n%s", want, show)
		}
	}
	if _, err := runLexiconCmd(t, "show"); err == nil {
		t.Error("show without FILE or --default: want an error")
	}
	if _, err := runLexiconCmd(t, "build", "-o", filepath.Join(t.TempDir(), "x"), filepath.Join(dir, "missing")); err == nil ||
		!strings.Contains(err.Error(), "missing") {
		t.Errorf("build of a missing path: err = %v", err)
	}
}

func TestLexiconShowDefaultAndExplain(t *testing.T) {
	out, err := runLexiconCmd(t, "show", "--default")
	if err != nil {
		t.Fatal(err)
	}
	lex, _ := imatchbag.DefaultLexicon()
	if !strings.Contains(out, fmt.Sprintf("%08x", lex.ID())) || !strings.Contains(out, "Brown corpus") {
		t.Errorf("show --default:\n%s", out)
	}
	msg := filepath.Join(t.TempDir(), "m.eml")
	os.WriteFile(msg, []byte("Subject: special offer\n\nThe government announced that the program will support "+
		"development of industry and business in the area, according to the report of the committee.\n"), 0o644)
	out, err = runLexiconCmd(t, "explain", msg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "unique words U") || !strings.Contains(out, "bag  0") {
		t.Errorf("explain:\n%s", out)
	}
}

func TestLexiconTune(t *testing.T) {
	dir := lexiconCorpus(t)
	out, err := runLexiconCmd(t, "tune", "--windows", "0.1-0.5,0.2-0.6", "--min-terms", "3", "--negatives", filepath.Join(dir, "Maildir"), filepath.Join(dir, "text"), filepath.Join(dir, "box.mbox"))
	if err != nil {
		t.Fatalf("tune: %v\n%s", err, out)
	}
	if !strings.Contains(out, "| [0.1, 0.5] |") || !strings.Contains(out, "| [0.2, 0.6] |") || !strings.Contains(out, "of which dissimilar") {
		t.Errorf("tune output:\n%s", out)
	}
}
