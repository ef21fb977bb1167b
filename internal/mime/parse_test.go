package mime

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func readSample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("read sample: %v", err)
	}
	return b
}

// TestParseSamples checks the committed sample messages: charsets, MIME
// structure, HTML extraction and every fallback.
func TestParseSamples(t *testing.T) {
	tests := []struct {
		file     string
		subject  string
		from     string
		id       string
		contains []string // substrings of Text
		absent   []string // must not be in Text
		hosts    []string
		urls     []string
		warnings []string // substrings, in order
	}{
		{file: "plain.eml", subject: "Notes from Thursday's planning meeting",
			from: "thomas.becker@example.org", id: "20260303091422.4471@example.org",
			contains: []string{"Thanks again for hosting", "Best regards,\nThomas"}},
		{file: "html.eml", subject: "Garden Club News: Spring Edition",
			contains: []string{"Dear members,\nThe weather finally turned", "community garden is open",
				"May 12th", "boxes & bags", "Workshops\nPruning fruit trees", "See you among the flower beds,\nThe Garden Club committee"},
			absent: []string{"Preheader", "tracking", "footer comment", "font-family", "Spring Edition\n", "Garden Club News:"},
			urls: []string{"https://garden.example.org/volunteer?utm_source=news", "http://photos.Example.COM/garden/2025",
				"https://track.example.net/open.gif?id=77", "https://garden.example.org/unsubscribe", "www.garden.example.org/calendar"},
			hosts: []string{"garden.example.org", "photos.example.com", "track.example.net", "www.garden.example.org"}},
		{file: "multipart-alternative.eml", subject: "Your order 48213 has shipped",
			contains: []string{"Good news: your order", "follow the parcel using the reference"},
			absent:   []string{"Hello Jonathan,\n\nGood news"}, // the text/plain alternative is not read
			hosts:    []string{"track.example.com"}},
		{file: "nested-mixed.eml", subject: "Invoice and travel plans",
			contains: []string{"hotel in Kraków", "seven fifteen"},
			absent:   []string{"PDF", "binary", "attachment text"}},
		{file: "base64-qp.eml", contains: []string{"fourteen characters long", "visit the café on the ground floor"}},
		{file: "iso-8859-1.eml", subject: "Soirée de bienvenue à la maison des élèves",
			contains: []string{"l'association des étudiants", "Grüße an die Austauschstudenten", "À très bientôt"}},
		{file: "windows-1251.eml", subject: "Ежегодное собрание отдела",
			contains: []string{"Напоминаем, что в следующий вторник", "Ольга Петрова"}},
		{file: "koi8-r.eml", subject: "Кредит без справок за пять минут",
			contains: []string{"кредит без справок и поручителей", "первый заём бесплатно"}},
		{file: "gb2312.eml", subject: "年度产品展示会邀请", contains: []string{"年度产品展示会", "市场部"}},
		{file: "big5.eml", subject: "春季登山活動", contains: []string{"陽明山國家公園步道", "登山社"}},
		{file: "shift-jis.eml", subject: "システムメンテナンスのお知らせ",
			contains: []string{"システムメンテナンスのため", "株式会社サンプル商事"}},
		{file: "euc-kr.eml", subject: "정기 독서 모임 안내", contains: []string{"정기 독서 모임이 열립니다", "운영진 드림"}},
		{file: "utf-16.eml", subject: "Your monthly statement",
			contains: []string{"monthly statement for your savings", "Statement period: February."}},
		{file: "rfc2047-subject.eml", subject: "Grüße aus München: Sonderangebot für Stammkunden – nur heute",
			from: "juergen@example.de", contains: []string{"Sportgeschäft Müller"}},
		{file: "obfuscated-spam.eml", subject: "Get cheap meds now",
			contains: []string{"Our pharmacy now ships genuine medications", "prices on viagra and cialis",
				"no prescription needed", "discreet delivery worldwide", "Order now", "our online store", "write to remove@example.ru"},
			absent: []string{"hash buster", "invisible filler", "hidden attribute", "\u200b", "\u00ad", "display"},
			urls:   []string{"http://pharma-deals.example.ru/shop?ref=9931", "HTTPS://Cheap-Meds.Example.Top/"},
			hosts:  []string{"pharma-deals.example.ru", "cheap-meds.example.top"}},
		{file: "truncated.eml", subject: "Weekly deals on garden furniture",
			contains: []string{"This week only: garden furniture"},
			warnings: []string{"multipart closing boundary missing", "truncated base64 in text/html part"}},
		{file: "broken-boundary.eml", subject: "Claim your prize before Friday",
			contains: []string{"Congratulations! Your email address", "claims agent before Friday."},
			absent:   []string{"Content-Type", "actual-boundary"},
			warnings: []string{`multipart boundary "declared-boundary" not found: using "actual-boundary"`}},
		{file: "8bit-header.eml", subject: "Скидки на мебель", contains: []string{"Большие скидки на мебель"},
			warnings: []string{"8-bit subject decoded as windows-1251"}},
		{file: "bad-base64.eml", subject: "Special offer inside", contains: []string{"premium watches at wholesale"},
			absent:   []string{"not base64"},
			warnings: []string{"bad base64 in text/plain part: 1 lines skipped", `unknown charset "x-unknown-charset" in text/plain part: decoded as utf-8`}},
		{file: "arf.eml", subject: "FW: spam report", contains: []string{"abuse report", "Our pharmacy now ships"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			d := Parse(readSample(t, tt.file), Options{})
			if tt.subject != "" && d.Subject != tt.subject {
				t.Errorf("Subject = %q, want %q", d.Subject, tt.subject)
			}
			if tt.from != "" && d.From != tt.from {
				t.Errorf("From = %q, want %q", d.From, tt.from)
			}
			if tt.id != "" && d.MessageID != tt.id {
				t.Errorf("MessageID = %q, want %q", d.MessageID, tt.id)
			}
			for _, s := range tt.contains {
				if !strings.Contains(d.Text, s) {
					t.Errorf("Text lacks %q:\n%s", s, d.Text)
				}
			}
			for _, s := range tt.absent {
				if strings.Contains(d.Text, s) {
					t.Errorf("Text contains %q:\n%s", s, d.Text)
				}
			}
			if tt.urls != nil && !slices.Equal(d.URLs, tt.urls) {
				t.Errorf("URLs = %q, want %q", d.URLs, tt.urls)
			}
			if tt.hosts != nil && !slices.Equal(d.Hosts, tt.hosts) {
				t.Errorf("Hosts = %q, want %q", d.Hosts, tt.hosts)
			}
			if tt.warnings == nil && len(d.Warnings) > 0 {
				t.Errorf("unexpected warnings %q", d.Warnings)
			}
			if len(tt.warnings) > len(d.Warnings) {
				t.Fatalf("Warnings = %q, want %q", d.Warnings, tt.warnings)
			}
			for i, w := range tt.warnings {
				if !strings.Contains(d.Warnings[i], w) {
					t.Errorf("Warnings[%d] = %q, want it to contain %q", i, d.Warnings[i], w)
				}
			}
		})
	}
}

// TestParseMalformed feeds broken input; nothing may panic and each
// fallback must be reported.
func TestParseMalformed(t *testing.T) {
	nested := func(depth int) string {
		var b strings.Builder
		b.WriteString("Subject: deep\r\n")
		for i := 0; i < depth; i++ {
			fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n--b%d\r\n", i, i)
		}
		b.WriteString("Content-Type: text/plain\r\n\r\ninnermost words here\r\n")
		for i := depth - 1; i >= 0; i-- {
			fmt.Fprintf(&b, "--b%d--\r\n", i)
		}
		return b.String()
	}
	manyParts := func(n int) string {
		var b strings.Builder
		b.WriteString("Content-Type: multipart/mixed; boundary=x\r\n\r\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "--x\r\nContent-Type: text/plain\r\n\r\npart%d\r\n", i)
		}
		b.WriteString("--x--\r\n")
		return b.String()
	}
	tests := []struct {
		name     string
		raw      string
		opts     Options
		subject  string
		text     string // exact Text, or "" to skip
		contains string
		absent   string
		warning  string // substring of one warning
		trunc    bool
	}{
		{name: "empty", raw: "", warning: "message has no header"},
		{name: "header only", raw: "Subject: hello\r\nFrom: a@b.c\r\n", subject: "hello", text: ""},
		{name: "no header", raw: "just some text\nwithout any header\n", text: "just some text\nwithout any header\n", warning: "no header"},
		{name: "LF line endings", raw: "Subject: lf\nContent-Type: text/plain\n\nbody line\n", subject: "lf", text: "body line\n"},
		{name: "folded subject", raw: "Subject: a folded\r\n\tsubject line\r\n\r\nx", subject: "a folded subject line"},
		{name: "mbox From line", raw: "From someone@example.com Mon Jan  1 00:00:00 2026\nSubject: s\n\nbody", subject: "s", text: "body"},
		{name: "malformed header line skipped", raw: "Subject: s\r\nthis is not a header\r\nX-Ok: 1\r\n\r\nbody", subject: "s", text: "body", warning: "malformed header line skipped"},
		{name: "missing blank line", raw: "Subject: s\r\nHello there, this is the body.\r\nSecond line.\r\n", subject: "s",
			contains: "Hello there, this is the body.", warning: "header not terminated by a blank line"},
		{name: "8-bit latin-1 subject", raw: "Subject: Caf\xe9 cr\xe8me\r\n\r\nx", subject: "Café crème", warning: "8-bit subject decoded as windows-1252"},
		{name: "raw UTF-8 subject (RFC 6532)", raw: "Subject: Grüße\r\n\r\nx", subject: "Grüße"},
		{name: "encoded word split inside a character", raw: "Subject: =?UTF-8?B?w6Q=?= =?UTF-8?B?w7Y=?= =?utf-8?q?=C3?= =?utf-8?q?=BC?=\r\n\r\nx", subject: "äöü"},
		{name: "encoded word unknown charset", raw: "Subject: =?x-foo?Q?caf=E9?=\r\n\r\nx", subject: "café", warning: `unknown charset "x-foo" in encoded-word in subject: decoded as latin-1`},
		{name: "encoded word malformed", raw: "Subject: =?utf-8?X?abc?= and =?broken\r\n\r\nx", subject: "=?utf-8?X?abc?= and =?broken"},
		{name: "undeclared 8-bit body", raw: "Content-Type: text/plain\r\n\r\nna\xefve", text: "naïve", warning: "undeclared 8-bit charset in text/plain part: decoded as windows-1252"},
		{name: "undeclared windows-1251", raw: "Subject: \xd1\xea\xe8\xe4\xea\xe8\r\n\r\n\xcf\xf0\xe8\xe2\xe5\xf2, \xec\xe8\xf0! \xd1\xea\xe8\xe4\xea\xe8",
			subject: "Скидки", text: "Привет, мир! Скидки", warning: "undeclared 8-bit charset in text/plain part: decoded as windows-1251"},
		{name: "undeclared koi8-r", raw: "Content-Type: text/plain; charset=us-ascii\r\n\r\n\xf0\xd2\xc9\xd7\xc5\xd4, \xcd\xc9\xd2!",
			text: "Привет, мир!", warning: "8-bit bytes in us-ascii text/plain part: decoded as koi8-r"},
		{name: "invalid UTF-8 body", raw: "Content-Type: text/plain; charset=utf-8\r\n\r\nab\xff\xfecd", text: "ab\uFFFDcd", warning: "invalid UTF-8 in text/plain part: replaced"},
		{name: "unknown charset 8-bit", raw: "Content-Type: text/plain; charset=x-foo\r\n\r\nna\xefve", text: "naïve", warning: `unknown charset "x-foo" in text/plain part: decoded as latin-1`},
		{name: "unknown transfer encoding", raw: "Content-Type: text/plain\r\nContent-Transfer-Encoding: x-uuencode\r\n\r\nbegin 644 f", text: "begin 644 f", warning: `unknown transfer encoding "x-uuencode"`},
		{name: "bad quoted-printable", raw: "Content-Transfer-Encoding: quoted-printable\r\n\r\na=ZZb=3Dc=\r\nd =\r\n", text: "a=ZZb=cd "},
		{name: "multipart without boundary param", raw: "Content-Type: multipart/mixed\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\ninside\r\n--zz--\r\n",
			text: "inside", warning: `multipart without boundary parameter: using "zz"`},
		{name: "declared boundary differs by a space (seen in spam)", raw: "Content-Type: multipart/alternative; boundary=\"=Multipart Boundary 0925\"\r\n\r\n--= Multipart Boundary 0925\r\nContent-Type: text/plain\r\n\r\nrecovered\r\n--= Multipart Boundary 0925--\r\n",
			text: "recovered", warning: `multipart boundary "=Multipart Boundary 0925" not found: using "= Multipart Boundary 0925"`},
		{name: "multipart without any boundary", raw: "Content-Type: multipart/mixed; boundary=q\r\n\r\nplain words only\r\n",
			text: "plain words only\n", warning: "multipart boundary not found: body read as text/plain"},
		{name: "boundary prefix of another", raw: "Content-Type: multipart/mixed; boundary=ab\r\n\r\n--ab\r\n\r\none\r\n--abc\r\nstill one\r\n--ab--\r\n",
			text: "one\n--abc\nstill one"},
		{name: "nesting at the limit", raw: nested(15), contains: "innermost words here"},
		{name: "nesting beyond the limit", raw: nested(40), absent: "innermost", warning: "MIME nesting deeper than 16: inner parts ignored"},
		{name: "nesting custom limit", raw: nested(5), opts: Options{MaxDepth: 3}, absent: "innermost", warning: "MIME nesting deeper than 3"},
		{name: "too many parts", raw: manyParts(300), contains: "part254", absent: "part255", warning: "more than 256 MIME parts"},
		{name: "max bytes", raw: "Subject: big\r\n\r\n" + strings.Repeat("word ", 100), opts: Options{MaxBytes: 40}, trunc: true,
			text: "word word word word word", warning: "message longer than 40 bytes"},
		{name: "attachment text skipped", raw: "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nbody\r\n--b\r\nContent-Type: text/plain\r\nContent-Disposition: attachment; filename=a.txt\r\n\r\nattached\r\n--b--\r\n", text: "body"},
		{name: "message/rfc822 inline", raw: "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: message/rfc822\r\n\r\nSubject: inner\r\n\r\nforwarded body\r\n--b--\r\n", text: "forwarded body"},
		{name: "alternative falls back to plain when html is empty", raw: "Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nplain version\r\n--b\r\nContent-Type: text/html\r\n\r\n<img src=\"http://x.example/i.png\">\r\n--b--\r\n", text: "plain version"},
		{name: "html meta charset", raw: "Content-Type: text/html\r\n\r\n<meta charset=\"koi8-r\"><p>\xf0\xd2\xc9\xd7\xc5\xd4</p>", text: "Привет"},
		{name: "NUL bytes", raw: "Subject: a\x00b\r\n\r\nx\x00y", subject: "a b"},
		{name: "base64 garbage only", raw: "Content-Transfer-Encoding: base64\r\n\r\n!!!!\r\n", text: "", warning: "bad base64"},
		{name: "message-id without brackets", raw: "Message-ID: abc@example.com trailing\r\n\r\nx", text: "x"},
		{name: "format=flowed", raw: "Content-Type: text/plain; format=flowed\r\n\r\nA long line \r\ncontinues here.\r\n Stuffed line\r\n-- \r\nsig\r\n", text: "A long line continues here.\nStuffed line\n-- \nsig\n"},
		{name: "format=flowed delsp", raw: "Content-Type: text/plain; format=flowed; delsp=yes\r\n\r\ninfor \r\nmation\r\n", text: "information\n"},
		{name: "continuation first", raw: " leading continuation\r\nSubject: s\r\n\r\nb", subject: "s", warning: "continuation line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Parse([]byte(tt.raw), tt.opts)
			if tt.subject != "" && d.Subject != tt.subject {
				t.Errorf("Subject = %q, want %q", d.Subject, tt.subject)
			}
			if (tt.text != "" || tt.contains == "" && tt.absent == "") && d.Text != tt.text && tt.text != "" {
				t.Errorf("Text = %q, want %q", d.Text, tt.text)
			}
			if tt.contains != "" && !strings.Contains(d.Text, tt.contains) {
				t.Errorf("Text = %q, want it to contain %q", d.Text, tt.contains)
			}
			if tt.absent != "" && strings.Contains(d.Text, tt.absent) {
				t.Errorf("Text = %q, must not contain %q", d.Text, tt.absent)
			}
			if tt.warning != "" && !slices.ContainsFunc(d.Warnings, func(w string) bool { return strings.Contains(w, tt.warning) }) {
				t.Errorf("Warnings = %q, want one containing %q", d.Warnings, tt.warning)
			}
			if d.Truncated != tt.trunc {
				t.Errorf("Truncated = %v, want %v", d.Truncated, tt.trunc)
			}
		})
	}
}

func TestParseDeterministicAndReentrant(t *testing.T) {
	files, err := filepath.Glob("testdata/*.eml")
	if err != nil || len(files) < 15 {
		t.Fatalf("samples: %v (%d files)", err, len(files))
	}
	first := map[string]*Document{}
	for _, f := range files {
		first[f] = Parse(readSample(t, filepath.Base(f)), Options{})
	}
	// Parse again in parallel (pooled parsers must not leak state).
	done := make(chan error, len(files))
	for _, f := range files {
		go func() {
			d := Parse(readSample(t, filepath.Base(f)), Options{})
			want := first[f]
			if d.Text != want.Text || d.Subject != want.Subject || !slices.Equal(d.URLs, want.URLs) ||
				!slices.Equal(d.Warnings, want.Warnings) {
				done <- fmt.Errorf("%s: second parse differs", f)
				return
			}
			done <- nil
		}()
	}
	for range files {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestWarningsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("Content-Type: multipart/mixed; boundary=b\r\n\r\n")
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "--b\r\nContent-Type: text/plain; charset=x-cs%d\r\n\r\nna\xefve\r\n", i)
	}
	b.WriteString("--b--\r\n")
	d := Parse([]byte(b.String()), Options{})
	if len(d.Warnings) != maxWarnings+1 || d.Warnings[maxWarnings] != "too many warnings: the rest are dropped" {
		t.Errorf("got %d warnings, last %q", len(d.Warnings), d.Warnings[len(d.Warnings)-1])
	}
	if d2 := Parse([]byte("Message-ID: abc@example.com trailing\r\n\r\nx"), Options{}); d2.MessageID != "abc@example.com" {
		t.Errorf("MessageID = %q", d2.MessageID)
	}
}

// TestParseRecoversFromPanic checks the defence in depth: a panic in the
// middle of a message becomes a warning and what was parsed is kept.
func TestParseRecoversFromPanic(t *testing.T) {
	raw := readSample(t, "nested-mixed.eml")
	d := Parse(raw, Options{testPanic: true})
	if !slices.Equal(d.Warnings, []string{"internal error while parsing the body: test panic"}) {
		t.Errorf("Warnings = %q, want the recovered panic", d.Warnings)
	}
	if d.Subject != "Invoice and travel plans" || d.From != "anna@example.pl" {
		t.Errorf("header lost after a panic in the body: %q, %q", d.Subject, d.From)
	}
	// The pooled parser is still usable.
	if d := Parse(raw, Options{}); !strings.Contains(d.Text, "seven fifteen") || len(d.Warnings) != 0 {
		t.Errorf("parse after a recovered panic: %q, %q", d.Text, d.Warnings)
	}
}

func TestListPostAndRecipients(t *testing.T) {
	many := make([]string, 30)
	for i := range many {
		many[i] = fmt.Sprintf("u%d@example.org", i)
	}
	tests := []struct {
		name, headers string
		post          string
		rcpts         []string
	}{
		{name: "list post", headers: "List-Id: <users.lists.example.org>\r\nList-Post: <mailto:Users@Lists.Example.org>\r\nTo: users@lists.example.org\r\n",
			post: "users@lists.example.org", rcpts: []string{"users@lists.example.org"}},
		{name: "reply to the list and its members", headers: "To: \"Mason, Justin\" <jm@example.net>, Ann <ann@example.com>\r\nCc: talk@lists.example.org,\r\n tmda@example.org\r\n",
			rcpts: []string{"jm@example.net", "ann@example.com", "talk@lists.example.org", "tmda@example.org"}},
		{name: "repeated and malformed", headers: "To: a@example.org, a@example.org, undisclosed-recipients:;, @example.org, b@\r\nCc: <x y@example.org>\r\n",
			rcpts: []string{"a@example.org"}},
		{name: "mailing-list field", headers: "Mailing-List: list zz@yahoogroups.com; contact zz-owner@yahoogroups.com\r\n", post: "zz@yahoogroups.com"},
		{name: "bounded", headers: "To: " + strings.Join(many, ", ") + "\r\n", rcpts: many[:MaxRecipients]},
		{name: "overlong field skipped", headers: "To: " + strings.Repeat("x", MaxRecipientField) + "@example.org\r\nCc: c@example.org\r\n", rcpts: []string{"c@example.org"}},
		{name: "none", headers: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Parse([]byte("From: a@example.net\r\n"+tt.headers+"Subject: s\r\n\r\nbody\r\n"), Options{})
			if d.ListPost != tt.post {
				t.Errorf("ListPost = %q, want %q", d.ListPost, tt.post)
			}
			if !slices.Equal(d.Recipients, tt.rcpts) {
				t.Errorf("Recipients = %q, want %q", d.Recipients, tt.rcpts)
			}
		})
	}
}

func TestPrecedence(t *testing.T) {
	tests := []struct {
		headers, want string
		bulk          bool
	}{
		{"Precedence: list\r\n", "list", true},
		{"Precedence:  LIST \r\n", "list", true},
		{"Precedence: bulk\r\n", "bulk", true},
		{"Precedence: first-class\r\n", "first-class", false},
		{"List-Unsubscribe: <mailto:leave@example.org>\r\n", "", true},
		{"", "", false},
	}
	for _, tt := range tests {
		d := Parse([]byte("From: a@example.net\r\n"+tt.headers+"Subject: s\r\n\r\nbody\r\n"), Options{})
		if d.Precedence != tt.want || d.Bulk != tt.bulk {
			t.Errorf("%q: Precedence %q, Bulk %v, want %q, %v", tt.headers, d.Precedence, d.Bulk, tt.want, tt.bulk)
		}
	}
}

func TestReply(t *testing.T) {
	tests := []struct {
		name, headers string
		want          bool
	}{
		{"in-reply-to", "In-Reply-To: <1234@mail.example.org>\r\n", true},
		{"references, folded", "References: <a@example.org>\r\n <b@example.org>\r\n", true},
		{"in-reply-to with a comment", "In-Reply-To: Ann's message of Mon <x.y@example.org>\r\n", true},
		{"no identifier", "In-Reply-To: your message of Monday\r\n", false},
		{"empty sides", "References: <@example.org> <x@> <>\r\n", false},
		{"unclosed", "In-Reply-To: <x@example.org\r\n", false},
		{"empty field", "In-Reply-To:\r\n", false},
		{"none", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Parse([]byte("From: a@example.net\r\n"+tt.headers+"Subject: s\r\n\r\nbody\r\n"), Options{})
			if d.Reply != tt.want {
				t.Errorf("Reply = %v, want %v", d.Reply, tt.want)
			}
		})
	}
}

func TestListName(t *testing.T) {
	tests := []struct{ headers, want string }{
		{"List-Id: Users of X <users.lists.example.org>\r\n", "users"},
		{"List-Id: <Spamassassin-Talk.lists.sourceforge.net>\r\nList-Post: <mailto:other@example.org>\r\n", "spamassassin-talk"},
		{"List-Post: <mailto:spamassassin-talk@example.sourceforge.net>\r\n", "spamassassin-talk"},
		{"Mailing-List: list zzzzteana@yahoogroups.com; contact zzzzteana-owner@yahoogroups.com\r\n", "zzzzteana"},
		{"X-Mailing-List: cypherpunks@ssz.com\r\n", "cypherpunks"},
		{"List-Unsubscribe: <mailto:leave@example.org>\r\n", ""},
		{"", ""},
		{"List-Id: <" + strings.Repeat("a", 80) + ".example.org>\r\n", ""},
	}
	for _, tt := range tests {
		d := Parse([]byte("From: a@example.net\r\n"+tt.headers+"Subject: s\r\n\r\nbody\r\n"), Options{})
		if d.List != tt.want {
			t.Errorf("%q: List = %q, want %q", tt.headers, d.List, tt.want)
		}
	}
}
