package milter

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/lab/mtadial"
	"github.com/nddmilter/nddmilter/internal/store"
)

// recordingEngine is the real engine, remembering the reporter ids of the
// reports by mail it took.
type recordingEngine struct {
	*campaign.Engine
	mu        sync.Mutex
	reporters []string
}

func (e *recordingEngine) ReportAttached(ctx context.Context, raw []byte, kind store.Kind, reporter string, max int) (campaign.MailReport, error) {
	e.mu.Lock()
	e.reporters = append(e.reporters, reporter)
	e.mu.Unlock()
	return e.Engine.Ingester.ReportAttached(ctx, raw, kind, reporter, max)
}

func (e *recordingEngine) CheckWith(ctx context.Context, raw []byte, o campaign.CheckOptions) (campaign.Verdict, error) {
	return e.Engine.Checker.CheckWith(ctx, raw, o)
}

func (e *recordingEngine) took() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.reporters...)
}

// reportOpts are the report settings of these tests.
func reportOpts(deliver string) Options {
	return Options{Reports: ReportOptions{
		SpamAddresses:  []string{"Spam-Report@example.org"},
		HamAddresses:   []string{"ham-report@example.org"},
		Deliver:        deliver,
		MaxAttachments: 3,
		FeedbackLoops: []FeedbackLoop{
			{Name: "bigisp", Networks: []string{"192.0.2.0/24"}, Senders: []string{"@fbl.bigisp.example"}},
			{Name: "partner", AuthUsers: []string{"partner-fbl"}},
		},
	}}
}

// mtaSession opens a session as Postfix does (protocol 6, every no-reply
// flag and SMFIF_SETSYMLIST offered), over mtadial's buffered connection,
// and sends the SMTP client's address.
func (h *harness) mtaSession(client string) *gomilter.ClientSession {
	h.t.Helper()
	c := gomilter.NewClientWithOptions("tcp", h.addr, gomilter.ClientOptions{
		Dialer:       mtadial.Dialer{Timeout: 5 * time.Second},
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 5 * time.Second,
		ActionMask:   clientActions | gomilter.OptRemoveRcpt | gomilter.OptAction(actSetSymList),
		ProtocolMask: postfixProtocol,
	})
	s, err := c.Session()
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { s.Close() })
	if _, err := s.Conn("client.example", gomilter.FamilyInet, 40000, client); err != nil {
		h.t.Fatal(err)
	}
	return s
}

// sendAuth sends m, with the SASL login auth (none when empty) in the
// macros of MAIL FROM, as Postfix does after SMTP AUTH.
func sendAuth(t *testing.T, s *gomilter.ClientSession, m msg, auth string) ([]gomilter.ModifyAction, *gomilter.Action) {
	t.Helper()
	kv := []string{"{mail_addr}", m.from}
	if auth != "" {
		kv = append(kv, "{auth_type}", "PLAIN", "{auth_authen}", auth)
	}
	if err := s.Macros(gomilter.CodeMail, kv...); err != nil {
		t.Fatal(err)
	}
	return send(t, s, m)
}

// reportMsg is a report message to rcpts forwarding msgs as attachments.
func reportMsg(rcpts []string, msgs ...msg) msg {
	var b strings.Builder
	b.WriteString("--R\r\nContent-Type: text/plain\r\n\r\nspam, see attached\r\n")
	for _, m := range msgs {
		b.WriteString("--R\r\nContent-Type: message/rfc822\r\nContent-Disposition: attachment; filename=\"spam.eml\"\r\n\r\n")
		b.Write(rawOf(m))
		b.WriteString("\r\n")
	}
	b.WriteString("--R--\r\n")
	return msg{
		from:  "alice@example.org",
		rcpts: rcpts,
		headers: [][2]string{
			{"From", "Alice <alice@example.org>"}, {"To", rcpts[0]}, {"Subject", "Fwd: spam"},
			{"MIME-Version", "1.0"}, {"Content-Type", `multipart/mixed; boundary="R"`},
		},
		body:    b.String(),
		queueID: "RPT1",
	}
}

// otherCampaignCopy is a copy of a second campaign, unlike campaignCopy's.
func otherCampaignCopy(i int) msg {
	m := simple("Your parcel is waiting at the depot")
	m.body = fmt.Sprintf(`Dear customer, your parcel could not be delivered because the customs fee
was not paid. To release the shipment please pay the outstanding amount of
two dollars with your credit card on our secure delivery portal within
forty eight hours, otherwise the package will be returned to the sender and
a storage penalty applies. Track your delivery and update your address now.
Sincerely, the international courier service team. Reference %d.`, 5000+i)
	return m
}

// matched returns the campaign a copy is matched to (0: none).
func matched(t *testing.T, eng *campaign.Engine, m msg) store.CampaignID {
	t.Helper()
	v, err := eng.Checker.Check(context.Background(), rawOf(m))
	if err != nil {
		t.Fatal(err)
	}
	return v.Campaign
}

func TestReportByMail(t *testing.T) {
	const spamAddr, hamAddr = "spam-report@example.org", "ham-report@example.org"
	arf, err := os.ReadFile("../mime/testdata/arf.eml")
	if err != nil {
		t.Fatal(err)
	}
	arfMsg := func(from string) msg {
		m := msg{from: from, rcpts: []string{spamAddr}, queueID: "ARF1"}
		head, body, _ := strings.Cut(strings.ReplaceAll(string(arf), "\n", "\r\n"), "\r\n\r\n")
		for _, l := range strings.Split(strings.ReplaceAll(head, "\r\n\t", " "), "\r\n") {
			k, v, _ := strings.Cut(l, ": ")
			m.headers = append(m.headers, [2]string{k, v})
		}
		m.body = body
		return m
	}
	tests := []struct {
		name     string
		deliver  string
		client   string
		auth     string
		m        msg
		code     gomilter.ActionCode
		smtp     int
		reporter string // "" no report taken
		report   string // substring of X-NDD-Report
		verdict  bool   // checked as any mail (X-NDD-Verdict)
		log      string
		delRcpt  string // the recipient removed
		created  []msg  // copies that must now match a campaign
		none     []msg  // copies that must not
	}{
		{name: "authenticated, two attachments", client: "198.51.100.7", auth: "alice",
			m: reportMsg([]string{"<Spam-Report@Example.org>"}, campaignCopy(1), otherCampaignCopy(1)), code: gomilter.ActDiscard,
			reporter: "alice", log: "report by mail", created: []msg{campaignCopy(9), otherCampaignCopy(9)}},
		{name: "unauthenticated", client: "198.51.100.7",
			m: reportMsg([]string{spamAddr}, campaignCopy(1)), code: gomilter.ActAccept, verdict: true,
			log: "unauthenticated sender: not a report", none: []msg{campaignCopy(9)}},
		{name: "deliver to mailbox", deliver: "mailbox", client: "198.51.100.7", auth: "alice",
			m: reportMsg([]string{spamAddr}, campaignCopy(1)), code: gomilter.ActAccept,
			reporter: "alice", report: "spam; reporter=alice; messages=1; created=1", created: []msg{campaignCopy(9)}},
		{name: "ham report", deliver: "mailbox", client: "198.51.100.7", auth: "bob",
			m: reportMsg([]string{hamAddr}, campaignCopy(1)), code: gomilter.ActAccept, reporter: "bob", report: "ham; reporter=bob; messages=1"},
		{name: "also to another recipient: the report address removed", client: "198.51.100.7", auth: "alice",
			m: reportMsg([]string{"bob@example.org", spamAddr}, campaignCopy(1)), code: gomilter.ActAccept,
			reporter: "alice", delRcpt: "<" + spamAddr + ">", created: []msg{campaignCopy(9)}}, // as the MTA sent it
		{name: "also to another recipient, mailbox", deliver: "mailbox", client: "198.51.100.7", auth: "alice",
			m: reportMsg([]string{spamAddr, "bob@example.org"}, campaignCopy(1)), code: gomilter.ActAccept,
			reporter: "alice", report: "spam; reporter=alice", created: []msg{campaignCopy(9)}},
		{name: "to spam and ham addresses: not a report", client: "198.51.100.7", auth: "alice",
			m: reportMsg([]string{spamAddr, hamAddr}, campaignCopy(1)), code: gomilter.ActAccept, verdict: true,
			log: "both a spam and a ham report address", none: []msg{campaignCopy(9)}},
		{name: "no attachment refused", client: "198.51.100.7", auth: "alice",
			m: func() msg { m := campaignCopy(1); m.rcpts = []string{spamAddr}; return m }(), code: gomilter.ActReplyCode, smtp: 550,
			reporter: "alice", log: "no attached message", none: []msg{campaignCopy(9)}},
		{name: "too many attachments", deliver: "mailbox", client: "198.51.100.7", auth: "alice",
			m:    reportMsg([]string{spamAddr}, campaignCopy(1), campaignCopy(2), campaignCopy(3), campaignCopy(4), campaignCopy(5)),
			code: gomilter.ActAccept, reporter: "alice", report: "messages=3; created=1; joined=0; repeated=2; skipped=0; dropped=2"},
		{name: "feedback loop by network", client: "192.0.2.25",
			m: arfMsg("complaints@fbl.bigisp.example"), code: gomilter.ActDiscard, reporter: "fbl:bigisp"},
		{name: "feedback loop, IPv4-mapped client", client: "::ffff:192.0.2.25",
			m: arfMsg("complaints@fbl.bigisp.example"), code: gomilter.ActDiscard, reporter: "fbl:bigisp"},
		{name: "feedback loop network, wrong sender", client: "192.0.2.25",
			m: arfMsg("someone@elsewhere.example"), code: gomilter.ActAccept, verdict: true, log: "unauthenticated sender"},
		{name: "feedback loop sender from outside its network", client: "203.0.113.9",
			m: arfMsg("complaints@fbl.bigisp.example"), code: gomilter.ActAccept, verdict: true, log: "unauthenticated sender"},
		{name: "feedback loop by SASL login", client: "203.0.113.9", auth: "partner-fbl",
			m: arfMsg("fbl@partner.example"), code: gomilter.ActDiscard, reporter: "fbl:partner"},
		{name: "ARF from a user", client: "203.0.113.9", auth: "carol",
			m: arfMsg("carol@example.org"), code: gomilter.ActDiscard, reporter: "carol"},
		{name: "login posing as a feedback loop", client: "198.51.100.7", auth: "fbl:bigisp",
			m: reportMsg([]string{spamAddr}, campaignCopy(1)), code: gomilter.ActAccept, verdict: true, log: "cannot be a reporter id"},
		{name: "forged X-NDD-Report deleted", deliver: "mailbox", client: "198.51.100.7", auth: "alice",
			m: func() msg {
				m := reportMsg([]string{spamAddr}, campaignCopy(1))
				m.headers = append(m.headers, [2]string{"X-NDD-Report", "spam; reporter=everyone"})
				return m
			}(), code: gomilter.ActAccept, reporter: "alice", report: "reporter=alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &recordingEngine{Engine: realEngine(t)}
			h := start(t, eng, reportOpts(tt.deliver))
			s := h.mtaSession(tt.client)
			mods, act := sendAuth(t, s, tt.m, tt.auth)
			if act.Code != tt.code || (tt.smtp != 0 && act.SMTPCode != tt.smtp) {
				t.Fatalf("action %c %d %q, want %c %d\nlog:\n%s", act.Code, act.SMTPCode, act.SMTPText, tt.code, tt.smtp, h.logs.String())
			}
			took := eng.took()
			if tt.reporter == "" && len(took) != 0 || tt.reporter != "" && (len(took) != 1 || took[0] != tt.reporter) {
				t.Errorf("reports taken with reporters %q, want %q", took, tt.reporter)
			}
			del := ""
			for _, m := range mods {
				if m.Code == gomilter.ActDelRcpt {
					del += m.Rcpt
				}
			}
			if del != tt.delRcpt {
				t.Errorf("recipients removed %q, want %q", del, tt.delRcpt)
			}
			hdr := headersOf(mods)
			if tt.report != "" && !strings.Contains(hdr["X-NDD-Report"], tt.report) {
				t.Errorf("X-NDD-Report %q lacks %q", hdr["X-NDD-Report"], tt.report)
			}
			if tt.report == "" && hdr["X-NDD-Report"] != "" {
				t.Errorf("unexpected X-NDD-Report %q", hdr["X-NDD-Report"])
			}
			if _, ok := hdr["X-NDD-Verdict"]; ok != tt.verdict {
				t.Errorf("checked as any mail: %v, want %v (%v)", ok, tt.verdict, hdr)
			}
			if !strings.Contains(h.logs.String(), tt.log) {
				t.Errorf("log lacks %q:\n%s", tt.log, h.logs.String())
			}
			for _, c := range tt.created {
				if matched(t, eng.Engine, c) == 0 {
					t.Errorf("a copy of a reported message matches no campaign")
				}
			}
			for _, c := range tt.none {
				if matched(t, eng.Engine, c) != 0 {
					t.Errorf("a copy matches a campaign: the message was taken as a report")
				}
			}
		})
	}
}

// The SASL login of one message does not carry over to the next one on
// the same connection, and one user reporting the same message twice
// counts once.
func TestReportByMailLoginPerMessage(t *testing.T) {
	eng := &recordingEngine{Engine: realEngine(t)}
	h := start(t, eng, reportOpts("mailbox"))
	s := h.mtaSession("198.51.100.7")
	rm := reportMsg([]string{"spam-report@example.org"}, campaignCopy(1))
	mods, _ := sendAuth(t, s, rm, "alice")
	if r := headersOf(mods)["X-NDD-Report"]; !strings.Contains(r, "created=1") {
		t.Fatalf("first report: %q", r)
	}
	mods, _ = sendAuth(t, s, rm, "alice")
	if r := headersOf(mods)["X-NDD-Report"]; !strings.Contains(r, "repeated=1") {
		t.Fatalf("alice again: %q", r)
	}
	mods, act := sendAuth(t, s, rm, "")
	if act.Code != gomilter.ActAccept || headersOf(mods)["X-NDD-Report"] != "" || headersOf(mods)["X-NDD-Verdict"] == "" {
		t.Fatalf("next message without a login: %c %v", act.Code, headersOf(mods))
	}
	if err := s.Abort(); err != nil {
		t.Fatal(err)
	}
	mods, _ = sendAuth(t, s, rm, "bob")
	if r := headersOf(mods)["X-NDD-Report"]; !strings.Contains(r, "reporter=bob") {
		t.Fatalf("bob: %q", r)
	}
	id := matched(t, eng.Engine, campaignCopy(5))
	c, err := eng.Reader.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	// alice's second report of the same message counts once, as a
	// reporter and as a report (store msgreport.go).
	if c.SpamReporters != 2 || c.SpamReports != 2 {
		t.Errorf("campaign %d: %d spam reporters, %d reports; want 2 and 2", id, c.SpamReporters, c.SpamReports)
	}
}

// Red-team finding 8 through reports by mail: the SASL login's spellings
// (case, the realm's domain, white space) are one reporter.
func TestReportByMailLoginSpellings(t *testing.T) {
	eng := &recordingEngine{Engine: realEngineWith(t, campaign.Options{ReporterRealm: "example.org"})}
	h := start(t, eng, reportOpts("mailbox"))
	s := h.mtaSession("198.51.100.7")
	for i, login := range []string{"mallory", "Mallory", "MALLORY", "mallory@example.org", "Mallory@Example.ORG"} {
		mods, _ := sendAuth(t, s, reportMsg([]string{"spam-report@example.org"}, campaignCopy(i+1)), login)
		if r := headersOf(mods)["X-NDD-Report"]; !strings.Contains(r, "messages=1") {
			t.Fatalf("report as %s: %q", login, r)
		}
	}
	id := matched(t, eng.Engine, campaignCopy(9))
	c, err := eng.Reader.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if c.SpamReporters != 1 {
		t.Errorf("campaign %d: %d spam reporters, want 1", id, c.SpamReporters)
	}
}

// Red-team finding 9 through reports by mail: past the reporter's limit
// (every spelling of the login counting as one), a report message gets
// 451: the MTA keeps it and tries again later, nothing is lost.
func TestReportByMailRateLimited(t *testing.T) {
	e := realEngineWith(t, campaign.Options{ReporterRealm: "example.org"})
	e.Ingester.SetReporterLimiter(campaign.NewReporterLimiter(campaign.ReporterLimit{PerHour: 1, Burst: 2}, nil))
	h := start(t, &recordingEngine{Engine: e}, reportOpts("mailbox"))
	s := h.mtaSession("198.51.100.7")
	for i, login := range []string{"mallory", "Mallory@example.org", "MALLORY"} {
		mods, act := sendAuth(t, s, reportMsg([]string{"spam-report@example.org"}, campaignCopy(i+1)), login)
		switch {
		case i < 2 && !strings.Contains(headersOf(mods)["X-NDD-Report"], "messages=1"):
			t.Fatalf("report %d as %s: %c %v", i, login, act.Code, headersOf(mods))
		case i == 2 && (act.Code != gomilter.ActReplyCode || act.SMTPCode != 451 || !strings.HasPrefix(act.SMTPText, "4.7.1")):
			t.Fatalf("report %d as %s: %c %d %q, want 451 4.7.1\nlog:\n%s", i, login, act.Code, act.SMTPCode, act.SMTPText, h.logs.String())
		}
	}
	if !strings.Contains(h.logs.String(), "reporter_limit") {
		t.Errorf("the deferral is not logged:\n%s", h.logs.String())
	}
}

// Hostile report messages get an answer, never a hang or a panic.
func TestReportByMailHostile(t *testing.T) {
	deep := "Subject: x\r\n\r\nbody"
	for i := range 200 {
		deep = fmt.Sprintf("Content-Type: multipart/mixed; boundary=\"d%d\"\r\n\r\n--d%d\r\n%s\r\n--d%d--\r\n", i, i, deep, i)
	}
	many := strings.Repeat("--R\r\nContent-Type: message/rfc822\r\n\r\nSubject: a\r\n\r\nb\r\n", 5000)
	tests := []struct {
		name, ctype, body string
	}{
		{"deep nesting", "multipart/mixed; boundary=\"top\"", "--top\r\n" + deep + "\r\n--top--\r\n"},
		{"thousands of attachments", "multipart/mixed; boundary=\"R\"", many + "--R--\r\n"},
		{"bad base64 attachment", "multipart/mixed; boundary=\"R\"", "--R\r\nContent-Type: message/rfc822\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!!*&^%\r\n--R--\r\n"},
		{"unclosed multipart", "multipart/mixed; boundary=\"R\"", "--R\r\nContent-Type: message/rfc822\r\n\r\nSubject: cut"},
		{"no boundary", "multipart/mixed", "--R\r\nContent-Type: message/rfc822\r\n\r\n\x00\xff\xfe"},
		{"ARF without original", "multipart/report; report-type=feedback-report; boundary=\"R\"", "--R\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\n--R--\r\n"},
	}
	eng := &recordingEngine{Engine: realEngine(t)}
	h := start(t, eng, reportOpts("mailbox"))
	s := h.mtaSession("198.51.100.7")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := msg{from: "alice@example.org", rcpts: []string{"spam-report@example.org"}, queueID: "H",
				headers: [][2]string{{"Subject", "Fwd"}, {"Content-Type", tt.ctype}}, body: tt.body}
			t0 := time.Now()
			_, act := sendAuth(t, s, m, "alice")
			if act.Code != gomilter.ActAccept && act.Code != gomilter.ActReplyCode {
				t.Errorf("action %c", act.Code)
			}
			if d := time.Since(t0); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
	if strings.Contains(h.logs.String(), "panic") {
		t.Errorf("a panic:\n%s", h.logs.String())
	}
}

// With report addresses configured the milter asks for the macros it
// needs (SMFIF_SETSYMLIST) when the MTA offers it, naming both stages
// (Postfix empties the lists not named); without them it does not.
func TestReportMacroNegotiation(t *testing.T) {
	for _, tt := range []struct {
		name    string
		opts    Options
		offered uint32
		want    bool
	}{
		{"reports, offered", reportOpts(""), 0x1ff, true},
		{"reports, not offered", reportOpts(""), 0x3f, false},
		{"no reports", Options{}, 0x1ff, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, &scriptChecker{}, tt.opts)
			m := dialRaw(t, h.addr)
			m.send(optneg(6, tt.offered, 0x1fffff))
			code, d := m.recv()
			if code != cmdOptNeg || len(d) < 12 {
				t.Fatalf("reply %q %d bytes", code, len(d))
			}
			acts := binary.BigEndian.Uint32(d[4:8])
			got := acts&actSetSymList != 0
			if got != tt.want || (len(d) > 12) != tt.want {
				t.Fatalf("SETSYMLIST %v with %d bytes, want %v", got, len(d), tt.want)
			}
			if del := acts&actDelRcpt != 0; del != (tt.opts.Reports.SpamAddresses != nil) {
				t.Errorf("SMFIF_DELRCPT %v with reports %v", del, tt.opts.Reports.SpamAddresses)
			}
			if !tt.want {
				return
			}
			rest, lists := d[12:], map[uint32]string{}
			for len(rest) >= 4 {
				stage := binary.BigEndian.Uint32(rest[:4])
				var l []byte
				l, rest = cstring(rest[4:])
				lists[stage] = string(l)
			}
			if !strings.Contains(lists[stageEnvFrom], "{auth_authen}") || !strings.Contains(lists[stageEOM], "i") {
				t.Fatalf("macro lists %v", lists)
			}
		})
	}
}

// The daemon hands the milter the campaign engine's Checker and, for the
// reports by mail, its Ingester.
var (
	_ Checker  = (*campaign.Checker)(nil)
	_ Reporter = (*campaign.Ingester)(nil)
)
