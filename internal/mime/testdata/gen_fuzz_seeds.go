//go:build ignore

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func write(dir, name string, b []byte) {
	os.MkdirAll(dir, 0o755)
	s := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
		panic(err)
	}
}

// writeString writes a seed of a fuzz target taking one string.
func writeString(dir, name, v string) {
	os.MkdirAll(dir, 0o755)
	s := "go test fuzz v1\nstring(" + strconv.Quote(v) + ")\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
		panic(err)
	}
}

func main() {
	base := "internal/mime/testdata/fuzz/"
	files, _ := filepath.Glob("internal/mime/testdata/*.eml")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		write(base+"FuzzParse", "sample-"+filepath.Base(f[:len(f)-4]), b)
	}
	extra := map[string]string{
		"nested-deep":         "Content-Type: multipart/mixed; boundary=a\r\n\r\n--a\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: message/rfc822\r\n\r\nContent-Type: multipart/alternative; boundary=c\r\n\r\n--c\r\n\r\ntext\r\n--c--\r\n--b--\r\n--a--\r\n",
		"broken-boundaries":   "Content-Type: multipart/mixed; boundary=\"\"\r\n\r\n--\r\n----\r\n--x\r\n--x--junk\r\n--y",
		"bad-base64":          "Content-Transfer-Encoding: base64\r\nContent-Type: text/html; charset=utf-16\r\n\r\n=====\r\n//8=\r\nA\r\n",
		"8bit-headers":        "Subject: \xff\xfe\x80 =?utf-8?b?\xff?= =?=?==?\r\nFrom: \"\xe9\" <\xff@\xfe>\r\nContent-Type: text/plain; charset=\xff\r\n\r\n\xc3\x28",
		"utf16-part":          "Content-Type: text/plain; charset=utf-16le\r\n\r\nh\x00i\x00 \x00\x3d\xd8",
		"shift-jis-part":      "Content-Type: text/plain; charset=shift_jis\r\n\r\n\x82\xa0\x82\xa2\x82",
		"qp-edge":             "Content-Transfer-Encoding: quoted-printable\r\n\r\n=\r\n=4=\n==3D=",
		"encoded-word-split":  "Subject: =?UTF-8?B?4p?= =?UTF-8?B?yI?= =?iso-2022-jp?B?GyRC?=\r\n\r\n",
		"html-comment-words":  "Content-Type: text/html\r\n\r\nve<!--x-->ry <b>g</b>ood <div style=display:none>no</div><p hidden>no",
		"empty-parts":         "Content-Type: multipart/alternative; boundary=z\r\n\r\n--z\r\n--z\r\n\r\n--z--",
		"header-no-body":      "Subject: s",
		"only-newlines":       "\r\n\r\n\r\n",
		"digest":              "Content-Type: multipart/digest; boundary=d\r\n\r\n--d\r\n\r\nSubject: in\r\n\r\ndigest body\r\n--d--\r\n",
		"boundary-with-space": "Content-Type: multipart/alternative; boundary=\"=Multipart Boundary 0925\"\r\n\r\n--= Multipart Boundary 0925\r\nContent-Type: text/plain\r\n\r\nx\r\n--= Multipart Boundary 0925--\r\n",
		"format-flowed":       "Content-Type: text/plain; format=flowed; delsp=yes\r\n\r\n \r\nab \r\n-- \r\n  \r\nx ",
		"arf-report":          "Content-Type: multipart/report; report-type=feedback-report; boundary=r\r\n\r\n--r\r\nContent-Type: message/rfc822\r\nContent-Transfer-Encoding: base64\r\n\r\nU3ViamVjdDogaGkNCg0KYm9keQ==\r\n--r--\r\n",
	}
	for name, s := range extra {
		write(base+"FuzzParse", name, []byte(s))
	}
	htmls := map[string]string{
		"comments-in-words": "ph<!-- x -->arma<b></b>cy <!-- unterminated",
		"hidden-styles":     "<div style=\"display:none\">a</div><span style='font-size:0'>b</span><p style=\"visibility:hidden\">c<p>d",
		"entities":          "&amp;&lt;&gt;&#x110000;&#0;&#xD800;&nbsp;&unknown; &eacute",
		"broken-tags":       "<<a href=\"http://x\"<b>>text</a></</>< p>x<p/>",
		"raw-text":          "<script>if (a<b) document.write('</scr'+'ipt>')</script><style>x</style>ok<textarea>t</textarea><plaintext><b>",
		"deep-nesting":      "<div><div><div><div><span><span><b><i><u>deep</u></i></b></span></span></div></div></div></div>",
		"urls":              "<a href=\"HTTP://EXAMPLE.COM:80/\">x</a><img src=//cdn.x/y> www.a.b http://[::1]/ https://u:p@h/",
		"zero-width":        "f\u200br\u200ce\u00ade \u0440\u0430y\u0440\u0430l \uff26\uff32\uff25\uff25",
		"invalid-utf8":      "\xff\xfe<p>\xc3\x28\xa0\xa1</p>",
		"svg-math":          "<svg><text>svg</text></svg><math><mi>x</mi></math><select><option>a<option>b</select>",
	}
	for name, s := range htmls {
		write(base+"FuzzHTML", name, []byte(s))
	}
	headers := map[string]string{
		"joined-base64":  "=?UTF-8?B?4p?= =?UTF-8?B?yI?= =?utf-8?b?UHJpemUgd2FpdGluZyEg?=\r\n =?utf-8?b?UHJpemU=?=",
		"mixed-charsets": "=?iso-8859-2?b?d2lu6Q==?= =?windows-1251?b?d2lu6Q==?= =?koi8-r?q?=E9?= =?x-unknown?b?d2lu6Q==?=",
		"never-closed":   "=?a?b?x=?a?b?x=?a?b?x=?utf-8?q?x",
		"q-encoding":     "=?utf-8?q?caf=C3=A9_au_lait?= plain =?utf-8*en?Q?x?=",
		"8bit-and-words": "\xe9t\xe9 =?utf-8?b?w6k=?= \xff",
		"question-marks": "=??=?=?==?x?=?=??b??=",
		"long-word":      "=?utf-8?b?" + strings.Repeat("QUFB", 1100) + "?=",
		"utf16-word":     "=?utf-16?b?2D3eAA==?= =?utf-16le?q?h=00i=00?=",
		"iso-2022-jp":    "=?iso-2022-jp?B?GyRCJUYlOSVIGyhC?=",
		"spaces-in-b":    "=?utf-8?b?QUJD REVG?= =?utf-8?b?QUJD?=",
	}
	for name, v := range headers {
		writeString(base+"FuzzDecodeHeader", name, v)
	}
	texts := map[string]string{
		"fdfa":            strings.Repeat("\ufdfa", 40) + " text",
		"ligatures":       "\ufdfb\u3300\u3232\ufb03\u33ff\u2474\u3250 \uff21\uff22",
		"combining-marks": "a\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308\u0309\u030a\u030b\u030c\u030d\u030e\u030f\u0310b",
		"homoglyphs":      "p\u0430yp\u0430l \u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u0391\u0392C",
		"invisible":       "f\u200br\u200ce\u00ade\ufeff \U000e0041\u2060",
		"astral":          "\U0001d41a\U0001d41b\U0001d41c \U00020000\U00020001 \U0001f600",
		"hangul-jamo":     "\u1100\u1161\u11a8 \uac00\u11a8 \u1100\u1161",
		"invalid-utf8":    "\xff\xfe a\xc3\x28 \xed\xa0\x80",
		"long-no-space":   strings.Repeat("\u0430b\u0301", 200),
		"arabic-hamza":    "\u0627\u0653\u0648\u0654 \ufdfa\u0654",
	}
	for name, v := range texts {
		write(base+"FuzzNormalize", name, []byte(v))
	}
	fmt.Println("ok")
}
