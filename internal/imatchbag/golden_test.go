package imatchbag

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/mime"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json")

// goldenEntry pins the signatures of one document with the default lexicon
// and options.
type goldenEntry struct {
	Name   string   `json:"name"`
	Unique int      `json:"unique"`
	Terms  int      `json:"terms"`
	Reason string   `json:"reason,omitempty"`
	Keys   []string `json:"keys"`
}

type goldenFile struct {
	SignatureVersion int    `json:"signature_version"`
	Lexicon          string `json:"lexicon"`
	// TermLists pins signing alone (fixed term lists); Messages pins the
	// whole pipeline (mime.Parse, Tokenize, UniqueTerms, Sign) on the sample
	// messages of internal/mime/testdata.
	TermLists []goldenEntry `json:"term_lists"`
	Messages  []goldenEntry `json:"messages"`
}

// goldenTexts are fixed documents whose term lists are pinned; they are
// tokenized by a trivial splitter, not by mime, so that this part of the
// golden file changes only when signing changes.
var goldenTexts = []struct{ name, text string }{
	{"pharmacy", "cheap medication online pharmacy without prescription order today special discount price quality guaranteed worldwide shipping secure payment satisfaction customers"},
	{"stock", "investors attention company announces major agreement stock expected rise significantly market analysts recommend strong position before public announcement next week"},
	{"meeting", "please find attached agenda meeting tomorrow morning discuss quarterly results budget planning department managers should prepare short report"},
	{"short", "hello there friend"},
	{"loan", "approved loan application mortgage rates lowest years refinance home save money monthly payments credit history does matter apply"},
}

func goldenOf(s *Signer, name string, terms []string) goldenEntry {
	r := s.Sign(terms)
	e := goldenEntry{Name: name, Unique: r.Unique, Terms: r.Terms, Reason: r.Reason, Keys: []string{}}
	for _, sig := range r.Signatures {
		e.Keys = append(e.Keys, hex.EncodeToString(sig.AppendKey(nil)))
	}
	return e
}

func TestGolden(t *testing.T) {
	lex, err := DefaultLexicon()
	if err != nil {
		t.Fatal(err)
	}
	s := mustSigner(t, lex, Options{})
	got := goldenFile{SignatureVersion: SignatureVersion, Lexicon: fmt.Sprintf("%08x", lex.ID())}
	for _, g := range goldenTexts {
		got.TermLists = append(got.TermLists, goldenOf(s, g.name, strings.Fields(g.text)))
	}
	files, err := filepath.Glob("../mime/testdata/*.eml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got.Messages = append(got.Messages, goldenOf(s, filepath.Base(f), MessageTerms(raw, mime.Options{}, mime.TokenOptions{})))
	}
	data, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, '\n')
	const path = "testdata/golden.json"
	if *update {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update ./internal/imatchbag/ to create it)", err)
	}
	if bytes.Equal(want, data) {
		return
	}
	var w goldenFile
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if w.SignatureVersion != got.SignatureVersion || w.Lexicon != got.Lexicon {
		t.Fatalf("golden file is for signature version %d lexicon %s; this build has %d %s: regenerate it deliberately with -update",
			w.SignatureVersion, w.Lexicon, got.SignatureVersion, got.Lexicon)
	}
	compare := func(kind string, want, got []goldenEntry) {
		wm := map[string]goldenEntry{}
		for _, e := range want {
			wm[e.Name] = e
		}
		for _, e := range got {
			old, ok := wm[e.Name]
			if !ok {
				t.Errorf("%s %s: not in the golden file (new sample? run with -update)", kind, e.Name)
				continue
			}
			gj, _ := json.Marshal(e)
			wj, _ := json.Marshal(old)
			if !bytes.Equal(gj, wj) {
				t.Errorf("%s %s: signatures changed:\n got %s\nwant %s", kind, e.Name, gj, wj)
			}
		}
	}
	compare("term list", w.TermLists, got.TermLists)
	compare("message", w.Messages, got.Messages)
	t.Error("signatures differ from testdata/golden.json: a change of signatures must be deliberate (bump SignatureVersion, then -update)")
}

// TestDefaultLexicon pins the embedded lexicon: regenerate it with
// scripts/build-default-lexicon.sh, never by hand.
func TestDefaultLexicon(t *testing.T) {
	lex, err := DefaultLexicon()
	if err != nil {
		t.Fatal(err)
	}
	st := lex.Stats()
	if st.IdfMin != DefaultIdfMin || st.IdfMax != DefaultIdfMax || st.SecondaryMax != DefaultSecondaryMax {
		t.Errorf("embedded lexicon window [%g, %g] cap %d, defaults [%g, %g] cap %d: rebuild it with scripts/build-default-lexicon.sh",
			st.IdfMin, st.IdfMax, st.SecondaryMax, DefaultIdfMin, DefaultIdfMax, DefaultSecondaryMax)
	}
	if st.N != 4424 || st.Primary < 200 || st.Secondary < 10000 {
		t.Errorf("embedded lexicon stats %+v", st)
	}
	var buf bytes.Buffer
	if _, err := lex.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), DefaultLexiconData()) {
		t.Error("the embedded lexicon does not re-serialize byte for byte")
	}
	if len(DefaultLexiconData()) > 2<<20 {
		t.Errorf("embedded lexicon is %d bytes, keep it under 2 MiB", len(DefaultLexiconData()))
	}
}
