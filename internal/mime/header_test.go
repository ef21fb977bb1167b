package mime

import (
	"strings"
	"testing"
)

// TestTransferEncoding checks that transferEncoding is the lower-cased
// value get returns, for the common encodings and the rest.
func TestTransferEncoding(t *testing.T) {
	for _, field := range []string{
		"", "Content-Transfer-Encoding: base64\r\n", "content-transfer-encoding:  BASE64 \r\n",
		"Content-Transfer-Encoding: Quoted-Printable\r\n", "Content-Transfer-Encoding: 7BIT\r\n",
		"Content-Transfer-Encoding: 8bit\r\nContent-Transfer-Encoding: base64\r\n",
		"Content-Transfer-Encoding: x-UUencode\r\n", "Content-Transfer-Encoding: base\r\n 64\r\n",
		"Content-Transfer-Encoding: binary\r\n", "Content-Transfer-Encoding:\r\n", "Content-Transfer-Encoding: bAse64x\r\n",
	} {
		h, _ := parseHeader([]byte("From: a@example.net\r\n"+field+"\r\nbody"), func(string) {}, nil)
		v, _ := h.get("Content-Transfer-Encoding")
		if got, want := transferEncoding(&h), strings.ToLower(v); got != want {
			t.Errorf("%q: transferEncoding = %q, want %q", field, got, want)
		}
	}
}
