package spamgen

import (
	"bytes"
	"io"
	netmail "net/mail"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-message/mail"
)

const samplePlain = "From: Deals <deals@shop.example>\r\n" +
	"To: you@example.org\r\n" +
	"Subject: Cheap watches for everyone this week\r\n" +
	"Message-ID: <orig@shop.example>\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"\r\n" +
	"Dear friend, we are offering genuine replica watches at the lowest prices.\r\n" +
	"Every model ships within two days from our warehouse.\r\n" +
	"\r\n" +
	"Visit http://watches.example/offer now and receive a free leather strap.\r\n" +
	"This promotion ends on Friday so please hurry.\r\n" +
	"\r\n" +
	"To unsubscribe reply with the word remove in the subject line.\r\n"

const sampleHTML = "From: Pharmacy <rx@pills.example>\r\n" +
	"Subject: Your prescription is ready\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/alternative; boundary=\"b1\"\r\n" +
	"\r\n" +
	"--b1\r\n" +
	"Content-Type: text/html; charset=iso-8859-1\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"<html><head><style>p{color:red}</style></head><body><p>Order your medication today without a doctor=\r\n" +
	" visit. Caf=E9 prices.</p><div>Click <a href=3D\"http://pills.example/x\">here</a> to order.</div>\r\n" +
	"<p>Discreet packaging and worldwide delivery guaranteed for every customer.</p></body></html>\r\n" +
	"--b1--\r\n"

// words returns the subject and the body words of a generated message as
// seen by a reader (trick markers cannot appear: they were rendered).
func words(t *testing.T, raw []byte) (subject string, body []string, html bool) {
	t.Helper()
	m := parseMessage(raw)
	for _, p := range m.paras {
		body = append(body, p...)
	}
	return m.subject, body, m.html
}

// checkValid verifies that raw is a complete, parsable RFC 5322 message.
func checkValid(t *testing.T, raw []byte) {
	t.Helper()
	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("net/mail cannot read the message: %v\n%s", err, raw)
	}
	for _, h := range []string{"From", "To", "Subject", "Date", "Message-ID", "Content-Type"} {
		if _, ok := msg.Header[h]; !ok && h != "Message-ID" || h == "Message-ID" && msg.Header.Get(h) == "" {
			t.Errorf("missing header %s", h)
		}
	}
	if _, err := msg.Header.Date(); err != nil {
		t.Errorf("bad Date: %v", err)
	}
	for _, l := range bytes.Split(raw, []byte("\r\n")) {
		if len(l) > 998 {
			t.Errorf("line longer than 998 bytes: %d", len(l))
		}
		if bytes.IndexByte(l, '\n') >= 0 {
			t.Errorf("bare LF in line %q", l)
		}
	}
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("go-message cannot read the message: %v", err)
	}
	p, err := mr.NextPart()
	if err != nil {
		t.Fatalf("go-message: first part: %v", err)
	}
	if _, err := io.ReadAll(p.Body); err != nil {
		t.Fatalf("go-message: decoding body: %v", err)
	}
}

func TestDeterministic(t *testing.T) {
	for _, k := range AllKinds() {
		for _, base := range []string{samplePlain, sampleHTML} {
			o := Options{Kinds: []Kind{k}, Seed: 42, Strength: 0.2}
			a, err := Mutate([]byte(base), o)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := Mutate([]byte(base), o)
			if !bytes.Equal(a, b) {
				t.Errorf("%s: same seed, different output", k)
			}
			o.Seed = 43
			c, _ := Mutate([]byte(base), o)
			if bytes.Equal(a, c) {
				t.Errorf("%s: different seeds, same output", k)
			}
			checkValid(t, a)
		}
	}
}

func TestKinds(t *testing.T) {
	origSubj, origWords, _ := words(t, []byte(samplePlain))
	n := len(origWords)
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	tests := []struct {
		kind  Kind
		check func(t *testing.T, raw []byte, subj string, body []string, html bool)
	}{
		{HashBuster, func(t *testing.T, raw []byte, subj string, body []string, html bool) {
			if subj == origSubj || len(strings.Fields(subj)) != len(strings.Fields(origSubj))+1 {
				t.Errorf("subject %q: want one random word added", subj)
			}
			if len(body) != n+int(0.2*float64(n)+0.5) {
				t.Errorf("body has %d words, want %d", len(body), n+int(0.2*float64(n)+0.5))
			}
		}},
		{Insert, func(t *testing.T, raw []byte, subj string, body []string, html bool) {
			if len(body) <= n {
				t.Errorf("no words inserted")
			}
			for _, w := range body {
				if !slices.Contains(origWords, w) && !slices.Contains([]string{"zebra", "quantum"}, w) && !slices.Contains(origWords, w+",") && !slices.Contains(origWords, w+".") {
					t.Errorf("inserted word %q is from neither the message nor the vocabulary", w)
				}
			}
		}},
		{Delete, func(t *testing.T, raw []byte, subj string, body []string, html bool) {
			if len(body) >= n {
				t.Errorf("no words deleted")
			}
		}},
		{Typos, func(t *testing.T, raw []byte, subj string, body []string, html bool) {
			if len(body) != n {
				t.Fatalf("word count changed: %d → %d", n, len(body))
			}
			diff := 0
			for i := range body {
				if body[i] != origWords[i] {
					diff++
				}
			}
			if diff == 0 || diff > int(0.2*float64(n)+0.5) {
				t.Errorf("%d words changed", diff)
			}
		}},
		{Shuffle, func(t *testing.T, raw []byte, subj string, body []string, html bool) {
			if slices.Equal(body, origWords) {
				t.Errorf("order unchanged")
			}
			if !slices.Equal(sorted(body), sorted(origWords)) {
				t.Errorf("words changed")
			}
		}},
		{Append, func(t *testing.T, raw []byte, subj string, body []string, html bool) {
			if !slices.Equal(body[:n], origWords) {
				t.Errorf("original text altered")
			}
			if !strings.Contains(strings.Join(body, " "), "bakery on the corner") {
				t.Errorf("pool paragraph not appended: %q", body[n:])
			}
		}},
		{Reencode, func(t *testing.T, raw []byte, subj string, body []string, html bool) {
			if !bytes.Contains(raw, []byte("base64")) && !bytes.Contains(raw, []byte("quoted-printable")) {
				t.Errorf("no transfer encoding")
			}
			if !bytes.Contains(raw, []byte("Subject: =?")) {
				t.Errorf("subject not encoded")
			}
			if subj != origSubj || !slices.Equal(body, origWords) {
				t.Errorf("text changed by re-encoding: %q %q", subj, body)
			}
		}},
		{HTMLify, func(t *testing.T, raw []byte, subj string, body []string, html bool) {
			if !html || !bytes.Contains(raw, []byte("text/html")) {
				t.Errorf("not HTML")
			}
			if !bytes.Contains(raw, []byte(`<a href="http://watches.example/offer">`)) {
				t.Errorf("URL not linked")
			}
			if !slices.Equal(body, origWords) {
				t.Errorf("text changed: %q", body)
			}
		}},
		{HTMLTricks, func(t *testing.T, raw []byte, subj string, body []string, html bool) {
			if !html {
				t.Errorf("not HTML")
			}
			if len(body) != n {
				t.Errorf("word count changed: %d → %d", n, len(body))
			}
			if slices.Equal(body, origWords) {
				t.Errorf("no word obfuscated")
			}
		}},
		{Combo, func(t *testing.T, raw []byte, subj string, body []string, html bool) {
			if subj == origSubj && slices.Equal(body, origWords) && !html && !bytes.Contains(raw, []byte("base64")) && !bytes.Contains(raw, []byte("quoted-printable")) {
				t.Errorf("nothing changed")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			for seed := uint64(0); seed < 20; seed++ {
				raw, err := Mutate([]byte(samplePlain), Options{Kinds: []Kind{tt.kind}, Seed: seed, Strength: 0.2,
					Words: []string{"zebra", "quantum"}, Paragraphs: []string{"A small bakery on the corner sells bread."}})
				if err != nil {
					t.Fatal(err)
				}
				checkValid(t, raw)
				subj, body, html := words(t, raw)
				tt.check(t, raw, subj, body, html)
				if t.Failed() {
					t.Logf("seed %d:\n%s", seed, raw)
					return
				}
			}
		})
	}
}

func TestHTMLBase(t *testing.T) {
	subj, body, html := words(t, []byte(sampleHTML))
	if subj != "Your prescription is ready" || !html {
		t.Fatalf("subject %q html %v", subj, html)
	}
	text := strings.Join(body, " ")
	for _, want := range []string{"Café prices.", "here <http://pills.example/x>", "worldwide delivery"} {
		if !strings.Contains(text, want) {
			t.Errorf("text %q lacks %q", text, want)
		}
	}
	if strings.Contains(text, "color:red") {
		t.Errorf("style text leaked: %q", text)
	}
	raw, err := Mutate([]byte(sampleHTML), Options{Kinds: []Kind{HTMLify}})
	if err != nil {
		t.Fatal(err)
	}
	checkValid(t, raw)
	if !bytes.Contains(raw, []byte("text/plain")) || bytes.Contains(raw, []byte("<p>")) {
		t.Errorf("HTML not turned into plain text:\n%s", raw)
	}
}

func TestHTMLTricksMarkup(t *testing.T) {
	seen := map[string]bool{}
	for seed := uint64(0); seed < 30; seed++ {
		raw, err := Mutate([]byte(samplePlain), Options{Kinds: []Kind{HTMLTricks}, Seed: seed, Strength: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		s := string(raw)
		if strings.Contains(s, "base64") {
			continue
		}
		if strings.Contains(s, "<!--") {
			seen["comment"] = true
		}
		if strings.Contains(s, "></") {
			seen["empty tag"] = true
		}
		if strings.ContainsAny(s, "\u200B\u200C\u200D\u2060\uFEFF\u00AD") {
			seen["zero width"] = true
		}
		if strings.ContainsAny(s, "асеорхуіѕАВСЕНІКМОРТХΑΒΕΗΙΚΜΝΟΡΤΥΧΖν") {
			seen["look-alike"] = true
		}
		if strings.ContainsRune(s, markTag) || strings.ContainsRune(s, markComment) {
			t.Fatalf("marker leaked into output")
		}
	}
	for _, want := range []string{"comment", "empty tag", "zero width", "look-alike"} {
		if !seen[want] {
			t.Errorf("trick %q never produced", want)
		}
	}
}

func TestReencodeCharsets(t *testing.T) {
	seen := map[string]bool{}
	for seed := uint64(0); seed < 40; seed++ {
		raw, err := Mutate([]byte(sampleHTML), Options{Kinds: []Kind{Reencode}, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		checkValid(t, raw)
		for _, cs := range []string{"charset=utf-8", "charset=iso-8859-1", "charset=utf-16le"} {
			if bytes.Contains(raw, []byte(cs)) {
				seen[cs] = true
			}
		}
		_, body, _ := words(t, raw)
		if !strings.Contains(strings.Join(body, " "), "Café prices.") {
			t.Errorf("seed %d: text not recovered: %q\n%s", seed, body, raw)
		}
	}
	if len(seen) != 3 {
		t.Errorf("charsets produced: %v", seen)
	}
}

func TestNewMessage(t *testing.T) {
	a := NewMessage("Meeting notes", "First paragraph here.\n\nSecond paragraph, with café.", false)
	b := NewMessage("Meeting notes", "First paragraph here.\n\nSecond paragraph, with café.", false)
	if !bytes.Equal(a, b) {
		t.Errorf("NewMessage not deterministic")
	}
	checkValid(t, a)
	subj, body, html := words(t, a)
	if subj != "Meeting notes" || html || strings.Join(body, " ") != "First paragraph here. Second paragraph, with café." {
		t.Errorf("got %q %q %v", subj, body, html)
	}
	h := NewMessage("Sale", "Buy at https://x.example now", true)
	checkValid(t, h)
	if !bytes.Contains(h, []byte(`text/html`)) || !bytes.Contains(h, []byte(`<a href="https://x.example">`)) {
		t.Errorf("html message:\n%s", h)
	}
}

func TestGarbage(t *testing.T) {
	for _, in := range []string{"", "\x00\x01", "Subject: only a header\r\n\r\n", "no header at all, just text", "Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!!\r\n"} {
		raw, err := Mutate([]byte(in), Options{Seed: 1})
		if err != nil {
			continue
		}
		checkValid(t, raw)
	}
	if _, err := Mutate(nil, Options{}); err != ErrEmpty {
		t.Errorf("empty input: err = %v", err)
	}
	if _, err := Mutate([]byte(samplePlain), Options{Kinds: []Kind{"bogus"}}); err == nil {
		t.Errorf("unknown kind accepted")
	}
}

func FuzzMutate(f *testing.F) {
	f.Add([]byte(samplePlain), uint64(1), uint8(0))
	f.Add([]byte(sampleHTML), uint64(2), uint8(8))
	f.Fuzz(func(t *testing.T, raw []byte, seed uint64, k uint8) {
		kinds := AllKinds()
		out, err := Mutate(raw, Options{Kinds: []Kind{kinds[int(k)%len(kinds)]}, Seed: seed, Strength: float64(k%10) / 10})
		if err != nil {
			return
		}
		if _, err := netmail.ReadMessage(bytes.NewReader(out)); err != nil {
			t.Fatalf("output unreadable: %v", err)
		}
	})
}

func BenchmarkMutate(b *testing.B) {
	for _, k := range AllKinds() {
		b.Run(string(k), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := Mutate([]byte(sampleHTML), Options{Kinds: []Kind{k}, Seed: uint64(i), Strength: 0.2}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestStructure(t *testing.T) {
	tests := []struct {
		name, raw string
		want      string
		html      bool
	}{
		{"alternative reads the HTML", "Subject: s\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhidden plain words\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>shown html words</p>\r\n--b--\r\n", "shown html words", true},
		{"alternative falls back to plain", "Subject: s\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nplain words here\r\n--b\r\nContent-Type: text/html\r\n\r\n<img src=x>\r\n--b--\r\n", "plain words here", false},
		{"mixed reads every inline part, skips attachments", "Subject: s\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nfirst part\r\n--b\r\nContent-Type: text/plain\r\nContent-Disposition: attachment; filename=a.txt\r\n\r\nattached\r\n--b\r\nContent-Type: text/plain\r\n\r\nsecond part\r\n--b--\r\n", "first part second part", false},
		{"undeclared 8-bit text is Windows-1252", "Subject: s\r\nContent-Type: text/plain\r\n\r\nk\xfclt\xfcr caf\xe9\r\n", "kültür café", false},
		{"HTML meta charset", "Subject: s\r\nContent-Type: text/html\r\n\r\n<meta charset=\"koi8-r\"><p>\xf0\xd2\xc9\xd7\xc5\xd4</p>\r\n", "Привет", true},
		{"malformed content type", "Subject: s\r\nContent-Type: text/html ; ; ;\r\n\r\n<p>a<b>b</b>c <select><option>one<option>two</select></p>\r\n", "abc one two", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, body, html := words(t, []byte(tt.raw))
			if got := strings.Join(body, " "); got != tt.want || html != tt.html {
				t.Errorf("text %q html %v, want %q %v", got, html, tt.want, tt.html)
			}
		})
	}
}
