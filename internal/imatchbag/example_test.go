package imatchbag_test

import (
	"fmt"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
)

func Example() {
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		panic(err)
	}
	signer, err := imatchbag.NewSigner(lex, imatchbag.Options{}) // K = 10 bags
	if err != nil {
		panic(err)
	}
	raw := []byte("Subject: Annual meeting\r\n\r\n" +
		"The committee announced that the annual meeting of the association will be held " +
		"in the administration building. Members are expected to attend and to bring the " +
		"report on the development program, the budget and the final agreement.\r\n")
	terms := imatchbag.MessageTerms(raw, mime.Options{}, mime.TokenOptions{})
	res := signer.Sign(terms)
	fmt.Println("unique words:", res.Unique, "signed words:", res.Terms, "signatures:", len(res.Signatures))

	// A copy with two words inserted and one deleted still shares a signature.
	raw2 := []byte("Subject: Annual meeting\r\n\r\n" +
		"The committee announced that the annual meeting of the association will be held " +
		"in the administration building. Members are expected to attend and to bring the " +
		"report on the program, the budget and the final agreement. Weather permitting.\r\n")
	res2 := signer.Sign(imatchbag.MessageTerms(raw2, mime.Options{}, mime.TokenOptions{}))
	shared := 0
	for i := range res.Signatures {
		for j := range res2.Signatures {
			if res.Signatures[i] == res2.Signatures[j] {
				shared++
			}
		}
	}
	fmt.Println("near duplicate:", shared > 0)
	// Output:
	// unique words: 20 signed words: 7 signatures: 11
	// near duplicate: true
}
