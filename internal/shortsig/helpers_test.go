package shortsig

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

	"github.com/nddmilter/nddmilter/internal/mime"
)

// attachment is a non-text part of a test message.
type attachment struct {
	typ, name string
	data      []byte
	inline    bool // Content-Disposition inline with a Content-ID
}

// testMessage is the content of a test message; raw renders it.
type testMessage struct {
	from, to, subject string
	text              string // text/plain body ("" for none)
	html              string // text/html body ("" for none)
	list              string // List-Id header value ("" for none)
	parts             []attachment
}

// raw renders m as a multipart/mixed message (multipart/related for
// inline parts), parts base64-encoded.
func (m testMessage) raw() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s@test>\r\nMIME-Version: 1.0\r\n", m.from, m.to, m.subject, m.to)
	if m.list != "" {
		fmt.Fprintf(&b, "List-Id: %s\r\n", m.list)
	}
	const bnd = "BOUNDARY-1"
	b.WriteString("Content-Type: multipart/mixed; boundary=\"" + bnd + "\"\r\n\r\n")
	if m.text != "" {
		fmt.Fprintf(&b, "--%s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n%s\r\n", bnd, wrap64([]byte(m.text)))
	}
	if m.html != "" {
		fmt.Fprintf(&b, "--%s\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n%s\r\n", bnd, wrap64([]byte(m.html)))
	}
	for i, p := range m.parts {
		disp := "attachment; filename=\"" + p.name + "\""
		if p.inline {
			disp = fmt.Sprintf("inline\r\nContent-ID: <part%d@test>", i)
		}
		fmt.Fprintf(&b, "--%s\r\nContent-Type: %s; name=\"%s\"\r\nContent-Disposition: %s\r\nContent-Transfer-Encoding: base64\r\n\r\n%s\r\n",
			bnd, p.typ, p.name, disp, wrap64(p.data))
	}
	fmt.Fprintf(&b, "--%s--\r\n", bnd)
	return b.Bytes()
}

func wrap64(data []byte) string {
	s := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for len(s) > 76 {
		b.WriteString(s[:76] + "\r\n")
		s = s[76:]
	}
	b.WriteString(s)
	return b.String()
}

// pngImage returns a w×h PNG of noise drawn from seed (large enough to
// count as media unless w or h is small).
func pngImage(t testing.TB, w, h int, seed uint64) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pixelGIF is a 1×1 transparent GIF, the usual tracking pixel.
var pixelGIF, _ = base64.StdEncoding.DecodeString("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")

// randomBytes returns n bytes drawn from seed (an attachment's content).
func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}

// dictionary is a small vocabulary for padding and long texts.
var dictionary = strings.Fields(`account address agreement answer balance basket
	bridge bucket camera candle carpet castle channel cheese circle climate
	coffee colour cotton council country course cousin crystal current
	danger daughter debate degree desert dinner doctor dragon drawer driver
	engine evening example factor family farmer feather figure finger
	flower forest friend garden ginger glass grain guitar hammer harbour
	holiday honey island jacket jersey kettle kitchen ladder lemon letter
	library lizard market meadow member method mirror module monkey morning
	mother motion needle number office orange orchard paper parcel pencil
	pepper picture pillow planet pocket potato powder prison puzzle rabbit
	rhythm river rocket saddle salad school season shadow silver sister
	soldier spider spirit spring square station stomach summer switch
	system table teacher theory thread ticket timber tomato tongue towel
	tower travel turkey valley velvet village violin walnut window winter`)

// randomWords returns about n bytes of random dictionary words.
func randomWords(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 3))
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(dictionary[rng.IntN(len(dictionary))])
		if rng.IntN(12) == 0 {
			b.WriteString(".\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// signRaw parses and signs a raw message with the default options.
func signRaw(raw []byte) Result {
	return New(Options{}).Sign(mime.Parse(raw, mime.Options{}))
}

// kinds lists the kinds of r's keys.
func kinds(r Result) string {
	var ks []string
	for _, k := range r.Keys {
		kind, _ := KindOf(k)
		ks = append(ks, kind.String())
	}
	return strings.Join(ks, ",")
}

// shared returns the kinds of the keys of a (a reported message, indexed
// under them) that b (a copy) looks up.
func shared(a, b Result) string {
	var ks []string
	for _, x := range a.Keys {
		for _, y := range append(b.Keys[:len(b.Keys):len(b.Keys)], b.Lookup...) {
			if bytes.Equal(x, y) {
				kind, _ := KindOf(x)
				ks = append(ks, kind.String())
			}
		}
	}
	return strings.Join(ks, ",")
}
