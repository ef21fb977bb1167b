package mime

import (
	"bytes"
	"strings"
	"testing"
)

func TestDecodeBase64(t *testing.T) {
	tests := []struct {
		name, in, want string
		warn           string
	}{
		{"plain", "aGVsbG8gd29ybGQ=", "hello world", ""},
		{"line breaks", "aGVs\r\nbG8g\r\nd29y\nbGQ=", "hello world", ""},
		{"no padding", "aGVsbG8gd29ybGQ", "hello world", ""},
		{"concatenated chunks", "aGk=aGk=", "hihi", ""},
		{"url-safe alphabet", "-_-_", "\xfb\xff\xbf", ""},
		{"garbage line skipped", "aGVsbG8g\r\n!!garbage**\r\nd29ybGQ=", "hello world", "bad base64 in t: 1 lines skipped"},
		{"trailing garbage on last line", "aGVsbG8g\r\nd29ybGQ=%%", "hello ", "bad base64 in t: 1 lines skipped"},
		{"truncated group", "aGVsbG8gd29ybGQ", "hello world", ""},
		{"single dangling char", "aGVsbA=", "hell", ""},
		{"partial group", "aGVsbGx", "helll", ""},
		{"dangling sextet", "aGVsb", "hel", "truncated base64 in t"},
		{"empty", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p parser
			got := p.decodeBase64Append(nil, []byte(tt.in), "t")
			if string(got) != tt.want {
				t.Errorf("decode(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if tt.warn == "" && len(p.warnings) > 0 || tt.warn != "" && (len(p.warnings) == 0 || p.warnings[0] != tt.warn) {
				t.Errorf("warnings = %q, want %q", p.warnings, tt.warn)
			}
		})
	}
}

func TestDecodeQP(t *testing.T) {
	tests := []struct{ in, want string }{
		{"caf=C3=A9", "café"},
		{"soft=\r\nbreak", "softbreak"},
		{"soft=  \nbreak", "softbreak"},
		{"trailing   \r\nspace", "trailing\nspace"},
		{"=41=42\r\n=4", "AB\n=4"},
		{"tab\t=\r\n\r\n", "tab\t\n"},
		{"bad =ZZ escape", "bad =ZZ escape"},
		{"lower =c3=a9", "lower é"},
		{"end =", "end "},
		{"=3D", "="},
	}
	for _, tt := range tests {
		if got := string(decodeQPAppend(nil, []byte(tt.in))); got != tt.want {
			t.Errorf("decodeQP(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseMediaType(t *testing.T) {
	tests := []struct {
		in   string
		want mediaType
	}{
		{`text/plain; charset="UTF-8"`, mediaType{typ: "text/plain", charset: "utf-8"}},
		{`Multipart/Mixed; boundary="a;b=c"; charset=x`, mediaType{typ: "multipart/mixed", boundary: "a;b=c", charset: "x"}},
		{"multipart/report; report-type=Feedback-Report;\r\n boundary=zz", mediaType{typ: "multipart/report", reportType: "feedback-report", boundary: "zz"}},
		{`text/html;;charset='iso-8859-1' ; junk`, mediaType{typ: "text/html", charset: "iso-8859-1"}},
		{`attachment; filename="x.pdf"`, mediaType{typ: "attachment", filename: true}},
		{`text/plain; charset=utf-8 (comment)`, mediaType{typ: "text/plain", charset: "utf-8"}},
		{`text/plain; boundary="unterminated`, mediaType{typ: "text/plain", boundary: "unterminated"}},
		{``, mediaType{}},
	}
	for _, tt := range tests {
		if got := parseMediaType(tt.in); got != tt.want {
			t.Errorf("parseMediaType(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestUnwrapARF(t *testing.T) {
	arf := readSample(t, "arf.eml")
	orig := readSample(t, "obfuscated-spam.eml")
	got, ok := UnwrapARF(arf)
	if !ok {
		t.Fatal("UnwrapARF(arf.eml) = false")
	}
	if !bytes.Equal(got, orig) {
		t.Errorf("UnwrapARF returned %d bytes, want the %d bytes of obfuscated-spam.eml", len(got), len(orig))
	}

	headersOnly := "Content-Type: multipart/report; report-type=feedback-report; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/plain\r\n\r\nreport\r\n--b\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\n" +
		"--b\r\nContent-Type: text/rfc822-headers\r\n\r\nSubject: orig\r\nFrom: x@y.z\r\n\r\n--b--\r\n"
	b64 := "Content-Type: multipart/report; report-type=\"feedback-report\"; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: message/rfc822\r\nContent-Transfer-Encoding: base64\r\n\r\nU3ViamVjdDogaGkNCg0KYm9keQ==\r\n--b--\r\n"
	tests := []struct {
		name string
		raw  string
		want string
		ok   bool
	}{
		{"headers only", headersOnly, "Subject: orig\r\nFrom: x@y.z\r\n", true},
		{"base64 attached message", b64, "Subject: hi\r\n\r\nbody", true},
		{"not a report", "Subject: x\r\n\r\nbody", "Subject: x\r\n\r\nbody", false},
		{"other report type", strings.Replace(headersOnly, "feedback-report;", "delivery-status;", 1), "", false},
		{"report without original", "Content-Type: multipart/report; report-type=feedback-report; boundary=b\r\n\r\n--b\r\n\r\ntext\r\n--b--\r\n", "", false},
		{"garbage", "\x00\xff--", "\x00\xff--", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := UnwrapARF([]byte(tt.raw))
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				if string(got) != tt.raw {
					t.Errorf("not a report but returned %q", got)
				}
				return
			}
			if string(got) != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLookupCharset(t *testing.T) {
	for _, cs := range []string{"iso-8859-1", "iso-8859-2", "iso-8859-15", "windows-1250", "windows-1251", "windows-1252",
		"koi8-r", "koi8-u", "gb2312", "gbk", "gb18030", "big5", "shift_jis", "euc-jp", "iso-2022-jp", "euc-kr",
		"ks_c_5601-1987", "utf-16", "utf-16le", "utf-16be", "cp1251", "x-cp1251", "ibm866", "macintosh", "tis-620",
		"chinesebig5", "gb2312_charset"} {
		if lookupCharset(cs) == nil {
			t.Errorf("charset %q unknown", cs)
		}
	}
	if lookupCharset("x-no-such-charset") != nil {
		t.Error("unknown charset found")
	}
}

// TestHostileInputs parses large adversarial inputs. It asserts nothing
// about time (benchmarks do that); an accidentally quadratic code path
// would make it run for hours instead of well under a second.
func TestHostileInputs(t *testing.T) {
	const n = 1 << 20
	html := func(body string) string {
		return "Content-Type: text/html\r\n\r\n" + body
	}
	tests := map[string]string{
		"nested tags":         html(strings.Repeat("<div>", n/5) + "x"),
		"hidden then nested":  html(strings.Repeat("<span style=\"display:none\">", n/30) + "x"),
		"unmatched end tags":  html(strings.Repeat("<b>", 2000) + strings.Repeat("</zz>", n/5)),
		"url with parens":     "\r\nhttp://x.example/" + strings.Repeat(")", n),
		"encoded-word starts": "Subject: " + strings.Repeat("=?utf-8?q?", n/10) + "\r\n\r\nx",
		"delimiters":          "Content-Type: multipart/mixed; boundary=b\r\n\r\n" + strings.Repeat("--b\r\n", n/5),
		"near delimiters":     "Content-Type: multipart/mixed; boundary=b\r\n\r\n" + strings.Repeat("--bx\r\n", n/6),
		"bad base64 lines":    "Content-Transfer-Encoding: base64\r\n\r\n" + strings.Repeat("!\r\n", n/3),
		"long header":         "Subject: " + strings.Repeat("a ", n/2) + "\r\n\r\n",
		"many header lines":   strings.Repeat("X-A: b\r\n", n/8) + "\r\n",
		"long word":           "\r\n" + strings.Repeat("a", n),
		"homoglyph words":     "\r\n" + strings.Repeat("pаypаl ", n/9),
		"style attributes":    html(strings.Repeat("<p style=\"font-size:0.;font-size:;display:;height:0\">x", n/50)),
	}
	for name, raw := range tests {
		t.Run(name, func(t *testing.T) {
			d := Parse([]byte(raw), Options{})
			_ = UniqueTerms(Tokenize(d, TokenOptions{}))
			_, _ = UnwrapARF([]byte(raw))
		})
	}
}

// TestASCIIPrefix checks asciiPrefix against a byte loop at every length
// and position of the first high byte.
func TestASCIIPrefix(t *testing.T) {
	for n := 0; n < 80; n++ {
		for at := 0; at <= n; at++ {
			b := bytes.Repeat([]byte{'a'}, n)
			if at < n {
				b[at] = 0x80 + byte(at)
			}
			want := bytes.IndexFunc(b, func(r rune) bool { return r >= 0x80 })
			if want < 0 {
				want = n
			}
			if got := asciiPrefix(b); got != want {
				t.Fatalf("asciiPrefix of %d bytes with a high byte at %d = %d", n, at, got)
			}
		}
	}
}
