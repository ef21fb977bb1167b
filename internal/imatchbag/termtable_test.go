package imatchbag

import (
	"fmt"
	"strings"
	"testing"
)

// TestTermTable checks the inline-key table against a map: every term of
// the default lexicon, terms around the 8- and 16-byte boundaries, long
// terms, the empty term, and absent terms differing in one byte or in
// length only.
func TestTermTable(t *testing.T) {
	lex, err := DefaultLexicon()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]tval{}
	for term, df := range lex.df {
		want[term] = tval{df: df}
	}
	for n := 1; n <= 24; n++ {
		want[strings.Repeat("x", n)] = tval{df: int32(n), rank: int32(-n), mask: uint32(n)}
		want[strings.Repeat("é", n)] = tval{df: int32(100 + n)}
	}
	want[""] = tval{df: 7}
	tt := newTermTable(len(want), func(yield func(string, tval)) {
		for k, v := range want {
			yield(k, v)
		}
	})
	for k, v := range want {
		if got, ok := tt.get(k); !ok || got != v {
			t.Fatalf("get(%q) = %+v, %v; want %+v", k, got, ok, v)
		}
		for _, absent := range []string{k + "\x00", k + "s", "\x00" + k, strings.ToUpper(k) + "Q"} {
			if _, in := want[absent]; in {
				continue
			}
			if got, ok := tt.get(absent); ok {
				t.Fatalf("get(%q) = %+v, want absent", absent, got)
			}
		}
		if lex.DF(k) != int(lex.df[k]) {
			t.Fatalf("DF(%q) = %d, want %d", k, lex.DF(k), lex.df[k])
		}
	}
	for i := range 1000 {
		w := fmt.Sprintf("absent%dword", i)
		if _, ok := tt.get(w); ok {
			t.Fatalf("get(%q) found", w)
		}
		if lex.DF(w) != 0 {
			t.Fatalf("DF(%q) = %d", w, lex.DF(w))
		}
	}
	empty := newTermTable(0, func(func(string, tval)) {})
	if _, ok := empty.get("word"); ok {
		t.Fatal("empty table has a term")
	}
	if _, ok := empty.get(strings.Repeat("long", 10)); ok {
		t.Fatal("empty table has a long term")
	}
}
