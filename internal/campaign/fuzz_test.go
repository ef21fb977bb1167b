package campaign

import (
	"github.com/nddmilter/nddmilter/internal/action"
	"math"
	"testing"

	"github.com/nddmilter/nddmilter/internal/store"
)

// FuzzEngine feeds arbitrary bytes to Report and Check: they must never
// panic, and verdicts must stay well-formed.
func FuzzEngine(f *testing.F) {
	f.Add(baseMessage(0))
	f.Add([]byte("Subject: hi\r\n\r\nok\r\n"))
	f.Add([]byte("Content-Type: multipart/report; report-type=feedback-report; boundary=x\r\n\r\n--x\r\nContent-Type: message/rfc822\r\n\r\n"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=\"a\"\r\n\r\n--a\r\nContent-Type: text/html; charset=utf-16\r\nContent-Transfer-Encoding: base64\r\n\r\n////\r\n"))
	st, err := store.Open("", store.Options{InMemory: true})
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	lex, mod := resources(f)
	eng, err := New(st, lex, mod, Options{}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		o, err := eng.Ingester.Report(t.Context(), raw, store.KindSpam, "fuzz")
		if err != nil {
			t.Fatalf("Report: %v", err)
		}
		if (o.Skipped == "") == (o.Campaign == 0) {
			t.Fatalf("outcome %+v: a campaign xor a skip reason expected", o)
		}
		v, err := eng.Checker.Check(t.Context(), raw)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if v.Action < action.Accept || v.Action > action.Reject || math.IsNaN(v.Score) || v.Score < 0 || v.Score > 1 || v.Rule == "" {
			t.Fatalf("verdict %+v", v)
		}
		if o.Campaign != 0 && v.Campaign == 0 {
			t.Fatalf("reported message (campaign %d) does not match: %+v", o.Campaign, v)
		}
	})
}
