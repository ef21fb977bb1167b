package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A message's signs survive their encoding; hostile encodings are errors.
func TestSigns(t *testing.T) {
	im, ad, _ := signers(t)
	p, err := New(im, ad, Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw := "From: Ann <ann@example.org>\r\nTo: talk@lists.example.org, bob@example.net\r\nIn-Reply-To: <1@example.org>\r\n" +
		"List-Id: Talk <talk.lists.example.org>\r\nPrecedence: list\r\n" +
		"Authentication-Results: mx.example.net; dkim=pass header.d=example.org\r\nSubject: Re: the agenda\r\n\r\n" +
		strings.Repeat("The committee discussed the agenda of the next meeting and its venue. ", 20) + "\r\n"
	m, err := p.Sign(context.Background(), []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := m.Signs()
	if !want.Reply || want.Precedence != "list" || want.ListID != "talk.lists.example.org" || len(want.Recipients) != 2 || len(want.AuthPasses) != 1 {
		t.Fatalf("signs %+v", want)
	}
	b, err := MarshalSigns(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalSigns(b)
	if err != nil {
		t.Fatal(err)
	}
	var n Message
	n.SetSigns(got)
	if g := n.Signs(); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Errorf("round trip %+v, want %+v", g, want)
	}
	if b, err := MarshalSigns(Signs{}); b != nil || err != nil {
		t.Errorf("no signs: %q, %v", b, err)
	}
	// A signed note (a one-line note, then its signature) keeps the flag.
	note, err := p.Sign(context.Background(), []byte("From: c@example.net\r\nSubject: EFnet\r\n\r\nYou around?\r\nC\r\n-- \r\n"+
		"\"I don't take no stocks in mathematics, anyway\" --Huckleberry Finn\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !note.SignedNote {
		t.Fatal("a signed note: SignedNote not set")
	}
	if b, err := MarshalSigns(note.Signs()); err != nil || string(b) != `{"signed_note":true}` {
		t.Errorf("a signed note's signs: %s %v", b, err)
	} else if s, err := UnmarshalSigns(b); err != nil || !s.SignedNote {
		t.Errorf("a signed note's signs read back: %+v %v", s, err)
	}
	if s, err := UnmarshalSigns(nil); err != nil || s.Reply || s.ListID != "" {
		t.Errorf("nil: %+v, %v", s, err)
	}
	many := slices.Repeat([]string{`"a@example.org"`}, 17)
	for name, b := range map[string]string{
		"not JSON":            "{",
		"too many recipients": `{"recipients":[` + strings.Join(many, ",") + `]}`,
		"too long":            `{"list_id":"` + strings.Repeat("x", maxSigns) + `"}`,
		"wrong type":          `{"reply":"yes"}`,
	} {
		if _, err := UnmarshalSigns([]byte(b)); !errors.Is(err, ErrSigns) {
			t.Errorf("%s: %v, want ErrSigns", name, err)
		}
	}
}
