package zap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/nddmilter/nddmilter/internal/zap/move"
)

const spamText = `Dear friend, we are pleased to announce that your account has been selected
for an exclusive investment opportunity with guaranteed monthly returns. Our
financial advisors have prepared a personal portfolio proposal for you. Please
confirm your participation by visiting our secure website and entering your
banking details before the offer expires at the end of this week. Thousands of
satisfied customers have already doubled their savings with our program.
Remember that this invitation is strictly personal and cannot be transferred.
Kind regards, the international investment department.`

const hamText = `Hello team, the quarterly planning meeting moves to Thursday afternoon in
the large conference room on the third floor. Please bring the updated budget
spreadsheets and the list of open hiring positions for each department. We will
also review the customer satisfaction survey results and agree on the priorities
for the next release of the mobile application. Lunch will be served after the
meeting, so tell the office manager about any dietary restrictions by Tuesday.`

func message(subject, text, id string, i int) []byte {
	words := strings.Fields(text)
	words[1] = []string{"friend,", "customer,", "client,", "member,"}[i%4]
	return []byte(fmt.Sprintf("From: offers@spam.example\r\nTo: u%d@example.org\r\nSubject: %s\r\nMessage-ID: <%s>\r\n\r\n%s\r\n\r\nReference number %d.\r\n",
		i, subject, id, strings.Join(words, " "), 1000+i))
}

func spamCopy(i int) []byte {
	return message("Exclusive investment opportunity", spamText, fmt.Sprintf("c%d@spam.example", i), i)
}

func engine(t *testing.T) *campaign.Engine {
	t.Helper()
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		t.Fatal(err)
	}
	model, err := andd.DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir(), store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := campaign.New(st, lex, model, campaign.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// fakeMover records the requests; down makes it fail as an unreachable
// server does.
type fakeMover struct {
	mu    sync.Mutex
	down  bool
	moves []move.Request
	undos []move.UndoRequest
}

func (f *fakeMover) Move(ctx context.Context, r move.Request) (move.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return move.Result{}, errors.New("connection refused")
	}
	f.moves = append(f.moves, r)
	return move.Result{Outcome: move.Moved, From: "INBOX", To: move.Location{Mailbox: r.Junk, Validity: "v", UID: uint32(len(f.moves))}}, nil
}

func (f *fakeMover) Undo(ctx context.Context, r move.UndoRequest) (move.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return move.Result{}, errors.New("connection refused")
	}
	f.undos = append(f.undos, r)
	return move.Result{Outcome: move.Moved, From: r.At.Mailbox, To: move.Location{Mailbox: r.To}}, nil
}

func (f *fakeMover) counts() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.moves), len(f.undos)
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// record checks a message as the milter does and records it when it
// passes.
func record(t *testing.T, eng *campaign.Engine, l *ledger.Ledger, raw []byte, rcpt string, at time.Time) {
	t.Helper()
	v, m, err := eng.Checker.CheckEvidence(context.Background(), raw, campaign.CheckOptions{})
	if err != nil || v.Action > action.Tag {
		t.Fatalf("check before the reports: %+v, %v", v, err)
	}
	ev, err := m.MarshalEvidence(pipeline.EvidenceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Record(ledger.Delivery{Time: at, MessageID: m.MessageID, Rcpts: []string{rcpt}, RcptCount: 1, Evidence: ev})
}

// The trigger, the jobs and the undo, with the real engine and ledger:
// the copies delivered before a campaign escalated are moved once each,
// the ham stays, the jobs wait while the server is down, an allow moves
// back what was moved, and nothing is redone.
func TestPurgeCampaign(t *testing.T) {
	ctx := context.Background()
	eng := engine(t)
	c := &clock{t: time.Now()}
	l, err := ledger.Open("", ledger.Options{InMemory: true, Clock: c.now, FlushInterval: time.Hour, EvictInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 10 {
		record(t, eng, l, spamCopy(i), fmt.Sprintf("U%d@Example.org", i), c.now())
	}
	record(t, eng, l, message("Planning meeting", hamText, "ham@example.org", 0), "u0@example.org", c.now())
	// A copy without Message-ID: unpurgeable.
	record(t, eng, l, []byte(strings.Replace(string(spamCopy(10)), "Message-ID: <c10@spam.example>\r\n", "", 1)), "u10@example.org", c.now())
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	fm := &fakeMover{}
	var logs strings.Builder
	p, err := New(l, engCampaigns{eng}, fm, Options{Clock: c.now, Rate: 1000, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		UserMap: mustMap(t, MapLocalPart)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.PendingJobs(); n != 0 {
		t.Fatalf("%d jobs before any report", n)
	}
	var id store.CampaignID
	for i, u := range []string{"r1", "r2", "r3", "r4", "r5"} {
		out, err := eng.Ingester.Report(ctx, spamCopy(20+i), store.KindSpam, u)
		if err != nil {
			t.Fatal(err)
		}
		id = out.Campaign
	}
	c.add(time.Second)
	if err := p.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.PendingJobs(); n != 10 {
		t.Fatalf("%d jobs after the escalation, want 10 (one per copy with a Message-ID)", n)
	}
	// The server is down: the jobs wait.
	fm.down = true
	if n, err := p.Work(ctx); n != 0 || err != nil {
		t.Fatalf("Work with the server down: %d, %v", n, err)
	}
	if due, _ := l.DueJobs(c.now(), 100); len(due) != 0 {
		t.Fatalf("%d jobs due at once after a failure", len(due))
	}
	fm.down = false
	c.add(time.Minute)
	if n, err := p.Work(ctx); n != 10 || err != nil {
		t.Fatalf("Work with the server back: %d, %v\n%s", n, err, logs.String())
	}
	moves, _ := fm.counts()
	if moves != 10 {
		t.Fatalf("%d moves", moves)
	}
	for _, r := range fm.moves {
		if !strings.HasPrefix(r.User, "u") || strings.Contains(r.User, "@") || !strings.HasSuffix(r.MessageID, "@spam.example") || !r.UnreadOnly || r.Junk != "Junk" {
			t.Errorf("request %+v", r)
		}
	}
	jobs, _ := l.CampaignJobs(uint64(id))
	outcomes := map[string]int{}
	for _, j := range jobs {
		outcomes[j.Outcome+" "+j.Reason]++
	}
	if outcomes["moved "] != 10 || outcomes["skipped unpurgeable: no Message-ID"] != 1 {
		t.Errorf("outcomes %v", outcomes)
	}
	// Nothing is redone.
	if err := p.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := p.Work(ctx); n != 0 {
		t.Errorf("%d jobs redone", n)
	}
	// Allowed: what was moved goes back, once.
	if _, err := eng.Ingester.Allow(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	c.add(time.Second)
	for range 2 {
		if err := p.Scan(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Work(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, undos := fm.counts(); undos != 10 {
		t.Fatalf("%d undos, want 10", undos)
	}
	if u := fm.undos[0]; u.At.Mailbox != "Junk" || u.At.UID == 0 || u.To != "INBOX" {
		t.Errorf("undo request %+v", u)
	}
	if !strings.Contains(logs.String(), "outcome=moved") {
		t.Errorf("no log line per move:\n%s", logs.String())
	}
}

// mode: log moves nothing and says what it would move.
func TestPurgeModeLog(t *testing.T) {
	ctx := context.Background()
	eng := engine(t)
	l, err := ledger.Open("", ledger.Options{InMemory: true, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	record(t, eng, l, spamCopy(0), "u0@example.org", time.Now())
	l.Flush()
	for i, u := range []string{"r1", "r2", "r3", "r4", "r5"} {
		if _, err := eng.Ingester.Report(ctx, spamCopy(20+i), store.KindSpam, u); err != nil {
			t.Fatal(err)
		}
	}
	fm := &fakeMover{}
	p, _ := New(l, engCampaigns{eng}, fm, Options{Mode: ModeLog, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	p.Scan(ctx)
	if n, err := p.Work(ctx); n != 1 || err != nil {
		t.Fatalf("Work: %d, %v", n, err)
	}
	if m, _ := fm.counts(); m != 0 {
		t.Errorf("mode log moved %d", m)
	}
}

func mustMap(t *testing.T, spec string) UserMap {
	t.Helper()
	m, err := ParseUserMap(spec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestUserMap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users")
	os.WriteFile(path, []byte("# aliases\nSales@Example.org  alice\nbob@example.org bob.smith # comment\n"), 0o600)
	for _, c := range []struct{ spec, in, want string }{
		{"", "<Alice@Example.org>", "alice@example.org"},
		{MapLocalPart, "Alice@Example.org", "alice"},
		{MapLocalPart, "a@b@example.org", "a@b"},
		{"file:" + path, "sales@example.org", "alice"},
		{"file:" + path, "<BOB@example.org>", "bob.smith"},
		{"file:" + path, "carol@example.org", ""},
	} {
		if got := mustMap(t, c.spec)(c.in); got != c.want {
			t.Errorf("%s(%s) = %q, want %q", c.spec, c.in, got, c.want)
		}
	}
	os.WriteFile(path, []byte("one two three\n"), 0o600)
	for _, spec := range []string{"file:" + path, "file:/nonexistent", "ldap"} {
		if _, err := ParseUserMap(spec); err == nil {
			t.Errorf("%s accepted", spec)
		}
	}
}

// engCampaigns is the engine's jobs the purger uses (the daemon's
// currentEngine does the same over the engine of the moment).
type engCampaigns struct{ e *campaign.Engine }

func (c engCampaigns) List(ctx context.Context, q store.Query) ([]store.Campaign, error) {
	return c.e.Reader.List(ctx, q)
}

func (c engCampaigns) Get(ctx context.Context, id store.CampaignID) (*store.Campaign, error) {
	return c.e.Reader.Get(ctx, id)
}

func (c engCampaigns) ExactCopy(cp *store.Campaign) campaign.Decision {
	return c.e.Reader.ExactCopy(cp)
}

func (c engCampaigns) MatchEvidence(ctx context.Context, ev, signs []byte) (campaign.Verdict, error) {
	return c.e.Checker.MatchEvidence(ctx, ev, signs)
}
