package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// BenchmarkPages is the server time of each page (query and rendering,
// no network) over a store of campaigns written straight into it, every
// one hit in the last hour (so that the now page's ranking is full) and
// one in 20 with a not-spam report (on the false-positive watch).
//
//	go test -run '^$' -bench Pages -benchtime 50x ./internal/dashboard
func BenchmarkPages(b *testing.B) {
	const campaigns = 2000
	st, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	now := time.Now()
	var last store.CampaignID
	for i := range campaigns {
		res, err := st.Report(ctx, store.ReportInput{Time: now, Kind: store.KindSpam, Reporter: fmt.Sprint("r", i%7),
			Keys: [][]byte{fmt.Appendf(nil, "key-%d", i)}, Create: true, Index: true,
			Subject: fmt.Sprintf("Campaign number %d", i), From: "x@spam.example", Text: "some text"})
		if err != nil {
			b.Fatal(err)
		}
		if i%20 == 0 { // on the false-positive watch
			if _, err := st.Report(ctx, store.ReportInput{Time: now, Kind: store.KindHam, Reporter: "friend",
				Keys: [][]byte{fmt.Appendf(nil, "key-%d", i)}}); err != nil {
				b.Fatal(err)
			}
		}
		for range i % 5 {
			if err := st.RecordHit(ctx, res.Campaign, "tag", now); err != nil {
				b.Fatal(err)
			}
		}
		last = res.Campaign
	}
	if err := st.FlushHits(ctx); err != nil {
		b.Fatal(err)
	}
	eng := benchEngine(b, st)
	h, err := New(eng.Reader, eng.Ingester, Options{Credentials: testCreds})
	if err != nil {
		b.Fatal(err)
	}
	se := &session{id: newToken(), who: "bench", role: RoleAdmin, csrf: newToken(), expires: now.Add(time.Hour)}
	h.sessions.add(se, now)
	for _, p := range []string{"/ui/", "/ui/?sort=day", "/ui/watch", fmt.Sprintf("/ui/campaigns/%d", last)} {
		b.Run(p, func(b *testing.B) {
			for b.Loop() {
				r := httptest.NewRequest(http.MethodGet, p, nil)
				r.AddCookie(&http.Cookie{Name: CookieName, Value: se.id})
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d", p, w.Code)
				}
			}
		})
	}
}
