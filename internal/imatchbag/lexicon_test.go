package imatchbag

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// synthLexicon builds a lexicon of a synthetic corpus of n documents with
// nL primary terms "lNNNN", nB secondary terms "bNNNN" (ranked by their
// number: b0000 is the most frequent) and a few stop words "sNN", for the
// window [0.2, 0.3].
func synthLexicon(t testing.TB, n, nL, nB int, opts BuildOptions) *Lexicon {
	t.Helper()
	b := &Builder{n: n, df: map[string]int32{}}
	lo, hi := pow(n, 0.7), pow(n, 0.8) // df range of the window
	for i := range nL {
		b.df[fmt.Sprintf("l%04d", i)] = int32(lo + 1 + i%(hi-lo-1))
	}
	for i := range nB {
		// decreasing df with i, all below lo
		d := (lo - 1) - i*(lo-3)/max(nB, 1)
		b.df[fmt.Sprintf("b%04d", i)] = int32(max(d, 2))
	}
	for i := range 20 {
		b.df[fmt.Sprintf("s%02d", i)] = int32(n - i)
	}
	if opts.IdfMin == 0 && opts.IdfMax == 0 {
		opts.IdfMin, opts.IdfMax = 0.2, 0.3
	}
	lex, err := b.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	return lex
}

func pow(n int, e float64) int { return int(math.Pow(float64(n), e)) }

func TestLexiconBuildAndRoundTrip(t *testing.T) {
	lex := synthLexicon(t, 1000, 300, 500, BuildOptions{Seed: 7, Description: "synthetic test corpus"})
	st := lex.Stats()
	if st.Primary != 300 || st.Secondary != 500 || st.N != 1000 || st.Seed != 7 {
		t.Fatalf("stats = %+v, want 300 primary, 500 secondary, N 1000, seed 7", st)
	}
	for _, term := range lex.Primary() {
		if !strings.HasPrefix(term, "l") {
			t.Fatalf("primary lexicon holds %q", term)
		}
		if v := lex.NIDF(lex.DF(term)); v < 0.2 || v > 0.3 {
			t.Fatalf("primary term %q has nidf %g outside the window", term, v)
		}
	}
	sec := lex.Secondary()
	for i := 1; i < len(sec); i++ {
		if lex.DF(sec[i-1]) < lex.DF(sec[i]) {
			t.Fatalf("secondary lexicon not ranked by increasing idf at %d: %s(%d) %s(%d)", i, sec[i-1], lex.DF(sec[i-1]), sec[i], lex.DF(sec[i]))
		}
	}
	if lex.DF("s00") != 1000 || lex.DF("never-seen") != 0 {
		t.Errorf("DF(s00) = %d, DF(never-seen) = %d", lex.DF("s00"), lex.DF("never-seen"))
	}

	var a bytes.Buffer
	if _, err := lex.WriteTo(&a); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLexicon(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := back.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("write → read → write is not byte-for-byte identical")
	}
	if back.ID() != lex.ID() || back.ID() == 0 {
		t.Errorf("ID %08x after round trip, %08x before", back.ID(), lex.ID())
	}
	other := synthLexicon(t, 1000, 300, 500, BuildOptions{Seed: 8})
	if other.ID() == lex.ID() {
		t.Error("a different seed gives the same lexicon ID")
	}
}

func TestBuilderDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var docs [][]string
	for range 300 {
		var d []string
		for range 40 {
			d = append(d, fmt.Sprintf("w%d", int(rng.ExpFloat64()*80)))
		}
		docs = append(docs, d)
	}
	build := func(order []int) []byte {
		b := NewBuilder()
		for _, i := range order {
			b.Add(docs[i])
		}
		lex, err := b.Build(BuildOptions{IdfMin: 0.1, IdfMax: 0.5, SecondaryMax: 50})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		lex.WriteTo(&buf)
		return buf.Bytes()
	}
	order := make([]int, len(docs))
	for i := range order {
		order[i] = i
	}
	first := build(order)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	if second := build(order); !bytes.Equal(first, second) {
		t.Fatal("lexicon depends on document order")
	}
}

func TestBuildErrors(t *testing.T) {
	b := NewBuilder()
	b.Add([]string{"a"})
	if _, err := b.Build(BuildOptions{}); err == nil {
		t.Error("one document: want an error")
	}
	b.Add([]string{"a", "b"})
	for _, o := range []BuildOptions{{IdfMin: 0.5, IdfMax: 0.4}, {IdfMin: -1, IdfMax: 0.4}, {IdfMin: 0.1, IdfMax: 2}, {Description: "two\nlines"}} {
		if _, err := b.Build(o); err == nil {
			t.Errorf("Build(%+v): want an error", o)
		}
	}
}

func TestReadLexiconRejects(t *testing.T) {
	lex := synthLexicon(t, 1000, 30, 50, BuildOptions{})
	var buf bytes.Buffer
	lex.WriteTo(&buf)
	good := buf.String()
	lines := strings.SplitAfter(good, "\n")
	tests := []struct {
		name, data, want string
	}{
		{"empty", "", "not a lexicon"},
		{"other file", "hello\n", "not a lexicon"},
		{"future version", strings.Replace(good, "nddmilter-lexicon 1", "nddmilter-lexicon 2", 1), "unsupported"},
		{"truncated", good[:len(good)/2], "truncated"},
		{"no id", strings.Join(lines[:len(lines)-2], ""), "truncated"},
		{"edited df", strings.Replace(good, "\n1000 - s00\n", "\n999 - s00\n", 1), "does not match"},
		{"out of order", strings.Replace(good, "\n1000 - s00\n", "\n1 - s00\n", 1), "out of order"},
		{"edited term", strings.Replace(good, " L l0001\n", " L l000x\n", 1), "does not match"},
		{"bad class", strings.Replace(good, " L l0001\n", " X l0001\n", 1), "unknown term class"},
		{"trailing garbage", good + "more\n", "truncated"},
		{"crlf", strings.ReplaceAll(good, "\n", "\r\n"), "does not match"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadLexicon(strings.NewReader(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func FuzzReadLexicon(f *testing.F) {
	lex := synthLexicon(f, 1000, 10, 10, BuildOptions{})
	var buf bytes.Buffer
	lex.WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte("nddmilter-lexicon 1\ndescription \ndocuments 5\nseed 0\nidf-min 0\nidf-max 1\nsecondary-max 0\nmin-df 1\nterms 99999999\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ReadLexicon(bytes.NewReader(data))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if _, err := l.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatal("accepted lexicon does not re-serialize identically")
		}
	})
}
