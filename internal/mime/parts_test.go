package mime

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

// pixelGIF is a 1×1 GIF.
const pixelGIF = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"

func TestParts(t *testing.T) {
	gif, _ := base64.StdEncoding.DecodeString(pixelGIF)
	pdf := strings.Repeat("%PDF-1.4 fake ", 10) + "end"
	msg := "From: a@example.com\r\nSubject: parts\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=b1\r\n\r\n" +
		"--b1\r\nContent-Type: multipart/related; boundary=b2\r\n\r\n" +
		"--b2\r\nContent-Type: text/html\r\n\r\n<p>Hello <img src=\"cid:x\"></p>\r\n" +
		"--b2\r\nContent-Type: image/gif\r\nContent-ID: <x>\r\nContent-Transfer-Encoding: base64\r\n\r\n" + pixelGIF + "\r\n" +
		"--b2--\r\n" +
		"--b1\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=a.pdf\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" + pdf + "\r\n" +
		"--b1\r\nContent-Type: text/plain\r\nContent-Disposition: attachment; filename=notes.txt\r\n\r\nsecret attached text\r\n" +
		"--b1--\r\n"
	doc := Parse([]byte(msg), Options{})
	if strings.Contains(doc.Text, "secret") {
		t.Errorf("text attachment read as text: %q", doc.Text)
	}
	want := []Part{
		{Type: "image/gif", Size: len(gif), Digest: sha256.Sum256(gif), Width: 1, Height: 1},
		{Type: "application/pdf", Size: len(pdf), Digest: sha256.Sum256([]byte(pdf)), Attachment: true},
		{Type: "text/plain", Size: len("secret attached text"), Digest: sha256.Sum256([]byte("secret attached text")), Attachment: true},
	}
	if len(doc.Parts) != len(want) {
		t.Fatalf("parts %+v, want %d", doc.Parts, len(want))
	}
	for i, w := range want {
		if doc.Parts[i] != w {
			t.Errorf("part %d = %+v, want %+v", i, doc.Parts[i], w)
		}
	}
}

func TestPartsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("Content-Type: multipart/mixed; boundary=b\r\n\r\n")
	for range 100 {
		b.WriteString("--b\r\nContent-Type: image/png\r\n\r\nnot an image\r\n")
	}
	b.WriteString("--b--\r\n")
	doc := Parse([]byte(b.String()), Options{})
	if len(doc.Parts) != maxDocParts {
		t.Errorf("%d parts kept, want %d", len(doc.Parts), maxDocParts)
	}
	if p := doc.Parts[0]; p.Width != 0 || p.Height != 0 || p.Size != len("not an image") {
		t.Errorf("part %+v", p)
	}
}

func TestImageSizeMalformed(t *testing.T) {
	for _, b := range []string{"", "GIF8", "\x89PNG\r\n\x1a\n", "\xff\xd8\xff", "GIF89a\xff\xff"} {
		if w, h := imageSize([]byte(b)); w != 0 || h != 0 {
			// A truncated header may still carry its dimensions (GIF).
			if !strings.HasPrefix(b, "GIF89a") {
				t.Errorf("imageSize(%q) = %d×%d", b, w, h)
			}
		}
	}
}

// BenchmarkParseAttachment is the cost of a non-text part: a message with
// a 1 MiB base64 attachment (transfer decoding and SHA-256 of the part).
func BenchmarkParseAttachment(b *testing.B) {
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 131)
	}
	msg := []byte("Subject: invoice\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n" +
		"--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		base64.StdEncoding.EncodeToString(data) + "\r\n--b--\r\n")
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if doc := Parse(msg, Options{}); len(doc.Parts) != 1 {
			b.Fatal("no part")
		}
	}
}

// An image inlined in HTML as a data: URI is a part, not a URL.
func TestPartsDataURI(t *testing.T) {
	gif, _ := base64.StdEncoding.DecodeString(pixelGIF)
	msg := "Content-Type: text/html\r\n\r\n<p>Hi <img src=\"data:image/gif;base64," + pixelGIF + "\"> <img src='DATA:text/plain,hello'> <a href=\"data:x\">x</a></p>"
	doc := Parse([]byte(msg), Options{})
	want := []Part{
		{Type: "image/gif", Size: len(gif), Digest: sha256.Sum256(gif), Width: 1, Height: 1},
		{Type: "text/plain", Size: 5, Digest: sha256.Sum256([]byte("hello"))},
	}
	if len(doc.Parts) != len(want) || doc.Parts[0] != want[0] || doc.Parts[1] != want[1] {
		t.Errorf("parts %+v, want %+v", doc.Parts, want)
	}
	for _, u := range doc.URLs {
		if strings.HasPrefix(strings.ToLower(u), "data:") {
			t.Errorf("data: URI among the URLs: %q", u)
		}
	}
	if !strings.Contains(doc.Text, "Hi") {
		t.Errorf("text %q", doc.Text)
	}
}
