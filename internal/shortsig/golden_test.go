package shortsig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/mime"
)

var (
	update   = flag.Bool("update", false, "rewrite testdata/golden.json")
	fixtures = flag.Bool("fixtures", false, "rewrite the testdata/*.eml samples")
)

// goldenEntry pins the keys of one document with the default options.
type goldenEntry struct {
	Name  string `json:"name"`
	Media int    `json:"media"`
	Links int    `json:"links"`
	Units int    `json:"units"`
	// SignedNote is Result.SignedNote (decisions read it).
	SignedNote bool     `json:"signed_note,omitempty"`
	Keys       []string `json:"keys"`
	Lookup     []string `json:"lookup,omitempty"`
}

type goldenFile struct {
	Version int `json:"version"`
	// Documents pins signing alone (fixed documents); Messages pins
	// mime.Parse and Sign on the samples of testdata and of
	// internal/mime/testdata.
	Documents []goldenEntry `json:"documents"`
	Messages  []goldenEntry `json:"messages"`
}

func digest(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// goldenDocs are fixed documents: this part of the golden file changes
// only when signing changes.
var goldenDocs = []struct {
	name string
	doc  mime.Document
}{
	{"empty", mime.Document{}},
	{"image", mime.Document{Parts: []mime.Part{{Type: "image/png", Size: 5000, Digest: digest("image"), Width: 300, Height: 200}}}},
	{"pixel", mime.Document{Parts: []mime.Part{{Type: "image/gif", Size: 43, Digest: digest("pixel"), Width: 1, Height: 1}}}},
	{"attachment-greeting", mime.Document{Subject: "Invoice", Text: "Hello Ann,", Parts: []mime.Part{{Type: "application/pdf", Size: 9000, Digest: digest("pdf"), Attachment: true}}}},
	{"links", mime.Document{URLs: []string{"http://www.pills.example.com/buy?x=1", "https://t.example.net/o.gif"}}},
	{"common-links", mime.Document{URLs: []string{"https://www.google.com/", "https://www.w3.org/TR/html4/"}}},
	{"short-text", mime.Document{Subject: "meeting", Text: "Hi Bob,\nsee you at the meeting tomorrow"}},
	{"signed-short-text", mime.Document{Subject: "meeting", Text: "Hi Bob,\nsee you at the meeting tomorrow\n-- \nAnn Smith, Example Ltd\nwww.example.com"}},
	{"signed-note", mime.Document{Subject: "hi", Text: "You around?\nC\n-- \nAnn Smith, Example Ltd, the example widget company\nwww.example.com"}},
	{"cjk", mime.Document{Subject: "發票", Text: "王先生您好：\n我們提供各類發票代開服務，稅點低，保真可查驗。"}},
	{"lead", mime.Document{Subject: "Best prices", Text: strings.Repeat("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty ", 2) +
		"alpha beta gamma delta epsilon zeta eta theta iota kappa lambda omicron sigma tau upsilon omega"}},
	{"mailing-list", mime.Document{Subject: "digest", List: "users", Text: strings.Repeat("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda omicron sigma tau upsilon omega ", 3)}},
}

// sampleMessages are the testdata/*.eml samples, written by -fixtures.
func sampleMessages(t *testing.T) map[string]testMessage {
	img := pngImage(t, 120, 80, 11)
	return map[string]testMessage{
		"image-only.eml":      {from: "a@x.example", to: "u@example.org", subject: "Hi", parts: []attachment{{typ: "image/png", name: "a.png", data: img}}},
		"inline-image.eml":    {from: "a@x.example", to: "u@example.org", subject: "Hi", html: `<p>Hello</p><img src="cid:part0@test">`, parts: []attachment{{typ: "image/png", name: "a.png", data: img, inline: true}}},
		"attachment-only.eml": {from: "a@x.example", to: "u@example.org", subject: "Invoice", text: "see attached", parts: []attachment{{typ: "application/pdf", name: "inv.pdf", data: randomBytes(3000, 11)}}},
		"tracking-pixel.eml":  {from: "a@x.example", to: "u@example.org", subject: "Hi", html: `<p>Hi</p>`, parts: []attachment{{typ: "image/gif", name: "p.gif", data: pixelGIF, inline: true}}},
		"cjk-short.eml":       {from: "a@x.example", to: "u@example.org", subject: "發票", text: "王先生您好：\n" + cjkOffer},
		"link-only.eml":       {from: "a@x.example", to: "u@example.org", html: `<a href="http://pills.example.com/buy?u=1">click</a>`},
	}
}

func goldenOf(s *Signer, name string, doc *mime.Document) goldenEntry {
	return goldenEntryOf(name, s.Sign(doc))
}

func goldenEntryOf(name string, r Result) goldenEntry {
	e := goldenEntry{Name: name, Media: r.Media, Links: r.Links, Units: r.Units, SignedNote: r.SignedNote, Keys: []string{}}
	for _, k := range r.Keys {
		e.Keys = append(e.Keys, hex.EncodeToString(k))
	}
	for _, k := range r.Lookup {
		e.Lookup = append(e.Lookup, hex.EncodeToString(k))
	}
	return e
}

func TestGolden(t *testing.T) {
	if *fixtures {
		for name, m := range sampleMessages(t) {
			if err := os.WriteFile(filepath.Join("testdata", name), m.raw(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := New(Options{})
	got := goldenFile{Version: Version}
	for _, g := range goldenDocs {
		got.Documents = append(got.Documents, goldenOf(s, g.name, &g.doc))
	}
	// A long text signed as a message without other signature.
	long := mime.Document{Subject: "長文", List: "users", Parts: goldenDocs[1].doc.Parts,
		Text: strings.Repeat("改善掉髮，預防禿頭的最佳選擇。純天然植物精華萃取，並經人體測試通過，絕無副作用。", 3)}
	got.Documents = append(got.Documents, goldenEntryOf("unsigned-long", s.SignUnsigned(&long)))
	var files []string
	for _, pat := range []string{"testdata/*.eml", "../mime/testdata/*.eml"} {
		f, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f...)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(filepath.ToSlash(f), "../")
		got.Messages = append(got.Messages, goldenOf(s, name, mime.Parse(raw, mime.Options{})))
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
		t.Fatalf("%v (run go test -run TestGolden -update ./internal/shortsig/ to create it)", err)
	}
	if bytes.Equal(want, data) {
		return
	}
	var w goldenFile
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if w.Version != got.Version {
		t.Fatalf("golden file is for version %d, this build has %d: regenerate it deliberately with -update", w.Version, got.Version)
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
				t.Errorf("%s %s: keys changed:\n got %s\nwant %s", kind, e.Name, gj, wj)
			}
		}
	}
	compare("document", w.Documents, got.Documents)
	compare("message", w.Messages, got.Messages)
	t.Error("keys differ from testdata/golden.json: a change of keys must be deliberate (bump Version, then -update)")
}
