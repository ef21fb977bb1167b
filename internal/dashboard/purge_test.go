package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/store"
)

// ledgerPurges serves a real ledger's purge reports and records the
// undos asked.
type ledgerPurges struct {
	l     *ledger.Ledger
	mu    sync.Mutex
	undos []string
}

func (p *ledgerPurges) Purge(ctx context.Context, id store.CampaignID, limit int) (ledger.Purge, error) {
	return p.l.Purge(uint64(id), limit)
}

func (p *ledgerPurges) UndoPurge(ctx context.Context, id store.CampaignID, who string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.undos = append(p.undos, fmt.Sprintf("%d by %s", id, who))
	return 1, nil
}

func (p *ledgerPurges) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.undos...)
}

// purgedLedger holds campaign c's jobs: a copy moved (to a user and
// with a Message-ID that try to inject markup and reverse the text), one
// skipped as read, one pending.
func purgedLedger(t *testing.T, c store.CampaignID) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open("", ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	at := time.Now().Add(-time.Hour)
	for i, j := range []ledger.Job{
		{User: `<script>alert(1)</script>`, MessageID: "c1@x\u202e<b>evil</b>", Status: ledger.Done, Outcome: ledger.Moved,
			From: "INBOX", To: ledger.Location{Mailbox: "Junk", UID: 3}},
		{User: "bob", MessageID: "c2@spam.example", Status: ledger.Done, Outcome: ledger.Skipped, Reason: "read"},
		{User: "carol", MessageID: "c3@spam.example", Status: ledger.Pending, Attempts: 2},
	} {
		var e ledger.Key
		e[15] = byte(i + 1)
		j.ID, j.Kind, j.Entry, j.Campaign, j.Next = ledger.MakeJobID(ledger.Move, e, j.User), ledger.Move, e, uint64(c), at
		final := j
		j.Status = ledger.Pending
		if err := l.AddJob(j); err != nil {
			t.Fatal(err)
		}
		if final.Status == ledger.Done {
			final.Finished = at.Add(time.Duration(i) * time.Minute)
		}
		if err := l.UpdateJob(final); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetMark(uint64(c), ledger.Mark{Triggered: at}); err != nil {
		t.Fatal(err)
	}
	return l
}

// The campaign page shows what zero-hour purge took back; an
// administrator undoes it through the confirmation page's form (CSRF
// token, same origin), the read role sees it and cannot.
func TestPurgeSectionAndUndo(t *testing.T) {
	pu := &ledgerPurges{}
	f := newFixture(t, Options{Purges: pu})
	id := f.report(t, campaignMessage(t, 11, 0, "Cheap watches", "a@spam.example", ""), store.KindSpam, "r1")
	pu.l = purgedLedger(t, id)
	page := fmt.Sprintf("/ui/campaigns/%d", id)

	reader := f.client(t)
	reader.login("bob", readSecret)
	resp, body := reader.get(page)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("campaign page: %d", resp.StatusCode)
	}
	checkSafe(t, page, body)
	for _, want := range []string{`id="purge"`, `id="purge-moved">1<`, "read 1", "pending (2 tries)", "INBOX → Junk",
		"&lt;script&gt;alert(1)&lt;/script&gt;", "c1@x[U&#43;202E]&lt;b&gt;evil&lt;/b&gt;", "Copies purged since"} {
		if !strings.Contains(body, want) {
			t.Errorf("campaign page lacks %q", want)
		}
	}
	if strings.Contains(body, "undo-purge") {
		t.Error("the read role is offered the undo")
	}
	if resp, _ := reader.get(page + "/confirm?do=undo-purge"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("confirm page for the read role: %d", resp.StatusCode)
	}
	if resp, _ := reader.post(page+"/undo-purge", url.Values{"csrf": {reader.csrf}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("undo by the read role: %d, want 403", resp.StatusCode)
	}

	admin := f.client(t)
	admin.login("carol", adminSecret)
	if _, body := admin.get(page); !strings.Contains(body, `href="`+page+`/confirm?do=undo-purge"`) {
		t.Fatalf("no undo offered to the administrator:\n%s", body)
	}
	for name, tt := range map[string]struct {
		form url.Values
		hdr  map[string]string
	}{
		"no CSRF token":    {url.Values{}, map[string]string{"Sec-Fetch-Site": "same-origin"}},
		"wrong CSRF token": {url.Values{"csrf": {admin.csrf + "x"}}, map[string]string{"Sec-Fetch-Site": "same-origin"}},
		"cross-site":       {url.Values{"csrf": {admin.csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"no fetch headers": {url.Values{"csrf": {admin.csrf}}, nil},
	} {
		if resp, _ := admin.do(http.MethodPost, page+"/undo-purge", tt.form, tt.hdr); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, resp.StatusCode)
		}
	}
	if got := pu.asked(); len(got) != 0 {
		t.Fatalf("refused requests undid the purge: %v", got)
	}
	resp, body = admin.get(page + "/confirm?do=undo-purge")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `action="`+page+`/undo-purge"`) {
		t.Fatalf("confirm page: %d\n%s", resp.StatusCode, body)
	}
	resp, _ = admin.post(page+"/undo-purge", url.Values{"csrf": {admin.csrf}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("undo: %d", resp.StatusCode)
	}
	if got := pu.asked(); len(got) != 1 || got[0] != fmt.Sprintf("%d by dashboard user carol", id) {
		t.Errorf("undos asked: %v", got)
	}
	if _, body := admin.get(resp.Header.Get("Location")); !strings.Contains(body, fmt.Sprintf(`id="notice">Campaign %d had its purge undone`, id)) {
		t.Errorf("no notice after the undo")
	}
	if !strings.Contains(f.log.String(), fmt.Sprintf("change=undo-purge campaign=%d undo_jobs=1", id)) {
		t.Errorf("undo not in the audit log:\n%s", f.log.String())
	}
	if s, _ := f.state(t, id); s != store.StateActive {
		t.Errorf("the undo changed the campaign's state: %v", s)
	}
}

// Without zero-hour purge the page has no purge section and the undo is
// not found.
func TestPurgeOff(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.report(t, campaignMessage(t, 12, 0, "Cheap watches", "a@spam.example", ""), store.KindSpam, "r1")
	c := f.client(t)
	c.login("carol", adminSecret)
	page := fmt.Sprintf("/ui/campaigns/%d", id)
	if _, body := c.get(page); strings.Contains(body, `id="purge"`) || strings.Contains(body, "undo-purge") {
		t.Error("purge section without zero-hour purge")
	}
	if resp, _ := c.get(page + "/confirm?do=undo-purge"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("confirm: %d, want 404", resp.StatusCode)
	}
	if resp, _ := c.post(page+"/undo-purge", url.Values{"csrf": {c.csrf}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("undo: %d, want 404", resp.StatusCode)
	}
}
