package milter

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/store"
)

// recorder is a Recorder that keeps what it gets.
type recorder struct {
	mu sync.Mutex
	ds []ledger.Delivery
}

func (r *recorder) Record(d ledger.Delivery) {
	r.mu.Lock()
	r.ds = append(r.ds, d)
	r.mu.Unlock()
}

func (r *recorder) take() []ledger.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.ds
	r.ds = nil
	return out
}

const hamText = `Hello team, the quarterly planning meeting moves to Thursday afternoon in
the large conference room on the third floor. Please bring the updated budget
spreadsheets and the list of open hiring positions for each department. We will
also review the customer satisfaction survey results and agree on the priorities
for the next release of the mobile application. Lunch will be served after the
meeting, so tell the office manager about any dietary restrictions by Tuesday.`

func hamMsg(id string) msg {
	m := simple("Planning meeting moved to Thursday")
	m.body = strings.ReplaceAll(hamText, "\n", "\r\n") + "\r\n"
	if id != "" {
		m.headers = append(m.headers, [2]string{"Message-ID", "<" + id + ">"})
	}
	return m
}

// The milter records what it lets through (accepted, tagged) with its
// evidence, its recipients and its Message-ID, and nothing it rejects or
// quarantines; the evidence kept matches the campaign once it escalates.
func TestLedgerRecordsWhatPasses(t *testing.T) {
	eng := realEngine(t)
	rec := &recorder{}
	h := start(t, eng.Checker, Options{Ledger: rec})
	s := h.session()

	m := hamMsg("ham-1@example.org")
	m.rcpts = []string{"<alice@example.org>", "bob@example.org"}
	m.headers = append(m.headers, [2]string{"In-Reply-To", "<thread@example.org>"})
	if _, act := send(t, s, m); act.Code != gomilter.ActAccept {
		t.Fatalf("ham: %c", act.Code)
	}
	copy0 := campaignCopy(0)
	copy0.headers = append(copy0.headers, [2]string{"Message-ID", "<c0@spam.example>"})
	if _, act := send(t, s, copy0); act.Code != gomilter.ActAccept {
		t.Fatalf("first copy: %c", act.Code)
	}
	if _, act := send(t, s, hamMsg("")); act.Code != gomilter.ActAccept { // no Message-ID: the ledger says unpurgeable
		t.Fatalf("ham without Message-ID: %c", act.Code)
	}
	got := rec.take()
	if len(got) != 3 {
		t.Fatalf("%d deliveries recorded, want 3", len(got))
	}
	if d := got[0]; d.MessageID != "ham-1@example.org" || d.QueueID != "4ABC123" || d.RcptCount != 2 ||
		strings.Join(d.Rcpts, ",") != "alice@example.org,bob@example.org" || len(d.Evidence) == 0 || d.Time.IsZero() {
		t.Errorf("ham recorded as %+v", d)
	}
	// Its graymail signs, which a purge's match reads with the evidence.
	if sg, err := pipeline.UnmarshalSigns(got[0].Signs); err != nil || !sg.Reply {
		t.Errorf("ham's signs %q: %+v, %v", got[0].Signs, sg, err)
	}
	if got[2].MessageID != "" {
		t.Errorf("no Message-ID recorded as %q", got[2].MessageID)
	}
	ev := got[1].Evidence
	if m, err := pipeline.UnmarshalEvidence(ev); err != nil || m.Excerpt != "" || m.MessageID != "c0@spam.example" {
		t.Fatalf("evidence kept: %+v, %v", m, err)
	}

	var id store.CampaignID
	for i, user := range []string{"alice", "bob", "carol", "dave", "erin"} {
		out, err := eng.Ingester.Report(context.Background(), rawOf(campaignCopy(10+i)), store.KindSpam, user)
		if err != nil {
			t.Fatal(err)
		}
		id = out.Campaign
	}
	v, err := eng.Checker.MatchEvidence(context.Background(), ev, nil)
	if err != nil || v.Campaign != id || v.Action < action.Quarantine {
		t.Fatalf("the kept evidence after escalation: %+v, %v", v, err)
	}
	if v, _ := eng.Checker.MatchEvidence(context.Background(), got[0].Evidence, got[0].Signs); v.Campaign != 0 {
		t.Errorf("the ham's evidence matches campaign %d", v.Campaign)
	}

	// Rejected: not recorded. Capped to quarantine: not recorded; capped
	// to tag: recorded.
	if _, act := send(t, s, campaignCopy(20)); act.Code != gomilter.ActReplyCode {
		t.Fatalf("copy after escalation: %c", act.Code)
	}
	for _, c := range []struct {
		cap  string
		want int
	}{{"quarantine", 0}, {"tag", 1}} {
		if err := h.srv.Update(nil, Options{Ledger: rec, MaxAction: c.cap, Metrics: h.met}); err != nil {
			t.Fatal(err)
		}
		if _, act := send(t, s, campaignCopy(21)); act.Code != gomilter.ActAccept {
			t.Fatalf("capped to %s: %c", c.cap, act.Code)
		}
		if n := len(rec.take()); n != c.want {
			t.Errorf("capped to %s: %d recorded, want %d", c.cap, n, c.want)
		}
	}
}

// A message to more recipients than the ledger keeps: the first are
// kept, all are counted.
func TestLedgerRecipientsCapped(t *testing.T) {
	rec := &recorder{}
	h := start(t, realEngine(t).Checker, Options{Ledger: rec})
	m := hamMsg("many@example.org")
	m.rcpts = nil
	for i := range maxLedgerRcpts + 50 {
		m.rcpts = append(m.rcpts, fmt.Sprintf("u%d@example.org", i))
	}
	if _, act := send(t, h.session(), m); act.Code != gomilter.ActAccept {
		t.Fatalf("%c", act.Code)
	}
	got := rec.take()
	if len(got) != 1 || len(got[0].Rcpts) != maxLedgerRcpts || got[0].RcptCount != maxLedgerRcpts+50 {
		t.Fatalf("recorded %+v", got)
	}
}

// BenchmarkLedgerRecord is what recording costs the milter per message
// let through: the evidence of a signed message (an accepted ham of
// ~500 bytes of text) made and handed to a real ledger.
func BenchmarkLedgerRecord(b *testing.B) {
	eng := realEngine(&testing.T{})
	_, m, err := eng.Checker.CheckEvidence(context.Background(), rawOf(hamMsg("bench@example.org")), campaign.CheckOptions{})
	if err != nil || m == nil {
		b.Fatal(err)
	}
	l, err := ledger.Open("", ledger.Options{InMemory: true, QueueLen: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	s := &session{srv: &Server{}, ledgerRcpts: []string{"alice@example.org"}, queueID: "4ABC123", rcpts: 1}
	st := &state{opts: Options{Ledger: l}}
	v := campaign.Verdict{Action: action.Accept}
	b.ReportAllocs()
	for b.Loop() {
		k, ok := keep(m, v, action.Reject)
		if !ok {
			b.Fatal("not kept")
		}
		s.record(st, k)
	}
	b.ReportMetric(float64(len(mustKeep(b, m).evidence)), "evidence-bytes")
}

func mustKeep(b *testing.B, m *pipeline.Message) kept {
	k, ok := keep(m, campaign.Verdict{}, action.Reject)
	if !ok {
		b.Fatal("not kept")
	}
	return k
}
