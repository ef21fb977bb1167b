package qgram

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json")

func TestSketchEstimates(t *testing.T) {
	s := NewSketcher(SketchOptions{})
	r := rand.New(rand.NewPCG(3, 4))
	fold := Options{FoldCase: true}
	worst := 0.0
	for i := range 200 {
		a := randomText(r, 60+r.IntN(200)) + mutate(r, "unique tail text number", 0.5)
		b := mutate(r, a, 0.02*float64(i%10))
		sa, oka := s.Sketch(a)
		sb, okb := s.Sketch(b)
		if !oka || !okb {
			continue
		}
		pa, pb := NewProfile(a, fold), NewProfile(b, fold)
		if int(sa.Size) != len(pa) || int(sb.Size) != len(pb) {
			t.Fatalf("sizes %d %d, profiles %d %d", sa.Size, sb.Size, len(pa), len(pb))
		}
		exact := Similarity(pa, pb)
		est := EstimateSimilarity(&sa, &sb)
		worst = math.Max(worst, math.Abs(exact-est))
	}
	if worst > 0.2 {
		t.Errorf("worst estimation error %.3f", worst)
	}
}

func TestSketchSameText(t *testing.T) {
	s := NewSketcher(SketchOptions{})
	text := lorem
	a, ok := s.Sketch("Subject", text)
	if !ok {
		t.Fatal("no sketch")
	}
	// Case, spaces and punctuation do not matter.
	b, _ := s.Sketch("SUBJECT", strings.ReplaceAll(strings.ToUpper(text), " ", "\n"))
	if a != b {
		t.Error("normal forms differ")
	}
	if e := EstimateSimilarity(&a, &b); e != 1 {
		t.Errorf("estimate %v", e)
	}
	ka, kb := BandKeys(&a), BandKeys(&b)
	if len(ka) != Bands {
		t.Fatalf("%d keys", len(ka))
	}
	for i := range ka {
		if string(ka[i]) != string(kb[i]) || !IsKey(ka[i]) {
			t.Errorf("key %d", i)
		}
	}
	if _, ok := s.Sketch("too short to sketch"); ok {
		t.Error("short text sketched")
	}
	if k := BandKeys(&Sketch{}); k != nil {
		t.Error("keys of an empty sketch")
	}
}

func TestSketchEncoding(t *testing.T) {
	s := NewSketcher(SketchOptions{})
	a, _ := s.Sketch(lorem)
	b, err := a.MarshalBinary()
	if err != nil || !IsSketch(b) {
		t.Fatal(err)
	}
	c, err := UnmarshalSketch(b)
	if err != nil || c != a {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range [][]byte{nil, {'Q'}, b[:len(b)-1], append([]byte{1}, b[1:]...)} {
		if _, err := UnmarshalSketch(bad); !errors.Is(err, ErrSketch) {
			t.Errorf("%x: %v", bad[:min(len(bad), 4)], err)
		}
	}
}

// goldenEntry pins the sketch and keys of one text.
type goldenEntry struct {
	Name   string   `json:"name"`
	Size   uint32   `json:"size"`
	Sketch string   `json:"sketch"` // hex of the encoded sketch: its first 32 bytes … its last 16
	Keys   []string `json:"keys"`
}

// lorem is a text with enough distinct q-grams for a sketch.
const lorem = "Get your cheap medication online today, no prescription needed. Our pharmacy ships worldwide in discreet packages within three days, with a full refund if you are not satisfied. Order now and save up to eighty percent!"

var goldenTexts = []struct{ name, subject, text string }{
	{"plain", "Cheap meds", lorem},
	{"typos", "Cheap mdes", "Get yuor cheap medicaiton onlne today, no prescriptoin needed. Our phramacy ships worldwide in discreet packages within three dasy, with a full refund if you are not satisfied. Order now adn save up to eighty percent!"},
	{"unicode", "Скидки", "Лучшие цены на швейцарские часы — только сегодня и только для наших постоянных клиентов! Доставка по всей стране бесплатно, оплата при получении, гарантия два года на каждую модель из нашего каталога. 日本語のテキストも少し含まれています。"},
	{"short-with-empty-bins", "", "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01234567890ABCDEFGHIJKLMNOPQRSTUVWXYZ!?zyxwvutsrq"},
}

func TestGolden(t *testing.T) {
	s := NewSketcher(SketchOptions{MinGrams: 1}) // the short text too
	var got []goldenEntry
	for _, g := range goldenTexts {
		sk, ok := s.Sketch(g.subject, g.text)
		if !ok {
			t.Fatalf("%s: no sketch", g.name)
		}
		b, _ := sk.MarshalBinary()
		e := goldenEntry{Name: g.name, Size: sk.Size, Sketch: hex.EncodeToString(b[:32]) + "…" + hex.EncodeToString(b[len(b)-16:])}
		for _, k := range BandKeys(&sk) {
			e.Keys = append(e.Keys, hex.EncodeToString(k))
		}
		got = append(got, e)
	}
	const path = "testdata/golden.json"
	if *update {
		b, _ := json.MarshalIndent(struct {
			Version int           `json:"version"`
			Entries []goldenEntry `json:"entries"`
		}{SketchVersion, got}, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Version int           `json:"version"`
		Entries []goldenEntry `json:"entries"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if want.Version != SketchVersion || len(want.Entries) != len(got) {
		t.Fatalf("golden file: version %d, %d entries", want.Version, len(want.Entries))
	}
	for i := range got {
		w, g := want.Entries[i], got[i]
		if w.Name != g.Name || w.Size != g.Size || w.Sketch != g.Sketch || strings.Join(w.Keys, ",") != strings.Join(g.Keys, ",") {
			t.Errorf("%s: sketch or keys changed (a wire-format change bumps SketchVersion)", g.Name)
		}
	}
}

func FuzzSketch(f *testing.F) {
	f.Add("hello world, this is a fuzz seed text long enough", "")
	s := NewSketcher(SketchOptions{MinGrams: 1})
	f.Fuzz(func(t *testing.T, a, b string) {
		sk, ok := s.Sketch(a, b)
		if ok {
			_ = BandKeys(&sk)
			if e := EstimateSimilarity(&sk, &sk); e != 1 {
				t.Errorf("self similarity %v", e)
			}
		}
		_, _ = UnmarshalSketch([]byte(a))
	})
}

func BenchmarkSketch(b *testing.B) {
	s := NewSketcher(SketchOptions{})
	text := strings.Repeat(lorem+" ", 8) // about 1.7 KB
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		sk, _ := s.Sketch("subject", "\n", text)
		_ = BandKeys(&sk)
	}
}

func TestSketchBounded(t *testing.T) {
	s := NewSketcher(SketchOptions{MaxRunes: 1000, MinGrams: 1})
	// White space is not read to its end; text after it is not reached.
	if _, ok := s.Sketch(strings.Repeat(" ", 100000) + lorem); ok {
		t.Error("text after 8 × MaxRunes characters was read")
	}
	sk, ok := s.Sketch(strings.Repeat(lorem, 100))
	if !ok || sk.Size > 1000 {
		t.Errorf("size %d", sk.Size)
	}
}
