package mime_test

import (
	"fmt"

	"github.com/nddmilter/nddmilter/internal/mime"
)

func Example() {
	raw := []byte("Subject: =?UTF-8?B?Q2hlYXAgbWVkcw==?=\r\n" +
		"Content-Type: text/html; charset=utf-8\r\n\r\n" +
		"<p>Get ph<!-- x -->arma<b></b>cy pri\u200bces on v\u0456agr\u0430 " +
		"<span style=\"display:none\">hash buster</span>at " +
		"<a href=\"http://Shop.Example.COM/x\">our store</a></p>")
	doc := mime.Parse(raw, mime.Options{})
	fmt.Printf("%q\n%q\n%q\n", doc.Subject, doc.Text, doc.Hosts)
	fmt.Println(mime.UniqueTerms(mime.Tokenize(doc, mime.TokenOptions{})))
	// Output:
	// "Cheap meds"
	// "Get pharmacy prices on viagra at our store"
	// ["shop.example.com"]
	// [cheap meds pharmacy prices store viagra]
}
