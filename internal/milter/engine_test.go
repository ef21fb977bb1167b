package milter

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/store"
)

// realEngine is the campaign engine over a real Badger store in a
// temporary directory, with the embedded lexicon and model.
func realEngine(t *testing.T) *campaign.Engine {
	t.Helper()
	return realEngineWith(t, campaign.Options{})
}

// realEngineWith is realEngine with engine options.
func realEngineWith(t *testing.T, opts campaign.Options) *campaign.Engine {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		t.Skipf("embedded lexicon not available yet: %v", err)
	}
	model, err := andd.DefaultModel()
	if err != nil {
		t.Skipf("embedded model not available yet: %v", err)
	}
	st, err := store.Open(t.TempDir(), store.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := campaign.New(st, lex, model, opts, log)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

const campaignText = `Dear friend, we are pleased to announce that your account has been selected
for an exclusive investment opportunity with guaranteed monthly returns. Our
financial advisors have prepared a personal portfolio proposal for you. Please
confirm your participation by visiting our secure website and entering your
banking details before the offer expires at the end of this week. Thousands of
satisfied customers have already doubled their savings with our program.
Remember that this invitation is strictly personal and cannot be transferred.
Kind regards, the international investment department.`

func campaignCopy(i int) msg {
	words := strings.Fields(campaignText)
	// Randomize: a different greeting and an appended innocent line.
	words[1] = []string{"friend,", "customer,", "client,", "member,"}[i%4]
	body := strings.Join(words, " ") + fmt.Sprintf("\r\n\r\nReference number %d. Weather today is mild and pleasant.\r\n", 1000+i)
	m := simple("Exclusive investment opportunity for you")
	m.body = body
	m.queueID = fmt.Sprintf("Q%d", i)
	return m
}

func rawOf(m msg) []byte {
	var b strings.Builder
	for _, h := range m.headers {
		b.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	b.WriteString("\r\n" + m.body)
	return []byte(b.String())
}

// With the real engine and store: an unknown message is accepted with the
// verdict header; after reports from five users (the default policy rejects
// only well-reported campaigns), a randomized copy is
// rejected with the campaign named in the 550 reply.
func TestRealEngineEndToEnd(t *testing.T) {
	eng := realEngine(t)
	h := start(t, eng.Checker, Options{})
	s := h.session()

	mods, act := send(t, s, simple("Lunch on Friday?"))
	if act.Code != gomilter.ActAccept || !strings.HasPrefix(headersOf(mods)["X-NDD-Verdict"], "accept;") {
		t.Fatalf("normal message: %c %v", act.Code, mods)
	}

	ctx := context.Background()
	var id store.CampaignID
	for i, user := range []string{"alice", "bob", "carol", "dave", "erin"} {
		out, err := eng.Ingester.Report(ctx, rawOf(campaignCopy(i)), store.KindSpam, user)
		if err != nil {
			t.Fatal(err)
		}
		if out.Skipped != "" {
			t.Fatalf("report skipped: %s", out.Skipped)
		}
		id = out.Campaign
	}
	if id == 0 {
		t.Fatal("no campaign created")
	}
	_, act = send(t, s, campaignCopy(7))
	if act.Code != gomilter.ActReplyCode || act.SMTPCode != 550 || !strings.Contains(act.SMTPText, fmt.Sprintf("campaign %d ", id)) {
		t.Fatalf("copy: action %c %d %q, want 550 naming campaign %d\nlog:\n%s", act.Code, act.SMTPCode, act.SMTPText, id, h.logs.String())
	}
	// The same session goes on after the reject.
	if _, act := send(t, s, simple("Minutes of the meeting")); act.Code != gomilter.ActAccept {
		t.Fatalf("after reject: %c", act.Code)
	}

	// A recipient whose override caps at tag: the copy is tagged, the
	// verdict says why, and the campaign counts a tag, not a reject.
	if err := h.srv.Update(nil, Options{Overrides: map[string]string{"abuse@example.org": "tag"}, Metrics: h.met}); err != nil {
		t.Fatal(err)
	}
	m := campaignCopy(8)
	m.rcpts = []string{"Abuse@Example.org"}
	mods, act = send(t, s, m)
	verdict := headersOf(mods)["X-NDD-Verdict"]
	if act.Code != gomilter.ActAccept || !strings.HasPrefix(verdict, "tag;") ||
		!strings.HasSuffix(verdict, "reject capped to tag by milter.overrides abuse@example.org") {
		t.Fatalf("copy to the abuse desk: %c, X-NDD-Verdict %q", act.Code, verdict)
	}
	c, err := eng.Reader.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c.Actions["reject"] != 1 || c.Actions["tag"] != 1 {
		t.Errorf("campaign counts %v, want 1 reject and 1 tag", c.Actions)
	}
}

// With the real engine: while hostile sessions hold the whole byte budget
// with large unfinished messages, a padded copy of a rejected campaign (its
// text, then a 400 KB attachment) is checked from the part buffered and
// rejected, not passed unchecked.
func TestRealEngineBudgetHeld(t *testing.T) {
	eng := realEngine(t)
	const budget = 1 << 20
	h := start(t, eng.Checker, Options{MaxBufferedBytes: budget})
	ctx := context.Background()
	for i, user := range []string{"alice", "bob", "carol", "dave", "erin"} {
		if _, err := eng.Ingester.Report(ctx, rawOf(campaignCopy(i)), store.KindSpam, user); err != nil {
			t.Fatal(err)
		}
	}
	// Two hostile sessions hold the budget with unfinished messages.
	for range 2 {
		s := h.session()
		s.Mail("x@example.net", nil)
		s.Rcpt("y@example.org", nil)
		s.HeaderField("Subject", "slow")
		s.HeaderEnd()
		chunk := []byte(strings.Repeat("x", gomilter.MaxBodyChunk))
		for range (budget / gomilter.MaxBodyChunk) + 4 {
			if _, err := s.BodyChunk(chunk); err != nil {
				t.Fatal(err)
			}
		}
	}
	// They hold the budget (less than the padded copy needs is left). The
	// client does not wait for the server's answers to body chunks.
	for i := 0; h.srv.Buffered() < budget-256<<10; i++ {
		if i == 250 {
			t.Fatalf("the hostile sessions hold %d bytes of the %d budget", h.srv.Buffered(), budget)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The padded copy: the campaign's text, then a large attachment.
	m := campaignCopy(9)
	attachment := strings.Repeat(strings.Repeat("QUJD", 19)+"\r\n", 400<<10/78)
	m.headers = append(m.headers, [2]string{"MIME-Version", "1.0"},
		[2]string{"Content-Type", `multipart/mixed; boundary="b1"`})
	m.body = "--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + m.body +
		"\r\n--b1\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n" +
		"Content-Disposition: attachment; filename=\"report.pdf\"\r\n\r\n" + attachment + "--b1--\r\n"
	mods, act := send(t, h.session(), m)
	if act.Code != gomilter.ActReplyCode || act.SMTPCode != 550 {
		t.Fatalf("padded copy while the budget is held: action %c %d, headers %v, want 550\nlog:\n%s",
			act.Code, act.SMTPCode, headersOf(mods), h.logs.String())
	}
	if !strings.Contains(h.logs.String(), "cut_by=milter.max_buffered_bytes") {
		t.Errorf("the log does not say the message was checked from its head:\n%s", h.logs.String())
	}
}
