//go:build ignore

// gen_samples writes the sample messages of internal/mime/testdata. The
// samples are shared with other packages (golden vectors, benchmarks): their
// content is pinned, so run this only to add new samples, never to change
// existing ones. Usage, from the module root:
//
//	go run ./internal/mime/testdata/gen_samples.go
package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log"
	"mime/quotedprintable"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
)

const dir = "internal/mime/testdata"

func hdr(from, to, subject, id, date string) string {
	return "Return-Path: <" + from + ">\r\n" +
		"Received: from mx.example.net (mx.example.net [192.0.2.10])\r\n" +
		"\tby mail.example.org (Postfix) with ESMTPS id 4Bx7Yq2kLmz9sQ\r\n" +
		"\tfor <" + to + ">; " + date + "\r\n" +
		"From: " + from + "\r\n" +
		"To: " + to + "\r\n" +
		"Subject: " + subject + "\r\n" +
		"Date: " + date + "\r\n" +
		"Message-ID: <" + id + ">\r\n" +
		"MIME-Version: 1.0\r\n"
}

func crlf(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\n", "\r\n")
}

func b64(b []byte) string {
	e := base64.StdEncoding.EncodeToString(b)
	var sb strings.Builder
	for len(e) > 76 {
		sb.WriteString(e[:76] + "\r\n")
		e = e[76:]
	}
	sb.WriteString(e + "\r\n")
	return sb.String()
}

func qp(s string) string {
	var buf bytes.Buffer
	w := quotedprintable.NewWriter(&buf)
	w.Write([]byte(s))
	w.Close()
	return crlf(buf.String())
}

func enc(e encoding.Encoding, s string) []byte {
	b, err := e.NewEncoder().Bytes([]byte(s))
	if err != nil {
		log.Fatalf("encode %q: %v", s[:20], err)
	}
	return b
}

const plainText = `Hi Maria,

Thanks again for hosting the planning meeting on Thursday. I went through the
notes this morning and wrote down the decisions we reached, so that nobody has
to rely on memory when the quarterly review comes around.

First, the migration of the billing database will start on the second Monday
of next month. Daniel's team owns the schema changes, and the operations group
will schedule the maintenance window with the customers who still depend on
the legacy export. We agreed that the rollback plan must be written and tested
before anything is switched over, not after.

Second, the support rotation changes: starting in March, every engineer takes
one week of first-line support per quarter. Priya volunteered to write the
handbook, including the escalation rules and the list of known problems with
their workarounds. Please send her anything you think belongs there.

Third, the office move. Facilities confirmed that the new building will be
ready by the end of April. Desks are assigned by team; if you need a quiet room
for long calls, book it through the usual calendar, the same as today.

Finally, the budget request for training was approved in full. Everyone can
choose one conference or two online courses this year. Send your choice to
your manager before the end of the month so that we can book early and save
on the registration fees.

Let me know if I missed or misunderstood anything, and I will correct the
notes before they go to the wider group on Friday afternoon.

Best regards,
Thomas
`

const htmlNewsletter = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Garden Club News - Spring Edition</title>
<style>body { font-family: Georgia, serif; } .hide { display:none }</style>
<script>var tracking = "do not index this text";</script></head>
<body>
<div style="display:none;max-height:0;overflow:hidden">Preheader text that nobody sees</div>
<table width="600"><tr><td>
<h1>Spring Edition of the Garden Club Newsletter</h1>
<p>Dear members,</p>
<p>The weather finally turned, and the <b>community garden</b> is open again every
Saturday morning from eight until noon. We need volunteers for the compost
station, the seedling exchange and the children's corner. Please sign up on the
<a href="https://garden.example.org/volunteer?utm_source=news">volunteer page</a>
before the first weekend of April.</p>
<p>Our annual plant sale takes place on May&nbsp;12th in the parking lot behind the
library. Members receive a discount on perennials, herbs and native shrubs.
Bring your own boxes &amp; bags, because we are trying to reduce plastic waste
this year.</p>
<h2>Workshops</h2>
<ul>
<li>Pruning fruit trees, with Helen Marsh, on Saturday the 23rd</li>
<li>Growing tomatoes on a balcony, on Sunday the 31st</li>
<li>Attracting pollinators: building insect hotels with recycled wood</li>
</ul>
<p>Photos from last season are on <a href="http://photos.Example.COM/garden/2025">our gallery</a>,
and the full calendar is at www.garden.example.org/calendar as usual.</p>
<p>See you among the flower beds,<br>The Garden Club committee</p>
<img src="https://track.example.net/open.gif?id=77" width="1" height="1" alt="">
</td></tr></table>
<!-- footer comment that must not appear -->
<p style="font-size:11px;color:#888">You receive this because you joined the
Garden Club. <a href="https://garden.example.org/unsubscribe">Unsubscribe</a>.</p>
</body></html>
`

const altPlain = `Your order 48213 has shipped

Hello Jonathan,

Good news: your order from Riverside Books has left our warehouse and is on
its way. The parcel contains the following items:

  - The Long Way Home, paperback
  - A Field Guide to Northern Birds, hardcover
  - Notebook with linen cover, dotted pages

The carrier estimates delivery on Wednesday between nine and five. You can
follow the parcel at https://track.example.com/p/QX7733 using the reference
printed on your receipt.

If anything is missing or damaged, reply to this message within thirty days
and we will send a replacement or refund the purchase, whichever you prefer.

Happy reading,
Riverside Books customer service
`

const altHTML = `<html><body>
<p>Hello Jonathan,</p>
<p><strong>Good news:</strong> your order from Riverside Books has left our warehouse and is on
its way. The parcel contains the following items:</p>
<ul><li>The Long Way Home, paperback</li><li>A Field Guide to Northern Birds, hardcover</li>
<li>Notebook with linen cover, dotted pages</li></ul>
<p>The carrier estimates delivery on Wednesday between nine and five. You can
<a href="https://track.example.com/p/QX7733">follow the parcel</a> using the reference
printed on your receipt.</p>
<p>If anything is missing or damaged, reply to this message within thirty days
and we will send a replacement or refund the purchase, whichever you prefer.</p>
<p>Happy reading,<br>Riverside Books customer service</p>
</body></html>
`

const latin1Text = `Bonjour à tous,

Comme chaque année, l'association des étudiants organise une soirée de
bienvenue pour les nouveaux arrivés. Elle aura lieu vendredi prochain à la
maison des élèves, à partir de dix-neuf heures. Au programme : présentation
des clubs, dégustation de spécialités régionales préparées par les bénévoles,
et concert d'un groupe local très apprécié.

Les inscriptions sont gratuites mais obligatoires, car le nombre de places est
limité par les règles de sécurité du bâtiment. Merci de répondre à ce courriel
avant mercredi soir en précisant vos éventuelles allergies alimentaires.

Nous cherchons aussi des volontaires pour l'accueil et le rangement. Même une
heure de votre temps serait précieuse. Grüße an die Austauschstudenten aus
München und Zürich, die dieses Jahr besonders zahlreich sind!

À très bientôt,
Le bureau de l'association
`

const russianText = `Здравствуйте, коллеги!

Напоминаем, что в следующий вторник состоится ежегодное собрание отдела.
Начало в десять часов утра в большом зале на третьем этаже. Повестка дня:
итоги прошлого года, планы на весну, распределение новых проектов и вопросы
по обучению сотрудников.

Просим руководителей групп подготовить короткие отчёты о выполненной работе,
не более пяти минут на выступление. Презентации нужно прислать секретарю
заранее, чтобы проверить их на проекторе.

После собрания будет обед в столовой. Если у вас есть пожелания по меню или
ограничения в питании, сообщите об этом до пятницы.

С уважением,
Ольга Петрова, отдел кадров
`

const russianSpam = `Уважаемый клиент!

Только сегодня вы можете получить кредит без справок и поручителей. Решение
за пять минут, деньги на карту в течение часа. Процентная ставка от минимальной,
первый заём бесплатно для новых клиентов нашего сервиса.

Заполните короткую анкету на сайте и получите деньги уже сегодня. Никаких
скрытых комиссий, никаких звонков на работу, полная конфиденциальность.

Предложение ограничено, успейте воспользоваться!
`

const chineseSimplified = `尊敬的客户：

感谢您一直以来对我们公司的支持。我们很高兴地通知您，本公司将于下个月举办年度产品展示会，
届时将展出最新的办公设备和软件解决方案。展会地点在市中心国际会议中心，欢迎您莅临参观。

参加展会的客户可以享受特别优惠，并有机会参加现场抽奖活动。请您在本月底之前回复此邮件，
告知参加人数，以便我们安排接待工作。

如有任何问题，请随时与我们联系。

此致
敬礼
市场部
`

const chineseTraditional = `各位會員您好：

本會將於下週六舉辦春季登山活動，路線為陽明山國家公園步道，全程約四小時。
集合時間為早上七點，地點在捷運站一號出口。請自備飲水、午餐及雨具。

參加者請於本週三前回覆報名，並註明是否需要交通接駁。活動當天若遇大雨，
將另行通知延期。

敬祝 健康愉快
登山社 敬上
`

const japaneseText = `お客様各位

いつも弊社のサービスをご利用いただき、誠にありがとうございます。
このたび、システムメンテナンスのため、下記の日程でサービスを一時停止させていただきます。

日時：三月十五日（土）午前二時から午前六時まで
対象：オンライン注文、会員ページ、ポイント照会

メンテナンス中はご不便をおかけしますが、何卒ご理解のほどよろしくお願い申し上げます。
ご不明な点がございましたら、カスタマーサポートまでお問い合わせください。

株式会社サンプル商事
`

const koreanText = `안녕하세요, 회원 여러분.

다음 주 토요일에 정기 독서 모임이 열립니다. 이번 달의 책은 현대 소설 두 권이며,
모임 장소는 시립 도서관 세미나실입니다. 오후 두 시에 시작하여 약 세 시간 동안
진행될 예정입니다.

처음 참석하시는 분들도 환영합니다. 참석을 원하시면 목요일까지 답장을 보내 주세요.

감사합니다.
독서 모임 운영진 드림
`

const utf16Text = `Dear customer,

Attached to this message you will find the monthly statement for your savings
account. The statement lists every deposit, withdrawal and transfer recorded
between the first and the last business day of the month, together with the
interest credited at the end of the period.

Please review the statement carefully and contact your branch within sixty days
if you notice an error. This message was produced by an automated system that
writes its text in UTF-16; please do not reply to it directly.

Kind regards,
Northern Savings Bank
`

// obfuscated spam: zero-width characters, soft hyphens, homoglyphs,
// comments inside words, hidden elements, fullwidth letters.
const obfuscatedHTML = "<html><head><style>.x{display:none}</style></head><body>\n" +
	"<div style=\"display:none\">random hash buster words lorem ipsum gallimaufry</div>\n" +
	"<p>Dear Friend,</p>\n" +
	"<p>Our ph<!-- x -->arma<b></b>cy now ships gen\u200buine med\u00adications to your door. " +
	"Get the best pri<span></span>ces on v\u0456agr\u0430 and c\u0456al\u0456s, " +
	"no pr\u0435scription n\u0435\u0435d\u0435d. Fast and discreet \uff44\uff45\uff4c\uff49\uff56\uff45\uff52\uff59 worldwide.</p>\n" +
	"<p>Limited offer: buy two bottles and get the third one <font color=\"red\">FREE</font>. " +
	"Secure payment, money back guarantee, and friendly support around the clock.</p>\n" +
	"<p style=\"font-size:0px\">unrelated invisible filler text</p>\n" +
	"<p><a href=\"http://pharma-deals.example.ru/shop?ref=9931\">Ord\u200ber n\u043ew</a> &ndash; " +
	"visit <a href=\"HTTPS://Cheap-Meds.Example.Top/\">our online st\u043er\u0435</a>.</p>\n" +
	"<span hidden>hidden attribute text</span>\n" +
	"<p>To stop receiving these offers, write to rem\u2060ove@example.ru.</p>\n" +
	"</body></html>\n"

func write(name, content string) {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", p, len(content))
}

func main() {
	d := "Tue, 3 Mar 2026 09:14:22 +0100"

	write("plain.eml", hdr("Thomas Becker <thomas.becker@example.org>", "maria.lopez@example.org",
		"Notes from Thursday's planning meeting", "20260303091422.4471@example.org", d)+
		"Content-Type: text/plain; charset=us-ascii\r\nContent-Transfer-Encoding: 7bit\r\n\r\n"+crlf(plainText))

	write("html.eml", hdr("Garden Club <news@garden.example.org>", "member@example.org",
		"Garden Club News: Spring Edition", "spring-2026.88172@garden.example.org", d)+
		"Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"+qp(htmlNewsletter))

	write("multipart-alternative.eml", hdr("Riverside Books <orders@riverside.example.com>", "jonathan@example.net",
		"Your order 48213 has shipped", "order-48213-shipped@riverside.example.com", d)+
		"Content-Type: multipart/alternative; boundary=\"=_alt_5f3a\"\r\n\r\n"+
		"This is a multi-part message in MIME format.\r\n\r\n"+
		"--=_alt_5f3a\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"+qp(altPlain)+
		"\r\n--=_alt_5f3a\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"+qp(altHTML)+
		"\r\n--=_alt_5f3a--\r\n")

	pdf := []byte("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n" + strings.Repeat("binary\x00\x01\x02\xff stream data ", 40) + "\n%%EOF\n")
	write("nested-mixed.eml", hdr("Anna Kowalski <anna@example.pl>", "team@example.org",
		"Invoice and travel plans", "CAF7x9e1q@mail.example.pl", d)+
		"Content-Type: multipart/mixed; boundary=\"outer-b0undary\"\r\n\r\n"+
		"--outer-b0undary\r\nContent-Type: multipart/alternative; boundary=\"inner-b0undary\"\r\n\r\n"+
		"--inner-b0undary\r\nContent-Type: text/plain; charset=\"utf-8\"\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"+
		crlf("Hello everyone,\n\nplease find attached the invoice for the hotel in Kraków. The\nconference starts on Monday; our train leaves Warsaw at seven fifteen.\nBring your passport, the badge and a warm jacket, it is still cold there.\n\nAnna\n")+
		"\r\n--inner-b0undary\r\nContent-Type: text/html; charset=\"utf-8\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
		b64([]byte("<div>Hello everyone,</div><div><br></div><div>please find attached the invoice for the hotel in Kraków. The conference starts on Monday; our train leaves Warsaw at seven fifteen.</div><div>Bring your passport, the badge and a warm jacket, it is still cold there.</div><div><br></div><div>Anna</div>"))+
		"\r\n--inner-b0undary--\r\n"+
		"\r\n--outer-b0undary\r\nContent-Type: application/pdf; name=\"invoice-2026-113.pdf\"\r\nContent-Disposition: attachment; filename=\"invoice-2026-113.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
		b64(pdf)+
		"\r\n--outer-b0undary\r\nContent-Type: text/plain; charset=utf-8; name=\"notes.txt\"\r\nContent-Disposition: attachment; filename=\"notes.txt\"\r\n\r\n"+
		"attachment text that is not part of the visible body\r\n"+
		"\r\n--outer-b0undary--\r\n")

	write("base64-qp.eml", hdr("IT Service Desk <servicedesk@example.com>", "all-staff@example.com",
		"Password policy update", "policy-update-2026@example.com", d)+
		"Content-Type: multipart/mixed; boundary=\"b64qp\"\r\n\r\n"+
		"--b64qp\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
		b64([]byte("Starting next week, passwords must be at least fourteen characters long.\nPassphrases made of several unrelated words are easier to remember and\nharder to guess than short passwords with symbols. The change applies when\nyour current password expires; you do not need to act before that.\n"))+
		"--b64qp\r\nContent-Type: text/html; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"+
		qp(string(enc(charmap.ISO8859_1, "<p>Questions? The service desk is open Monday to Friday; call extension 4357 or visit the café on the ground floor, where we hold a drop-in session every Thursday.</p>\n")))+
		"\r\n--b64qp--\r\n")

	write("iso-8859-1.eml", hdr("Association des étudiants <bureau@example.fr>", "promo@example.fr",
		"=?ISO-8859-1?Q?Soir=E9e_de_bienvenue_=E0_la_maison_des_=E9l=E8ves?=", "soiree.2026@example.fr", d)+
		"Content-Type: text/plain; charset=ISO-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"+
		qp(string(enc(charmap.ISO8859_1, latin1Text))))

	write("windows-1251.eml", hdr("Olga Petrova <hr@example.ru>", "staff@example.ru",
		"=?windows-1251?B?"+base64.StdEncoding.EncodeToString(enc(charmap.Windows1251, "Ежегодное собрание отдела"))+"?=", "sobranie-2026@example.ru", d)+
		"Content-Type: text/plain; charset=windows-1251\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
		b64(enc(charmap.Windows1251, russianText)))

	write("koi8-r.eml", hdr("Credit Service <info@credit.example.ru>", "client@example.ru",
		"=?koi8-r?B?"+base64.StdEncoding.EncodeToString(enc(charmap.KOI8R, "Кредит без справок за пять минут"))+"?=", "kredit-88121@credit.example.ru", d)+
		"Content-Type: text/plain; charset=koi8-r\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"+
		crlf(string(enc(charmap.KOI8R, russianSpam))))

	write("gb2312.eml", hdr("Marketing <market@example.cn>", "customer@example.com",
		"=?gb2312?B?"+base64.StdEncoding.EncodeToString(enc(simplifiedchinese.GBK, "年度产品展示会邀请"))+"?=", "expo2026.7731@example.cn", d)+
		"Content-Type: text/plain; charset=gb2312\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
		b64(enc(simplifiedchinese.GBK, chineseSimplified)))

	write("big5.eml", hdr("Hiking Club <club@example.tw>", "members@example.tw",
		"=?big5?B?"+base64.StdEncoding.EncodeToString(enc(traditionalchinese.Big5, "春季登山活動"))+"?=", "hike-spring@example.tw", d)+
		"Content-Type: text/plain; charset=big5\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
		b64(enc(traditionalchinese.Big5, chineseTraditional)))

	write("shift-jis.eml", hdr("Sample Shoji <support@example.jp>", "customer@example.jp",
		"=?iso-2022-jp?B?"+base64.StdEncoding.EncodeToString(enc(japanese.ISO2022JP, "システムメンテナンスのお知らせ"))+"?=", "maint-0315@example.jp", d)+
		"Content-Type: text/plain; charset=Shift_JIS\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
		b64(enc(japanese.ShiftJIS, japaneseText)))

	write("euc-kr.eml", hdr("Book Club <books@example.kr>", "members@example.kr",
		"=?euc-kr?B?"+base64.StdEncoding.EncodeToString(enc(korean.EUCKR, "정기 독서 모임 안내"))+"?=", "books-0321@example.kr", d)+
		"Content-Type: text/plain; charset=euc-kr\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
		b64(enc(korean.EUCKR, koreanText)))

	write("utf-16.eml", hdr("Northern Savings Bank <statements@bank.example.com>", "holder@example.com",
		"Your monthly statement", "stmt-2026-02@bank.example.com", d)+
		"Content-Type: multipart/mixed; boundary=\"utf16-part\"\r\n\r\n"+
		"--utf16-part\r\nContent-Type: text/plain; charset=UTF-16\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
		b64(enc(unicode.UTF16(unicode.LittleEndian, unicode.UseBOM), utf16Text))+
		"--utf16-part\r\nContent-Type: text/plain; charset=utf-16be\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
		b64(enc(unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM), "Statement period: February.\n"))+
		"--utf16-part--\r\n")

	write("rfc2047-subject.eml", hdr("=?UTF-8?Q?J=C3=BCrgen_M=C3=BCller?= <juergen@example.de>", "kunden@example.de",
		"=?UTF-8?B?R3LDvMOfZSBhdXMgTcO8bmNoZW46?= =?ISO-8859-1?Q?_Sonderangebot_f=FCr_Stammkunden?= =?utf-8?q?_=E2=80=93_nur_heute?=",
		"angebot-4411@example.de", d)+
		"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"+
		crlf("Liebe Kundinnen und Kunden,\n\nnur heute erhalten Sie auf alle Wanderschuhe und Regenjacken zwanzig Prozent\nRabatt. Das Angebot gilt in allen Filialen und im Onlineshop.\n\nIhr Team vom Sportgeschäft Müller\n"))

	write("obfuscated-spam.eml", hdr("Pharmacy Online <sales@pharma-deals.example.ru>", "victim@example.org",
		"=?UTF-8?B?"+base64.StdEncoding.EncodeToString([]byte("G\u0435t ch\u0435\u0430p m\u0435ds \u200bno\u200bw"))+"?=", "x8812kq@pharma-deals.example.ru", d)+
		"Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
		b64([]byte(obfuscatedHTML)))

	// truncated: cut inside a base64 part, closing boundaries missing.
	tr := hdr("Newsletter <news@shop.example.com>", "reader@example.com",
		"Weekly deals on garden furniture", "deals-w11@shop.example.com", d) +
		"Content-Type: multipart/alternative; boundary=\"trunc\"\r\n\r\n" +
		"--trunc\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		crlf("This week only: garden furniture, parasols and outdoor lighting at reduced\nprices. Visit the shop before Sunday to find the best deals of the season.\n") +
		"\r\n--trunc\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		b64([]byte("<p>This week only: garden furniture, parasols and outdoor lighting at reduced prices. Visit the shop before Sunday to find the best deals of the season.</p>"))
	write("truncated.eml", tr[:len(tr)-37])

	// broken boundary: the declared boundary never appears in the body.
	write("broken-boundary.eml", hdr("Lottery Office <claims@lotto.example.net>", "winner@example.com",
		"Claim your prize before Friday", "claim-99812@lotto.example.net", d)+
		"Content-Type: multipart/alternative; boundary=\"declared-boundary\"\r\n\r\n"+
		"--actual-boundary\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"+
		crlf("Congratulations! Your email address was selected in our international draw\nand you have won a cash prize. To claim it, send your full name, address and\nbank details to our claims agent before Friday.\n")+
		"\r\n--actual-boundary--\r\n")

	// 8-bit header: raw windows-1251 subject, bad base64 body, unknown charset.
	write("8bit-header.eml", "From: Sales <sales@example.ru>\r\nTo: user@example.com\r\n"+
		"Subject: "+string(enc(charmap.Windows1251, "Скидки на мебель"))+"\r\n"+
		"Message-ID: <8bit-subj@example.ru>\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: text/plain; charset=windows-1251\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"+
		crlf(string(enc(charmap.Windows1251, "Большие скидки на мебель для дома и офиса всю неделю.\n"))))

	write("bad-base64.eml", hdr("Promo <promo@example.com>", "user@example.com",
		"Special offer inside", "badb64-1@example.com", d)+
		"Content-Type: multipart/mixed; boundary=\"bb\"\r\n\r\n"+
		"--bb\r\nContent-Type: text/plain; charset=x-unknown-charset\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
		strings.TrimSuffix(b64([]byte("Special offer: premium watches at wholesale prices, shipped within two days.\n")), "\r\n")+"!!**%%not base64 at all\r\n"+
		"--bb--\r\n")

	// ARF feedback report wrapping the obfuscated spam.
	orig, err := os.ReadFile(filepath.Join(dir, "obfuscated-spam.eml"))
	if err != nil {
		log.Fatal(err)
	}
	write("arf.eml", "From: abuse-reports@mailbox.example.net\r\nTo: abuse@example.org\r\n"+
		"Subject: FW: spam report\r\nMessage-ID: <arf-1@mailbox.example.net>\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: multipart/report; report-type=feedback-report;\r\n\tboundary=\"part1_13d.2e68ed54_boundary\"\r\n\r\n"+
		"--part1_13d.2e68ed54_boundary\r\nContent-Type: text/plain; charset=\"US-ASCII\"\r\n\r\n"+
		"This is an email abuse report for an email message received from IP\r\n192.0.2.1 on Tue, 3 Mar 2026 09:14:22 +0100.\r\n\r\n"+
		"--part1_13d.2e68ed54_boundary\r\nContent-Type: message/feedback-report\r\n\r\n"+
		"Feedback-Type: abuse\r\nUser-Agent: SomeGenerator/1.0\r\nVersion: 1\r\n\r\n"+
		"--part1_13d.2e68ed54_boundary\r\nContent-Type: message/rfc822\r\nContent-Disposition: inline\r\n\r\n"+
		string(orig)+
		"\r\n--part1_13d.2e68ed54_boundary--\r\n")
}
