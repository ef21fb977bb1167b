package imatchbag

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// TestSignDF checks that SignDF gives Sign's result and the lexicon's
// document frequencies, for long and short documents, sorted or not, and
// for options that force the secondary lexicon or no signature.
func TestSignDF(t *testing.T) {
	lex, err := DefaultLexicon()
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]string
	for _, m := range benchMessages(t, lex) {
		docs = append(docs, MessageTerms(m, mime.Options{}, mime.TokenOptions{}))
	}
	docs = append(docs, nil, []string{}, []string{"only"},
		strings.Fields("zebra apple mango apple unknownword1 offer"), // unsorted, duplicate
		TextTerms("please find attached the invoice for your recent order payment is due", mime.TokenOptions{}))
	for _, o := range []Options{{}, {K: -1}, {MinTerms: 40}, {MinRatio: 0.5}, {MinUnique: 1000}, {K: MaxK}} {
		s := mustSigner(t, lex, o)
		for i, terms := range docs {
			want := s.Sign(terms)
			df := make([]int32, len(terms))
			got := s.SignDF(terms, df)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%+v doc %d: SignDF = %+v, want %+v", o, i, got, want)
			}
			for j, term := range terms {
				if int(df[j]) != lex.DF(term) {
					t.Fatalf("df[%q] = %d, want %d", term, df[j], lex.DF(term))
				}
			}
			if got := s.SignDF(terms, nil); len(terms) > 0 && !reflect.DeepEqual(got, want) {
				t.Fatalf("SignDF without df = %+v, want %+v", got, want)
			}
		}
	}
}
