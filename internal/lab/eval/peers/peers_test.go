package peers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
)

func TestCosine(t *testing.T) {
	tests := []struct {
		a, b []string
		want float64
	}{
		{nil, []string{"a"}, 0},
		{[]string{"a", "b"}, []string{"a", "b"}, 1},
		{[]string{"a", "b"}, []string{"c", "d"}, 0},
		{[]string{"a", "b", "c", "d"}, []string{"a", "b"}, 2 / math.Sqrt(8)},
		{[]string{"a", "c", "e"}, []string{"b", "c", "d", "e"}, 2 / math.Sqrt(12)},
	}
	for _, tt := range tests {
		if got := Cosine(tt.a, tt.b); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Cosine(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestNearDupIndex(t *testing.T) {
	refs := [][]string{{"alpha", "beta", "gamma"}, {"delta", "epsilon"}, {"alpha", "beta", "gamma", "omega"}}
	ix := NewNearDupIndex(refs)
	tests := []struct {
		terms   []string
		best    int
		wantCos float64
	}{
		{[]string{"alpha", "beta", "gamma"}, 0, 1},
		{[]string{"delta", "epsilon", "zeta"}, 1, 2 / math.Sqrt(6)},
		{[]string{"nothing"}, -1, 0},
		{nil, -1, 0},
	}
	for _, tt := range tests {
		best, cos := ix.Best(tt.terms)
		if best != tt.best || math.Abs(cos-tt.wantCos) > 1e-12 {
			t.Errorf("Best(%v) = %d, %v; want %d, %v", tt.terms, best, cos, tt.best, tt.wantCos)
		}
		if best >= 0 {
			if c := Cosine(tt.terms, refs[best]); math.Abs(c-cos) > 1e-12 {
				t.Errorf("Best(%v) cosine %v disagrees with Cosine %v", tt.terms, cos, c)
			}
		}
	}
}

func testCorpus(nspam, nham int) []Message {
	var msgs []Message
	for i := range nspam {
		msgs = append(msgs, Message{Path: fmt.Sprintf("spam/%d", i), Class: ClassSpam})
	}
	for i := range nham {
		msgs = append(msgs, Message{Path: fmt.Sprintf("ham/%d", i), Class: ClassEasyHam})
	}
	return msgs
}

func TestSplitReported(t *testing.T) {
	tests := []struct {
		nspam, nham int
		share       float64
		wantRep     int
	}{
		{100, 50, 0.1, 10},
		{100, 50, 0, 10}, // default share
		{3, 5, 0.1, 1},   // at least one
		{0, 5, 0.1, 0},
		{10, 0, 1, 10},
	}
	for _, tt := range tests {
		msgs := testCorpus(tt.nspam, tt.nham)
		s := SplitReported(msgs, tt.share, 7)
		if len(s.Reported) != tt.wantRep {
			t.Errorf("%d spam share %v: %d reported, want %d", tt.nspam, tt.share, len(s.Reported), tt.wantRep)
		}
		if len(s.Reported)+len(s.Checked) != len(msgs) {
			t.Errorf("split loses messages: %d + %d != %d", len(s.Reported), len(s.Checked), len(msgs))
		}
		for _, i := range s.Reported {
			if !msgs[i].IsSpam() || slices.Contains(s.Checked, i) {
				t.Errorf("reported %d is not spam or is also checked", i)
			}
		}
		if again := SplitReported(msgs, tt.share, 7); !slices.Equal(again.Reported, s.Reported) {
			t.Errorf("split not deterministic")
		}
	}
	a := SplitReported(testCorpus(1000, 0), 0.1, 1).Reported
	b := SplitReported(testCorpus(1000, 0), 0.1, 2).Reported
	if slices.Equal(a, b) {
		t.Errorf("different seeds gave the same split")
	}
}

func TestSample(t *testing.T) {
	msgs := testCorpus(300, 700)
	s := Sample(msgs, 100, 1)
	spam := 0
	for _, m := range s {
		if m.IsSpam() {
			spam++
		}
	}
	if len(s) != 100 || spam != 30 {
		t.Errorf("Sample: %d messages, %d spam; want 100, 30", len(s), spam)
	}
	if got := Sample(msgs, 0, 1); len(got) != len(msgs) {
		t.Errorf("Sample(0) = %d messages, want all", len(got))
	}
}

func TestStripMboxFrom(t *testing.T) {
	tests := []struct{ in, want string }{
		{"From a@b Thu Aug 22 13:17:22 2002\nSubject: x\n\nbody", "Subject: x\n\nbody"},
		{"Subject: x\n\nFrom here", "Subject: x\n\nFrom here"},
		{"From only", "From only"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := string(StripMboxFrom([]byte(tt.in))); got != tt.want {
			t.Errorf("StripMboxFrom(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLoadCorpus(t *testing.T) {
	dir := t.TempDir()
	for _, c := range classes {
		if err := os.MkdirAll(filepath.Join(dir, c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("spam/b.eml", "From x Thu\nSubject: s\n\nbuy")
	write("spam/a.eml", "Subject: a\n\nbuy")
	write("easy_ham/c.eml", "Subject: c\n\nhello")
	write("hard_ham/.hidden", "x")
	msgs, err := LoadCorpus(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || filepath.Base(msgs[0].Path) != "a.eml" || msgs[2].Class != ClassEasyHam {
		t.Fatalf("LoadCorpus = %+v", msgs)
	}
	if string(msgs[1].Raw) != "Subject: s\n\nbuy" {
		t.Errorf("mbox From line kept: %q", msgs[1].Raw)
	}
	if _, err := LoadCorpus(filepath.Join(dir, "missing"), 0); err == nil {
		t.Errorf("LoadCorpus of a missing directory: no error")
	}
}

// fakeRspamd answers like rspamd 3.4's controller and scanner (the shapes
// seen on this machine): a message is "known" once fuzzy-added, and
// messages containing "tiny" have no fuzzy hash.
func fakeRspamd(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	known := map[string]bool{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/fuzzyadd":
			if r.Header.Get("Flag") != "11" || r.Header.Get("Weight") != "10" {
				http.Error(w, `{"error":"bad flag"}`, http.StatusBadRequest)
				return
			}
			if strings.Contains(string(body), "tiny") {
				w.WriteHeader(http.StatusNotFound)
				io.WriteString(w, `{"error":"No fuzzy rules matched"}`)
				return
			}
			known[string(body)] = true
			io.WriteString(w, `{"success":true,"hashes":["796c0bff56eb"]}`)
		case "/checkv2":
			var syms []string
			if r.Header.Get("Settings") != FuzzyOnly {
				syms = append(syms, `"DATE_IN_PAST":{"name":"DATE_IN_PAST","score":1.0}`)
			}
			if known[string(body)] {
				syms = append(syms, `"LOCAL_FUZZY_DENIED":{"name":"LOCAL_FUZZY_DENIED","score":8.76,"options":["11:796c0bff56:1.00:txt"]}`)
			}
			sym := strings.Join(syms, ",")
			io.WriteString(w, `{"is_skipped":false,"score":9.76,"action":"no action","symbols":{`+sym+`}}`)
		default:
			http.NotFound(w, r)
		}
	}))
}

func TestRspamdClient(t *testing.T) {
	srv := fakeRspamd(t)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	r := NewRspamd(Rspamd{Scanner: addr, Controller: addr, SettleTime: time.Millisecond}, 2)
	defer r.Close()
	ctx := context.Background()
	if err := r.Report(ctx, []byte("spam one")); err != nil {
		t.Fatalf("Report: %v", err)
	}
	if err := r.Report(ctx, []byte("tiny")); !errors.Is(err, ErrNotHashable) {
		t.Errorf("Report of an unhashable message: %v, want ErrNotHashable", err)
	}
	if err := r.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	for msg, want := range map[string]bool{"spam one": true, "ham": false} {
		got, err := r.Check(ctx, []byte(msg))
		if err != nil || got != want {
			t.Errorf("Check(%q) = %v, %v; want %v", msg, got, err, want)
		}
	}
	fo := NewRspamd(Rspamd{Scanner: addr, Controller: addr, Settings: FuzzyOnly, Label: "fuzzy only"}, 1)
	if got, err := fo.Check(ctx, []byte("spam one")); err != nil || !got || fo.Name() != "fuzzy only" {
		t.Errorf("fuzzy-only Check = %v, %v (%s)", got, err, fo.Name())
	}
	bad := NewRspamd(Rspamd{Scanner: addr, Controller: addr, Flag: 3}, 1)
	if err := bad.Report(ctx, []byte("x")); err == nil || errors.Is(err, ErrNotHashable) {
		t.Errorf("Report with a refused flag: %v, want an HTTP error", err)
	}
}

func TestHasSymbol(t *testing.T) {
	tests := []struct {
		body    string
		want    bool
		wantErr bool
	}{
		{`{"symbols":{"LOCAL_FUZZY_DENIED":{}}}`, true, false},
		{`{"symbols":{"OTHER":{}}}`, false, false},
		{`{"symbols":{}}`, false, false},
		{`{"error":"bad"}`, false, true},
		{`not json`, false, true},
	}
	for _, tt := range tests {
		got, err := hasSymbol([]byte(tt.body), "LOCAL_FUZZY_DENIED")
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("hasSymbol(%s) = %v, %v", tt.body, got, err)
		}
	}
}

// memDetector flags exact copies of reported messages.
type memDetector struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (m *memDetector) Name() string { return "exact" }
func (m *memDetector) Report(_ context.Context, raw []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[string(raw)] = true
	return nil
}
func (m *memDetector) Check(_ context.Context, raw []byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[string(raw)], nil
}
func (m *memDetector) Settle(context.Context) error { return nil }
func (m *memDetector) Close() error                 { return nil }

// TestRunAndTables runs the whole protocol with a trivial detector over a
// small synthetic corpus (real parser, real spamgen) and checks the tables.
func TestRunAndTables(t *testing.T) {
	var msgs []Message
	for i := range 20 {
		body := fmt.Sprintf("Limited offer number %d: genuine replica watches, discount pharmacy, "+
			"wonderful opportunity for investors wanting incredible returns today. Reply quickly.", i%5)
		msgs = append(msgs, Message{Path: fmt.Sprintf("spam/%d", i), Class: ClassSpam,
			Raw: spamgen.NewMessage("Great offer", body, false)})
	}
	for i := range 10 {
		body := fmt.Sprintf("Meeting notes %d: the committee discussed quarterly budget figures and hiring plans.", i)
		msgs = append(msgs, Message{Path: fmt.Sprintf("ham/%d", i), Class: ClassEasyHam,
			Raw: spamgen.NewMessage("Notes", body, false)})
	}
	opts := Options{Share: 0.25, Kinds: []spamgen.Kind{spamgen.Shuffle, spamgen.Typos}, SpeedRuns: 2, SpeedSample: 5, LatencySample: 5}
	s, err := Prepare(context.Background(), msgs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Split.Reported) != 5 || len(s.Copies) != 10 || len(s.BestCosine) != 25 {
		t.Fatalf("setup: %d reported, %d copies, %d truths", len(s.Split.Reported), len(s.Copies), len(s.BestCosine))
	}
	r, err := Run(context.Background(), s, &memDetector{seen: map[string]bool{}})
	if err != nil {
		t.Fatal(err)
	}
	// Spam bodies repeat every 5 messages with an identical rendering, so
	// exact copies of reported ones are in the checked set; ham never is.
	for k, i := range s.Split.Checked {
		if !msgs[i].IsSpam() && r.Checked[k] {
			t.Errorf("ham %s flagged", msgs[i].Path)
		}
		if r.Checked[k] && s.BestCosine[k] < 0.999 {
			t.Errorf("%s flagged as exact copy but best cosine %v", msgs[i].Path, s.BestCosine[k])
		}
	}
	if len(r.Speeds) != 2 || r.Learned != 5 || r.Errors != 0 {
		t.Errorf("result: %d speeds, %d learned, %d errors", len(r.Speeds), r.Learned, r.Errors)
	}
	var b strings.Builder
	WriteDetection(&b, s, []*Result{r, r})
	WriteSpeed(&b, s, []*Result{r, r})
	out := b.String()
	for _, want := range []string{"| spam |", "easy ham", "near-duplicates", "| shuffle |", "**all kinds**", "learn: reports/s", "1.0×"} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
}

func TestRatio(t *testing.T) {
	tests := []struct {
		a, b   float64
		higher bool
		want   string
	}{
		{200, 100, true, "2.0× (faster)"},
		{50, 100, true, "0.50× (slower)"},
		{1, 4, false, "0.25× (faster)"},
		{4, 1, false, "4.0× (slower)"},
		{0, 1, true, "–"},
	}
	for _, tt := range tests {
		if got := ratio(tt.a, tt.b, tt.higher); got != tt.want {
			t.Errorf("ratio(%v, %v, %v) = %q, want %q", tt.a, tt.b, tt.higher, got, tt.want)
		}
	}
}

func TestSplitMessage(t *testing.T) {
	raw := "Subject: hello\nX-Long: part one\n  part two\nnot a header line\nFrom:  a@b\n\nline 1\nline 2\r\n\nend"
	fields, body := SplitMessage([]byte(raw))
	want := [][2]string{{"Subject", "hello"}, {"X-Long", "part one\r\n  part two"}, {"From", " a@b"}}
	if !slices.Equal(fields, want) {
		t.Errorf("fields = %q, want %q", fields, want)
	}
	if string(body) != "line 1\r\nline 2\r\n\r\nend" {
		t.Errorf("body = %q", body)
	}
	if f, b := SplitMessage([]byte("Subject: only headers\n")); len(f) != 1 || len(b) != 0 {
		t.Errorf("headers only: %q %q", f, b)
	}
	if f, b := SplitMessage(nil); len(f) != 0 || len(b) != 0 {
		t.Errorf("empty: %q %q", f, b)
	}
}

// TestNDDMilterPath reports a message to nddmilter's real engine (Badger
// store, embedded lexicon and model) and checks copies through its real
// milter server with the same milter client that drives rspamd.
func TestNDDMilterPath(t *testing.T) {
	n, err := OpenNDD(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop, err := ServeNDDMilter(n)
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	d := &MilterCheck{Label: "nddmilter (milter)", Addr: addr, Learner: n, Flagged: NDDFlagged, Closer: stop}
	defer func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	spam := spamgen.NewMessage("Exclusive investment opportunity",
		"Dear friend, we offer an exclusive investment opportunity with guaranteed returns. "+
			"Our financial advisors have selected premium commodities for discerning investors. "+
			"Transfer your deposit today and watch your portfolio multiply within weeks. "+
			"Contact our representatives immediately, because this remarkable offer expires soon.\n\n"+
			"Remember that hesitation costs money: thousands of satisfied customers already enjoy "+
			"their wealth. Reply with your banking details and telephone number.", false)
	ham := spamgen.NewMessage("Minutes of the committee",
		"The committee reviewed the quarterly budget, approved the hiring plan for the library "+
			"and scheduled the next meeting for Thursday afternoon in the main building.", false)
	ctx := context.Background()
	if err := d.Report(ctx, spam); err != nil {
		t.Fatalf("Report: %v", err)
	}
	if err := d.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	copy1, err := spamgen.Mutate(spam, spamgen.Options{Kinds: []spamgen.Kind{spamgen.Shuffle}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		raw  []byte
		want bool
	}{"reported": {spam, true}, "shuffled copy": {copy1, true}, "ham": {ham, false}} {
		got, err := d.Check(ctx, tc.raw)
		if err != nil || got != tc.want {
			t.Errorf("%s: Check = %v, %v; want %v", name, got, err, tc.want)
		}
		direct, err := n.Check(ctx, tc.raw)
		if err != nil || direct != got {
			t.Errorf("%s: in-process Check = %v, %v; milter said %v", name, direct, err, got)
		}
	}
}

func TestFlaggedPredicates(t *testing.T) {
	accept := &gomilter.Action{Code: gomilter.ActAccept}
	hdr := func(name, value string) gomilter.ModifyAction {
		return gomilter.ModifyAction{Code: gomilter.ActAddHeader, HeaderName: name, HeaderValue: value}
	}
	rs := RspamdFlagged("LOCAL_FUZZY_DENIED")
	tests := []struct {
		name string
		f    func([]gomilter.ModifyAction, *gomilter.Action) bool
		mods []gomilter.ModifyAction
		act  *gomilter.Action
		want bool
	}{
		{"rspamd fuzzy", rs, []gomilter.ModifyAction{hdr("X-Spamd-Result", "default: False [9.7 / 10000.0];\r\n\tLOCAL_FUZZY_DENIED(8.76)[11:796c0bff56:1.00:txt]")}, accept, true},
		{"rspamd other symbols", rs, []gomilter.ModifyAction{hdr("X-Spamd-Result", "default: False [1.0 / 10000.0]; DATE_IN_PAST(1.00)")}, accept, false},
		{"rspamd no header", rs, nil, accept, false},
		{"ndd accept", NDDFlagged, []gomilter.ModifyAction{hdr("X-NDD-Verdict", "accept")}, accept, false},
		{"ndd tag", NDDFlagged, []gomilter.ModifyAction{hdr("X-NDD-Verdict", "tag"), hdr("X-NDD-Campaign", "7")}, accept, true},
		{"ndd quarantine", NDDFlagged, []gomilter.ModifyAction{{Code: gomilter.ActQuarantine, Reason: "x"}}, accept, true},
		{"ndd reject", NDDFlagged, nil, &gomilter.Action{Code: gomilter.ActReplyCode, SMTPCode: 550}, true},
	}
	for _, tt := range tests {
		if got := tt.f(tt.mods, tt.act); got != tt.want {
			t.Errorf("%s: flagged = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseReportSummary(t *testing.T) {
	tests := []struct {
		out        string
		used, lost int
	}{
		{`{"kind":"spam","messages_read":10,"skipped":{"no signature":2},"errors":1}`, 7, 3},
		{`{"kind":"spam","messages_read":5,"skipped":{},"errors":0}` + "\n", 5, 0},
		{`not json`, 4, 0},
		{``, 4, 0},
	}
	for _, tt := range tests {
		used, lost := parseReportSummary([]byte(tt.out), 4)
		if used != tt.used || lost != tt.lost {
			t.Errorf("parseReportSummary(%q) = %d, %d; want %d, %d", tt.out, used, lost, tt.used, tt.lost)
		}
	}
}
