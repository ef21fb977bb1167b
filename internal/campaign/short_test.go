package campaign

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/store"
)

// shortMessage renders a message with randomized headers (sender,
// recipient, Message-ID, date) from seed, an optional text/plain body and
// base64 parts (type, data).
func shortMessage(seed uint64, subject, text string, parts ...[2]string) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: \"Sales %d\" <s%d@sender%d.example>\r\nTo: user%d@example.org\r\nSubject: %s\r\n",
		rng.IntN(1000), rng.IntN(1e6), rng.IntN(1e6), rng.IntN(1e6), subject)
	fmt.Fprintf(&b, "Message-ID: <%x@mx%d.example>\r\nDate: Mon, %d Nov 2026 10:%02d:00 +0000\r\nMIME-Version: 1.0\r\n",
		rng.Uint64(), rng.IntN(100), 1+rng.IntN(28), rng.IntN(60))
	b.WriteString("Content-Type: multipart/mixed; boundary=\"=_b\"\r\n\r\n")
	if text != "" {
		b.WriteString("--=_b\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" +
			strings.ReplaceAll(text, "\n", "\r\n") + "\r\n")
	}
	for i, p := range parts {
		fmt.Fprintf(&b, "--=_b\r\nContent-Type: %s\r\nContent-Disposition: attachment; filename=\"f%d-%d\"\r\nContent-Transfer-Encoding: base64\r\n\r\n%s\r\n",
			p[0], seed, i, base64.StdEncoding.EncodeToString([]byte(p[1])))
	}
	b.WriteString("--=_b--\r\n")
	return b.Bytes()
}

// noisePNG is a w×h PNG of noise drawn from seed.
func noisePNG(t testing.TB, w, h int, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(rng.IntN(256))
	}
	img.Set(0, 0, color.NRGBA{A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// randomBytes is n bytes drawn from seed (an attachment).
func randomBytes(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 4))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return string(b)
}

// padWords is about n bytes of random dictionary words: the padding an
// attacker appends to a copy.
func padWords(n int, seed uint64) string {
	var words []string
	for _, c := range campaignTexts {
		words = append(words, strings.Fields(c.body)...)
	}
	words = append(words, strings.Fields(`account address agreement answer balance basket
		bridge bucket camera candle carpet castle channel cheese circle climate coffee
		colour cotton council country course cousin crystal current danger daughter
		debate degree desert dinner doctor dragon drawer driver engine evening example
		factor family farmer feather figure finger flower forest friend garden ginger
		glass grain guitar hammer harbour holiday honey island jacket jersey kettle`)...)
	rng := rand.New(rand.NewPCG(seed, 5))
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(strings.Trim(words[rng.IntN(len(words))], ".,!"))
		if rng.IntN(15) == 0 {
			b.WriteString(".\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// longCJK is 120 distinct-looking characters without punctuation.
var longCJK = strings.Repeat("改善掉髮預防禿頭的最佳選擇純天然植物精華萃取並經人體測試通過絕無副作用", 2) +
	"榮獲北京國際發明展銀牌獎及咸陽國際醫藥保健節金獎即日起訂購兩瓶再送一瓶數量有限送完為止歡迎來電洽詢專人服務"

const cjkInvoice = "本公司長期代開各類增值稅發票，稅點優惠，保真可查驗。\n聯繫電話：一三八零零一三八零零零，微信同號。"

// TestShortCampaigns: campaigns too short for I-Match and ANDD (an image
// alone, an attachment with a line of text, a short Chinese text) can be
// reported, and their copies — other sender, recipient, Message-ID, date,
// file name, subject and greeting — are matched on short-message keys;
// other messages of the same shape are not.
func TestShortCampaigns(t *testing.T) {
	img := noisePNG(t, 240, 160, 1)
	pdf := randomBytes(6000, 1)
	cases := []struct {
		name     string
		reported func(seed uint64) []byte
		copies   []func(seed uint64) []byte
		others   [][]byte // must not match
		kind     string   // kind of the short key expected on copies
	}{
		{
			name:     "image only",
			reported: func(s uint64) []byte { return shortMessage(s, "Hi", "", [2]string{"image/png", img}) },
			copies: []func(uint64) []byte{
				func(s uint64) []byte { return shortMessage(s, "Hello", "", [2]string{"image/png", img}) },
				func(s uint64) []byte { return shortMessage(s, "Hi Bob", "Dear Bob,", [2]string{"image/png", img}) },
			},
			others: [][]byte{
				shortMessage(99, "Hi", "", [2]string{"image/png", noisePNG(t, 240, 160, 2)}),
				shortMessage(98, "Hi", "", [2]string{"image/png", noisePNG(t, 1, 1, 1)}),
			},
			kind: "media",
		},
		{
			name: "attachment only",
			reported: func(s uint64) []byte {
				return shortMessage(s, "Invoice", "see attached", [2]string{"application/pdf", pdf})
			},
			copies: []func(uint64) []byte{
				func(s uint64) []byte {
					return shortMessage(s, "Invoice 2231", "please see attached", [2]string{"application/pdf", pdf})
				},
			},
			others: [][]byte{
				shortMessage(99, "Invoice", "see attached", [2]string{"application/pdf", randomBytes(6000, 2)}),
			},
			kind: "media",
		},
		{
			name:     "short CJK text",
			reported: func(s uint64) []byte { return shortMessage(s, "發票", "王先生您好：\n"+cjkInvoice) },
			copies: []func(uint64) []byte{
				func(s uint64) []byte { return shortMessage(s, "發票", "李小姐：\n"+cjkInvoice) },
				func(s uint64) []byte { return shortMessage(s, "發票服務", "您好！\n"+cjkInvoice) },
			},
			others: [][]byte{
				shortMessage(99, "會議", "王先生您好：\n明天下午三點在公司開會，請準時參加並帶上上週的報告。"),
			},
			kind: "body",
		},
		{
			// One run of 120 characters: no word the tokenizer keeps, so
			// no I-Match signature and no sketch, however long.
			name:     "long CJK text without other signature",
			reported: func(s uint64) []byte { return shortMessage(s, "通知", longCJK) },
			copies: []func(uint64) []byte{
				func(s uint64) []byte { return shortMessage(s, "通知", longCJK) },
			},
			others: [][]byte{shortMessage(99, "通知", string([]rune(longCJK)[60:]))},
			kind:   "all",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			for i, r := range []string{"alice", "bob", "carol"} {
				o := f.report(t, c.reported(uint64(i+1)), store.KindSpam, r)
				if o.Skipped != "" || o.Campaign == 0 {
					t.Fatalf("report by %s: %+v", r, o)
				}
			}
			for i, cp := range c.copies {
				v := f.check(t, cp(uint64(100+i)))
				if v.Action != action.Quarantine || !hasShort(v, c.kind) {
					t.Errorf("copy %d: %s %+v, want quarantine on a %s key", i, v.Action, v, c.kind)
				}
			}
			for i, o := range c.others {
				if v := f.check(t, o); v.Action != action.Accept {
					t.Errorf("other message %d: %+v", i, v)
				}
			}
		})
	}
}

func hasShort(v Verdict, kind string) bool {
	for _, ev := range v.Evidence {
		if ev.Family == FamilyShort && ev.Kind == kind {
			return true
		}
	}
	return false
}

// TestShortGuards: content every message may share never makes a
// campaign — a tracking pixel alone, a common link alone, a greeting —
// and a not-junk report revokes a short campaign as any other.
func TestShortGuards(t *testing.T) {
	f := newFixture(t, Options{})
	for _, m := range [][]byte{
		shortMessage(1, "", ""),
		shortMessage(2, "Hi", "", [2]string{"image/gif", "GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x01D\x00;"}),
		shortMessage(3, "Hi", "https://www.google.com/"),
		shortMessage(4, "Hi", "thanks Bob"),
		shortMessage(5, "Hi", "see attached", [2]string{"application/pdf", randomBytes(300, 1)}),
	} {
		o := f.report(t, m, store.KindSpam, "alice")
		if o.Skipped == "" || o.Campaign != 0 {
			t.Errorf("report of %q made a campaign: %+v", m, o)
		}
	}
	img := noisePNG(t, 100, 100, 5)
	spam := shortMessage(1, "Hi", "", [2]string{"image/png", img})
	for _, r := range []string{"alice", "bob", "carol"} {
		f.report(t, spam, store.KindSpam, r)
	}
	for _, r := range []string{"dave", "erin"} {
		f.report(t, shortMessage(2, "Hello", "", [2]string{"image/png", img}), store.KindHam, r)
	}
	if v := f.check(t, spam); v.Action != action.Accept || !strings.Contains(v.Rule, "revoked") {
		t.Errorf("after not-junk reports: %+v", v)
	}
}

// TestShortListFooter: a short post relayed by a mailing list is signed
// without the list's footer, so that two posts with different text share
// no key, and a one-line post has none.
func TestShortListFooter(t *testing.T) {
	footer := "-- \nIrish Linux Users' Group: ilug@linux.ie\nhttp://www.linux.ie/mailman/listinfo/ilug for (un)subscription information.\nList maintainer: listmaster@linux.ie\n"
	f := newFixture(t, Options{})
	spam := listMessage("[ILUG] 辦公室出租", "台北市各區辦公室出租,歡迎來電洽詢。\n電話: 02-27492314", footer)
	for _, r := range []string{"alice", "bob", "carol"} {
		if o := f.report(t, spam, store.KindSpam, r); o.Skipped != "" {
			t.Fatalf("report: %+v", o)
		}
	}
	if v := f.check(t, spam); v.Action == action.Accept || !hasShort(v, "all") {
		t.Errorf("exact copy: %+v", v)
	}
	for _, post := range []string{"添付の画面について質問があります。よろしくお願いします。", "thanks!"} {
		m := listMessage("[ILUG] question", post, footer)
		if v := f.check(t, m); v.Action != action.Accept {
			t.Errorf("other post %q: %+v", post, v)
		}
	}
	one, err := f.sign(listMessage("[ILUG] ok", "thanks!", footer))
	if err != nil {
		t.Fatal(err)
	}
	if len(one.ShortKeys) != 0 {
		t.Errorf("one-line post has %d short keys", len(one.ShortKeys))
	}
}

// TestPaddedCopies: copies of a reported spam with 1 to 16 KB of random
// dictionary words appended are still flagged (the lead key: same subject
// and leading text), at most tagged on the lead alone.
func TestPaddedCopies(t *testing.T) {
	f := newFixture(t, Options{})
	c := campaignTexts[0]
	for i, r := range []string{"alice", "bob", "carol", "dave", "erin"} {
		f.report(t, shortMessage(uint64(i), c.subject, c.body), store.KindSpam, r)
	}
	for _, kb := range []int{1, 4, 8, 16, 64} {
		v := f.check(t, shortMessage(uint64(100+kb), c.subject, c.body+"\n\n"+padWords(kb<<10, uint64(kb))))
		if v.Action == action.Accept || !hasShort(v, "lead") {
			t.Errorf("%d KB of padding: %+v", kb, v)
		}
		t.Logf("%d KB: %s", kb, v.Rule)
	}
	// A padded copy reported is weak evidence (a lead key: the subject and
	// leading text only), as an ANDD-only match is: it does not extend the
	// campaign (docs/SECURITY.md, the merge rule).
	o := f.report(t, shortMessage(200, c.subject, c.body+"\n\n"+padWords(16<<10, 200)), store.KindSpam, "mallory")
	if !o.Apart && o.VoteOnly == "" {
		t.Errorf("padded copy reported: %+v, want apart or vote only", o)
	}
	// Another message with the same subject is not a copy.
	if v := f.check(t, shortMessage(7, c.subject, campaignTexts[1].body)); v.Action != action.Accept {
		t.Errorf("same subject, other text: %+v", v)
	}
}
