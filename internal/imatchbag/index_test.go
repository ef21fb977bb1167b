package imatchbag

import (
	"fmt"
	"testing"
)

// TestLexIndexFind: findAll and find give every term of the default
// lexicon its own slot (the slot's key and length are the term's), and no
// slot to words it does not hold: lengths from 0, other words of the same
// first 8 bytes, longer and shorter forms.
func TestLexIndexFind(t *testing.T) {
	lex, err := DefaultLexicon()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(lex, Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := s.index
	var terms, absent []string
	for term := range lex.df {
		terms = append(terms, term)
		for _, o := range []string{term + "q", "q" + term, term[:len(term)-1], term + term} {
			if _, ok := lex.df[o]; !ok {
				if _, ok := s.primary[o]; !ok {
					if _, ok := s.secondary[o]; !ok {
						absent = append(absent, o)
					}
				}
			}
		}
	}
	for i := range 1000 {
		absent = append(absent, fmt.Sprintf("zz%dqx", i))
	}
	all := append(append([]string{}, terms...), absent...)
	at := make([]uint64, len(all))
	x.findAll(all, at)
	for i, term := range all {
		k := at[i]
		if i >= len(terms) {
			if k != 0 || x.find(term) != nil {
				t.Fatalf("%q, not in the lexicon, found at slot %d", term, k)
			}
			continue
		}
		if k == 0 {
			t.Fatalf("%q not found", term)
		}
		sl := &x.slots[k-1]
		if sl.n != uint32(len(term)) || sl.key != prefix8(term) || len(term) > 8 && x.long[sl.li] != term || x.find(term) != sl {
			t.Fatalf("%q found at slot %d of another term", term, k)
		}
	}
}
