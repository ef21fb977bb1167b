package dashboard

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
)

// campaignMessage is a message of campaign seed: its own text of
// lexicon words (so that every seed is a campaign of its own), under
// subject and from, with extra at the start of the text (where the
// campaign's sample excerpt shows it). Copies of a
// campaign are the same message with another copy number in a header.
func campaignMessage(tb testing.TB, seed uint64, copyNo int, subject, from, extra string) []byte {
	tb.Helper()
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		tb.Fatal(err)
	}
	words := lex.Primary()
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	var b strings.Builder
	if extra != "" {
		b.WriteString(extra)
		b.WriteString("\r\n\r\n")
	}
	for w := range 320 {
		b.WriteString(words[rng.IntN(len(words))])
		switch {
		case w%40 == 39:
			b.WriteString(".\r\n\r\n")
		case w%10 == 9:
			b.WriteString(". ")
		default:
			b.WriteByte(' ')
		}
	}
	b.WriteString("\r\n")
	return fmt.Appendf(nil, "From: %s\r\nTo: user@example.org\r\nSubject: %s\r\nMessage-ID: <c%d.%d@campaign.example>\r\nX-Copy: %d\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s",
		from, subject, seed, copyNo, copyNo, b.String())
}
