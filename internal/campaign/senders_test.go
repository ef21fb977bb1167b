package campaign

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/store"
)

func TestSenderDomain(t *testing.T) {
	tests := []struct{ from, want string }{
		{"Deals <deals@mail.shop.example.co.uk>", "example.co.uk"},
		{"deals@Shop.Example.COM", "example.com"},
		{`"Bob, the <builder>" <bob@news.example.org.>`, "example.org"},
		{"<a@b@sub.example.net>", "example.net"},
		{"nobody", ""},
		{"x@", ""},
		{"x@[192.0.2.1]", ""},
		{"x@bücher.example", "xn--bcher-kva.example"},
		{"x@co.uk", "co.uk"},
		{"x@" + strings.Repeat("a", 300) + ".example", ""},
		{"x@exa\x00mple.com", ""},
	}
	for _, tt := range tests {
		if got := SenderDomain(tt.from); got != tt.want {
			t.Errorf("SenderDomain(%q) = %q, want %q", tt.from, got, tt.want)
		}
	}
}

// A campaign whose copies came from a domain that also sends much ham is
// on the false-positive watch, first and with its reason; one with
// not-spam reports follows.
func TestFalsePositiveWatchSenders(t *testing.T) {
	f := newFixture(t, Options{})
	withFrom := func(from, subject, body string) []byte {
		return []byte("From: " + from + "\r\nSubject: " + subject + "\r\n\r\n" + body + "\r\n")
	}
	shop := withFrom("Deals <deals@mail.shop.example>", campaignTexts[0].subject, campaignTexts[0].body)
	a := f.report(t, shop, store.KindSpam, "alice")
	b := f.report(t, withFrom("x@spam.example", campaignTexts[1].subject, campaignTexts[1].body), store.KindSpam, "bob")
	f.report(t, withFrom("x@spam.example", campaignTexts[1].subject, campaignTexts[1].body), store.KindHam, "carol")
	for i := range 3 {
		if v := f.check(t, shop); v.Campaign != a.Campaign {
			t.Fatalf("copy %d: %+v", i, v)
		}
	}
	// The shop's ordinary mail: accepted, matching nothing.
	for i := range 30 {
		if v := f.check(t, withFrom("orders@shop.example", fmt.Sprintf("Your order %d", i),
			fmt.Sprintf("Order %d has shipped and arrives on day %d.", i, i%7))); v.Campaign != 0 {
			t.Fatalf("ham %d matched: %+v", i, v)
		}
	}
	if _, err := f.st.StateHash(f.ctx); err != nil { // flushes the buffered counts
		t.Fatal(err)
	}
	w, err := f.eng.Reader.FalsePositiveWatch(f.ctx, WatchOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 2 || w[0].ID != a.Campaign || w[1].ID != b.Campaign {
		t.Fatalf("watch: %+v", w)
	}
	if hs := w[0].HamSenders; len(hs) != 1 || hs[0] != (HamSender{Domain: "shop.example", Copies: 3, Ham: 30}) {
		t.Errorf("ham senders: %+v", hs)
	}
	// One spam reporter and a sender of accepted mail: its copies from
	// the shop are graymail, and the watch says so.
	if r := w[0].Reasons(); len(r) != 2 || !strings.Contains(r[0], "3 copies from shop.example, which sent 30 accepted messages") ||
		!w[0].Graymail || !strings.Contains(r[1], "graymail: with fewer than 5 spam reporters") {
		t.Errorf("reasons: %q (graymail %v)", r, w[0].Graymail)
	}
	if w[1].Graymail {
		t.Errorf("campaign %d with no ham sender is labelled graymail", w[1].ID)
	}
	if r := w[1].Reasons(); len(r) != 1 || !strings.Contains(r[0], "1 not-spam report(s) from 1 reporter(s)") {
		t.Errorf("reasons of the not-spam campaign: %q", r)
	}
	// Paging runs over both lists; a higher bar leaves the shop out.
	if p, err := f.eng.Reader.FalsePositiveWatch(f.ctx, WatchOptions{Limit: 1, Offset: 1}); err != nil || len(p) != 1 || p[0].ID != b.Campaign {
		t.Errorf("second page: %+v %v", p, err)
	}
	if p, err := f.eng.Reader.FalsePositiveWatch(f.ctx, WatchOptions{MinHamMessages: 31}); err != nil || len(p) != 1 || p[0].ID != b.Campaign {
		t.Errorf("MinHamMessages 31: %+v %v", p, err)
	}
}

// BenchmarkSenderDomain is the cost the sender statistics add to a
// recorded check.
func BenchmarkSenderDomain(b *testing.B) {
	froms := []string{"Deals <deals@mail.shop.example.co.uk>", "news@lists.example.org", `"A, B" <x@bücher.example>`}
	for i := 0; b.Loop(); i++ {
		SenderDomain(froms[i%len(froms)])
	}
}
