//go:build ignore

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

func write(dir, name string, b []byte) {
	os.MkdirAll(dir, 0o755)
	s := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
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
	fmt.Println("ok")
}
