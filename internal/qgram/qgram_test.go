package qgram

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// The paper's worked examples (sect. 3.2 and 3.3).
func TestPaperExamples(t *testing.T) {
	got := Grams("tom smith", 2)
	want := []Gram{{1, "to"}, {2, "om"}, {3, "m "}, {4, " s"}, {5, "sm"}, {6, "mi"}, {7, "it"}, {8, "th"}}
	if !slices.Equal(got, want) {
		t.Errorf("positional 2-grams of %q = %v, want %v", "tom smith", got, want)
	}
	if n := Normalize("A rose is a flower"); n != "Aroseisaflower" {
		t.Errorf("Normalize = %q, want Aroseisaflower", n)
	}
	var g3 []string
	for _, g := range Grams(Normalize("A rose is a flower"), 3) {
		g3 = append(g3, g.Text)
	}
	want3 := []string{"Aro", "ros", "ose", "sei", "eis", "isa", "saf", "afl", "flo", "low", "owe", "wer"}
	if !slices.Equal(g3, want3) {
		t.Errorf("3-grams = %v, want %v", g3, want3)
	}
	// The profile is the set of those q-grams: 12, all distinct.
	if p := NewProfile("A rose is a flower", Options{Q: 3}); len(p) != 12 {
		t.Errorf("profile has %d q-grams, want 12", len(p))
	}
	// "the president" holds the q-grams 'hep' and 'epr' (sect. 3.3).
	for _, g := range []string{"hep", "epr"} {
		if !slices.ContainsFunc(Grams(Normalize("the president"), 3), func(x Gram) bool { return x.Text == g }) {
			t.Errorf("the president: no %q", g)
		}
	}
}

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"Hello, World!", "HelloWorld"},
		{"a\tb\nc\u00a0d\u2003e", "abcde"},
		{"«prix» — 10 €", "prix10€"}, // symbols are not punctuation
		{"日本語。テスト", "日本語テスト"},
	} {
		if got := Normalize(tc.in); got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSimilarity(t *testing.T) {
	o := Options{}
	a := NewProfile("the quick brown fox jumps over the lazy dog", o)
	for _, tc := range []struct {
		name string
		b    string
		lo   float64
		hi   float64
	}{
		{"same", "the quick, brown fox jumps over the lazy dog.", 0, 0},
		{"case kept", "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG", 0, 0},
		{"empty", "", 0, 0},
	} {
		s := Similarity(a, NewProfile(tc.b, o))
		switch tc.name {
		case "same":
			if s != 1 {
				t.Errorf("%s: %v, want 1", tc.name, s)
			}
		default:
			if s != 0 {
				t.Errorf("%s: %v, want 0", tc.name, s)
			}
		}
	}
	// Fold: the upper-case copy is the same text.
	f := Options{FoldCase: true}
	if s := Similarity(NewProfile("the quick brown fox", f), NewProfile("THE QUICK BROWN FOX", f)); s != 1 {
		t.Errorf("folded: %v", s)
	}
	// docq divides by the larger set: a text inside a longer one.
	short := NewProfile("abcdefgh", o) // 5 4-grams
	long := NewProfile("abcdefghijklm", o)
	if s := Similarity(short, long); s != 5.0/10 {
		t.Errorf("contained: %v, want 0.5", s)
	}
}

// randomText makes a text of n words over a small vocabulary, so that
// random texts share q-grams.
func randomText(r *rand.Rand, n int) string {
	words := []string{"cheap", "pills", "offer", "today", "free", "money", "click", "here", "best", "price", "your", "account", "win", "prize", "now", "limited"}
	var b strings.Builder
	for range n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()
}

// mutate changes a share of the characters of s.
func mutate(r *rand.Rand, s string, share float64) string {
	b := []byte(s)
	for i := range b {
		if r.Float64() < share {
			b[i] = byte('a' + r.IntN(26))
		}
	}
	return string(b)
}

// The index never drops a pair that brute force finds above threshold,
// and finds nothing brute force does not.
func TestIndexMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, th := range []float64{0.3, 0.5, 0.8} {
		o := Options{Threshold: th}
		x := NewIndex(o)
		type doc struct {
			t time.Time
			p Profile
		}
		var docs []doc
		base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		var seeds []string
		for i := range 400 {
			var text string
			if len(seeds) > 0 && r.IntN(2) == 0 {
				text = mutate(r, seeds[r.IntN(len(seeds))], 0.05*float64(r.IntN(5)))
			} else {
				text = randomText(r, 5+r.IntN(40))
				seeds = append(seeds, text)
			}
			at := base.Add(time.Duration(i) * 7 * time.Minute) // 400 docs over ~47 h
			p := NewProfile(text, o)
			got := x.Add(uint64(i), at, p)
			var want []Match
			for j, d := range docs {
				if x.slotOf(d.t) <= x.slotOf(at)-24 {
					continue // outside the window of 24 hourly indexes
				}
				if s := Similarity(p, d.p); s >= th && s > 0 {
					want = append(want, Match{ID: uint64(j), Similarity: s})
				}
			}
			slices.SortFunc(want, func(a, b Match) int {
				if a.Similarity != b.Similarity {
					if a.Similarity > b.Similarity {
						return -1
					}
					return 1
				}
				return int(a.ID) - int(b.ID)
			})
			if !slices.Equal(got, want) {
				t.Fatalf("threshold %v doc %d: index %v, brute force %v", th, i, got, want)
			}
			docs = append(docs, doc{at, p})
		}
		if x.Slots() > 24 {
			t.Errorf("%d hourly indexes held, want at most 24", x.Slots())
		}
	}
}

func TestIndexWindow(t *testing.T) {
	x := NewIndex(Options{})
	p := NewProfile("a campaign of spam sent over two days", Options{})
	t0 := time.Date(2026, 3, 1, 0, 30, 0, 0, time.UTC)
	if m := x.Add(1, t0, p); len(m) != 0 {
		t.Fatalf("first: %v", m)
	}
	// 23 hours later, same window: found.
	if m := x.Query(t0.Add(23*time.Hour), p); len(m) != 1 || m[0].ID != 1 || m[0].Similarity != 1 {
		t.Errorf("within 24 h: %v", m)
	}
	// 24 hours later: the first hour's index is gone.
	if m := x.Add(2, t0.Add(24*time.Hour), p); len(m) != 0 {
		t.Errorf("after 24 h: %v", m)
	}
	if x.Len() != 1 || x.Slots() != 1 {
		t.Errorf("len %d slots %d, want 1 and 1", x.Len(), x.Slots())
	}
	// A late document older than the window is compared, not indexed.
	if m := x.Add(3, t0.Add(-2*time.Hour), p); len(m) != 0 || x.Len() != 1 {
		t.Errorf("late: %v, len %d", m, x.Len())
	}
	// Empty profiles match nothing.
	if m := x.Add(4, t0.Add(24*time.Hour), nil); len(m) != 0 {
		t.Errorf("empty: %v", m)
	}
}

func TestProfileBounded(t *testing.T) {
	text := strings.Repeat("abcdefghij", 10000)
	p := NewProfile(text, Options{MaxRunes: 100})
	if len(p) != 10 { // 97 windows over a period of 10
		t.Errorf("%d q-grams", len(p))
	}
}
