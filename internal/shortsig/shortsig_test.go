package shortsig

import (
	"encoding/base64"
	"math/rand/v2"
	"net"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/mime"
)

const cjkOffer = "您好！本公司長期代開各類增值稅發票，稅點優惠，誠信合作，歡迎來電洽談。"

// TestGuards: which keys a message gets, and that content every message
// may share (nothing, a tracking pixel, a spacer, a small attachment, a
// link to a common host, a greeting, a logo in a long message) makes none.
func TestGuards(t *testing.T) {
	const signature = "\n-- \n\"I don't take no stocks in mathematics, anyway\" --Huckleberry Finn\nhttp://www.example.org/~cdale"

	img := attachment{typ: "image/png", name: "offer.png", data: pngImage(t, 200, 100, 1)}
	long := randomWords(3000, 9)
	cases := []struct {
		name string
		msg  testMessage
		want string // kinds of the keys, in order
	}{
		{"empty message", testMessage{subject: ""}, ""},
		{"greeting only", testMessage{subject: "hi", text: "Hello Bob"}, ""},
		{"image only", testMessage{parts: []attachment{img}}, "all,media"},
		{"image with a greeting", testMessage{subject: "Hi", text: "Hello Bob,", parts: []attachment{img}}, "all,media"},
		{"inline image (multipart/related)", testMessage{html: `<img src="cid:part0@test">`, parts: []attachment{{typ: "image/png", name: "a.png", data: img.data, inline: true}}}, "all,media"},
		{"image inlined as a data: URI", testMessage{html: `<img src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(img.data) + `">`}, "all,media"},
		{"tracking pixel only", testMessage{parts: []attachment{{typ: "image/gif", name: "p.gif", data: pixelGIF}}}, ""},
		{"spacer image (800x2)", testMessage{parts: []attachment{{typ: "image/png", name: "s.png", data: pngImage(t, 800, 2, 2)}}}, ""},
		{"icon (24x24)", testMessage{parts: []attachment{{typ: "image/png", name: "i.png", data: pngImage(t, 24, 24, 3)}}}, ""},
		{"small attachment", testMessage{text: "see attached", parts: []attachment{{typ: "application/pdf", name: "a.pdf", data: randomBytes(200, 1)}}}, ""},
		{"attachment only", testMessage{text: "see attached", parts: []attachment{{typ: "application/pdf", name: "a.pdf", data: randomBytes(4000, 1)}}}, "all,media"},
		{"text attachment only", testMessage{parts: []attachment{{typ: "text/html", name: "invoice.html", data: []byte(strings.Repeat("<p>pay now</p>", 100))}}}, "all,media"},
		{"common hosts only", testMessage{html: `<a href="https://www.google.com/">x</a> <a href="https://twitter.com/">y</a>`}, ""},
		{"link only", testMessage{html: `<a href="http://cheap-pills.example.com/buy?id=1">here</a>`}, "all,links"},
		{"link to a common host with text", testMessage{text: "watch this video now it is really funny https://www.youtube.com/watch?v=x"}, "all"},
		{"short text, too few units", testMessage{subject: "ok", text: "thanks, see you"}, ""},
		{"short text", testMessage{subject: "meeting", text: "see you at the meeting tomorrow"}, "all"},
		{"short text over two lines", testMessage{subject: "meeting", text: "Hi Bob,\nsee you at the meeting tomorrow"}, "all,body"},
		{"one-line note and a signature", testMessage{subject: "EFnet", text: "You around?\nC" + signature}, "all,body"},
		{"one-line note and a signature after \"--\"", testMessage{subject: "EFnet", text: "You around?\nC" + strings.Replace(signature, "-- ", "--", 1)}, "all,body"},
		{"short note and a signature", testMessage{subject: "meeting", text: "Hi Bob,\nsee you at the meeting tomorrow" + signature}, "all,body,lead"},
		{"short CJK text", testMessage{subject: "合作", text: cjkOffer}, "all,lead"},
		{"long message with a logo", testMessage{subject: "news", text: long, parts: []attachment{{typ: "image/png", name: "logo.png", data: img.data, inline: true}}}, "lead"},
		{"long mailing-list message", testMessage{subject: "news", text: long, list: "users.lists.example.org"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := signRaw(c.msg.raw())
			if got := kinds(r); got != c.want {
				t.Errorf("keys %q, want %q (media %d, links %d, units %d)", got, c.want, r.Media, r.Links, r.Units)
			}
			if want := strings.HasPrefix(c.name, "one-line note"); r.SignedNote != want {
				t.Errorf("SignedNote %v, want %v", r.SignedNote, want)
			}
			for _, k := range r.Keys {
				if !IsKey(k) || len(k) != KeyLen {
					t.Errorf("malformed key %x", k)
				}
			}
		})
	}
}

// TestCopies: copies of a campaign with randomized headers, recipients and
// greeting, or padded with random text, share a key with the reported
// message; different messages of the same shape share none.
func TestCopies(t *testing.T) {
	const signature = "\n-- \nCDale, techmonkeys.net\n\"I don't take no stocks in mathematics, anyway\" --Huckleberry Finn"

	img := pngImage(t, 300, 200, 7)
	pdf := randomBytes(6000, 7)
	offer := "我們提供各類發票代開服務，稅點低，保真可查驗。\n聯繫電話一三八零零一三八零零零，微信同號。"
	base := "Dear customer,\n" + strings.Repeat("Our pharmacy offers the best prices on all medication without prescription. ", 3) +
		"Order today and get free worldwide shipping with discreet packaging and secure payment."
	cases := []struct {
		name       string
		orig, copy testMessage
		want       string // kinds of the shared keys; "" for none
	}{
		{"image-only copy, other headers and greeting",
			testMessage{from: "a@x.example", to: "u1@example.org", subject: "Hi Ann", text: "Hello Ann,", parts: []attachment{{typ: "image/png", name: "a.png", data: img}}},
			testMessage{from: "zz@y.example", to: "u2@example.org", subject: "Hi Bob", text: "Dear Bob", parts: []attachment{{typ: "image/png", name: "b.png", data: img}}},
			"media"},
		{"different image-only messages",
			testMessage{parts: []attachment{{typ: "image/png", name: "a.png", data: img}}},
			testMessage{parts: []attachment{{typ: "image/png", name: "a.png", data: pngImage(t, 300, 200, 8)}}},
			""},
		{"attachment-only copy",
			testMessage{to: "u1@example.org", subject: "Invoice 1", text: "see attached", parts: []attachment{{typ: "application/pdf", name: "inv1.pdf", data: pdf}}},
			testMessage{to: "u2@example.org", subject: "Invoice 2", text: "please see attached", parts: []attachment{{typ: "application/pdf", name: "inv2.pdf", data: pdf}}},
			"media"},
		{"different attachments with the same boilerplate",
			testMessage{subject: "photos", text: "See attached.\nSent from my iPhone", parts: []attachment{{typ: "image/jpeg", name: "a.jpg", data: randomBytes(5000, 1)}}},
			testMessage{subject: "photos", text: "See attached.\nSent from my iPhone", parts: []attachment{{typ: "image/jpeg", name: "a.jpg", data: randomBytes(5000, 2)}}},
			""},
		{"short CJK copy with another greeting",
			testMessage{to: "u1@example.org", subject: "發票", text: "王先生您好：\n" + offer},
			testMessage{to: "u2@example.org", subject: "發票服務", text: "李小姐：\n" + offer},
			"body"},
		{"short CJK copy, same text",
			testMessage{to: "u1@example.org", subject: "發票", text: offer},
			testMessage{to: "u2@example.org", subject: "發票", text: offer},
			"all,body,lead"},
		{"different short CJK texts",
			testMessage{subject: "發票", text: "王先生您好：\n" + offer},
			testMessage{subject: "發票", text: "王先生您好：\n明天下午三點在公司開會，請準時參加並帶上上週的報告。"},
			""},
		{"link-only copy with tracking parameters",
			testMessage{html: `<a href="http://pills.example.com/buy?u=1">x</a>`},
			testMessage{html: `<a href="https://www.pills.example.com/buy/?u=2#top">x</a>`},
			"all,links"},
		{"two one-line notes of one person, one signature (SignedNote: weak)",
			testMessage{subject: "EFnet #fork", text: "Someone has taken it. Mostly newtel users. I think we can take the.\nC" + signature},
			testMessage{subject: "calling wayne", text: "You around?\nC" + signature},
			"body"},
		{"a note's copy with another greeting, signed",
			testMessage{to: "u1@example.org", subject: "meeting", text: "Hi Bob,\nsee you at the meeting tomorrow" + signature},
			testMessage{to: "u2@example.org", subject: "our meeting", text: "Dear Ann,\nsee you at the meeting tomorrow" + signature},
			"body"},
		{"copy padded with 16 KB of random words",
			testMessage{subject: "Best prices", text: base},
			testMessage{subject: "Best prices", text: base + "\n\n" + randomWords(16<<10, 5)},
			"lead"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := signRaw(c.orig.raw()), signRaw(c.copy.raw())
			if got := shared(a, b); got != c.want {
				t.Errorf("shared keys %q, want %q (original %q, copy %q)", got, c.want, kinds(a), kinds(b))
			}
		})
	}
}

func TestUnits(t *testing.T) {
	cases := []struct{ in, want string }{
		{"Hello, World!", "hello world"},
		{"a I x2 ab12 abc1 R2D2 2024", "x2 abc1"},
		{"您好世界", "您好 好世 世界"},
		{"好 hi 世界", "好 hi 世界"},
		{"カタカナ", "カタ タカ カナ"},
		{"안녕하세요 세계", "안녕하세요 세계"},
		{"Привет мир", "привет мир"},
		{strings.Repeat("x", 41) + " ok", "ok"},
		{"see http://example.com/a?id=12345 and www.example.org/x now", "see and now"},
		{"awww.example.com", "awww example com"},
	}
	for _, c := range cases {
		if got := strings.Join(units(nil, c.in), " "); got != c.want {
			t.Errorf("units(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestNormalizeURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"http://www.Example.co.uk/a/b/?q=1#f", "example.co.uk/a/b"},
		{"https://user@sub.example.com:8080/x", "example.com/x"},
		{"//cdn.example.net/img.png", "example.net/img.png"},
		{"www.example.org", "example.org"},
		{"http://192.0.2.1/login", "192.0.2.1/login"},
		{"http://localhost/", "localhost"},
		{"http://%zz/", ""},
	}
	for _, c := range cases {
		d, p, ok := normalizeURL(c.in)
		got := d + p
		if !ok {
			got = ""
		}
		if got != c.want {
			t.Errorf("normalizeURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestKeyFormat(t *testing.T) {
	k := key(KindAll, []string{"a"})
	if !IsKey(k) || k[2] != byte(KindAll) {
		t.Fatalf("key %x", k)
	}
	if kind, ok := KindOf(k); !ok || kind != KindAll || kind.String() != "all" {
		t.Errorf("KindOf = %v %v", kind, ok)
	}
	if IsKey(k[:KeyLen-1]) || IsKey(append([]byte{Version + 1}, k[1:]...)) {
		t.Error("IsKey accepts a malformed key")
	}
	// Components are length-delimited: moving a boundary changes the key.
	if string(key(KindAll, []string{"ab"}, nil)) == string(key(KindAll, []string{"a", "b"}, nil)) ||
		string(key(KindAll, []string{"a"}, []string{"b"})) == string(key(KindAll, []string{"a", "b"}, nil)) {
		t.Error("ambiguous encoding")
	}
	if r := New(Options{}).Sign(nil); len(r.Keys) != 0 {
		t.Error("nil document has keys")
	}
	if r := New(Options{}).Sign(&mime.Document{}); len(r.Keys) != 0 {
		t.Error("empty document has keys")
	}
}

// TestSignUnsigned: a long message without other signature gets the
// content keys of its text, never a media key of its own.
func TestSignUnsigned(t *testing.T) {
	logo := pngImage(t, 200, 100, 1)
	long := testMessage{subject: "長文", text: "改善掉髮，預防禿頭的最佳選擇。純天然植物精華萃取，並經人體測試通過，絕無副作用。" +
		"榮獲北京國際發明展銀牌獎及咸陽國際醫藥保健節金獎。即日起訂購兩瓶再送一瓶，數量有限，送完為止，歡迎來電洽詢專人服務。",
		parts: []attachment{{typ: "image/png", name: "logo.png", data: logo, inline: true}}}
	doc := mime.Parse(long.raw(), mime.Options{})
	s := New(Options{})
	if r := s.Sign(doc); r.Short || kinds(r) != "lead" {
		t.Errorf("Sign: short %v, keys %q", r.Short, kinds(r))
	}
	if r := s.SignUnsigned(doc); !r.Short || kinds(r) != "all,lead" {
		t.Errorf("SignUnsigned: short %v, keys %q", r.Short, kinds(r))
	}
}

// TestMaxUnits: a long text without other signature is read up to
// MaxUnits distinct units; what follows does not change its keys.
func TestMaxUnits(t *testing.T) {
	var b strings.Builder
	for i := range 3000 {
		b.WriteRune(rune(0x4e00 + i*7%20000)) // a run of Han: bigrams
	}
	text := b.String()
	s := New(Options{MaxUnits: 500})
	r := s.SignUnsigned(&mime.Document{Text: text})
	if r.Units != 500 || len(r.Keys) == 0 {
		t.Fatalf("units %d, keys %d", r.Units, len(r.Keys))
	}
	more := s.SignUnsigned(&mime.Document{Text: text + "其他內容"})
	if shared(r, more) != kinds(r) {
		t.Errorf("keys changed past MaxUnits: %q of %q", shared(r, more), kinds(r))
	}
}

// TestMayBeIP: every host net.ParseIP accepts is one mayBeIP lets
// through.
func TestMayBeIP(t *testing.T) {
	for _, h := range []string{"1.2.3.4", "::1", "fe80::1", "::ffff:1.2.3.4", "2001:db8::8a2e:370:7334", "010.1.1.1",
		"1.2.3", "example.com", "1.2.3.4.example", "a:b", "", "1..2", "fe80::1%eth0"} {
		if net.ParseIP(h) != nil && !mayBeIP(h) {
			t.Errorf("mayBeIP(%q) = false, but it is an IP address", h)
		}
	}
	for _, h := range []string{"example.com", "www.1.2.3.4.nip.io", "1-2-3-4.example"} {
		if mayBeIP(h) {
			t.Errorf("mayBeIP(%q) = true", h)
		}
	}
	const alphabet = "0123456789.:abcfx%[]"
	r := rand.New(rand.NewPCG(45, 46))
	for range 50000 {
		b := make([]byte, r.IntN(20))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if h := string(b); net.ParseIP(h) != nil && !mayBeIP(h) {
			t.Fatalf("mayBeIP(%q) = false, but it is an IP address", h)
		}
	}
}
