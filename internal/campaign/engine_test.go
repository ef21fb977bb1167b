package campaign

import (
	"context"
	"errors"
	"fmt"
	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Campaign texts used by the tests: long enough for every signature.
var campaignTexts = []struct{ subject, body string }{
	{
		"Exclusive offer: refinance your mortgage at record low rates",
		`Dear homeowner, our records indicate that you may qualify for a substantially lower monthly payment on your current mortgage. Interest rates have fallen to historic lows and thousands of families are already saving hundreds of dollars every month.

Our licensed advisors compare offers from dozens of national lenders in minutes. There is no obligation, no hidden fee and your credit score will not be affected by requesting a personal quote today.

Approval takes less than two days for most applicants. Simply visit our secure website, answer a few short questions about your property and your income, and a specialist will contact you with several tailored proposals.

This invitation expires at the end of the week. Do not miss the chance to lower your payments, consolidate expensive debts and finally keep more money in your pocket every single month.`,
	},
	{
		"Your account has been selected for a luxury watch giveaway",
		`Congratulations! Your email address was randomly chosen among our loyal customers to receive a genuine Swiss luxury chronograph, absolutely free of charge, as part of our anniversary celebration.

To claim your reward you only need to confirm your shipping details and cover a small handling fee. Quantities are strictly limited and unclaimed prizes will be offered to the next winner on our waiting list.

Every timepiece comes with a certificate of authenticity, a premium leather strap, sapphire crystal glass and water resistance up to one hundred meters. Retail value exceeds three thousand dollars.

Click the confirmation button below within forty eight hours. After this deadline your reservation will be cancelled automatically and the watch will be given to another participant.`,
	},
	{
		"Lose weight fast with this natural miracle supplement",
		`Doctors are stunned by a natural formula that melts stubborn belly fat without dieting or exercise. Thousands of satisfied customers report dramatic results within the very first weeks of treatment.

The secret is a rare tropical fruit extract combined with green tea, ginger and powerful antioxidants that boost your metabolism and suppress cravings throughout the entire day.

Order today and receive three bottles for the price of one, plus free express shipping worldwide. Every purchase is protected by our unconditional ninety day money back guarantee.

Supplies are running low because of overwhelming demand from celebrities and athletes. Reserve your package now before the special introductory price disappears forever.`,
	},
}

func baseMessage(i int) []byte {
	c := campaignTexts[i%len(campaignTexts)]
	return spamgen.NewMessage(c.subject, c.body, false)
}

// copyOf returns a lightly randomized copy of campaign i.
func copyOf(t testing.TB, i int, seed uint64, kinds ...spamgen.Kind) []byte {
	t.Helper()
	if len(kinds) == 0 {
		kinds = []spamgen.Kind{spamgen.Reencode}
	}
	b, err := spamgen.Mutate(baseMessage(i), spamgen.Options{Kinds: kinds, Seed: seed, Strength: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	resOnce sync.Once
	resLex  *imatchbag.Lexicon
	resMod  *andd.Model
	resErr  error
)

func resources(t testing.TB) (*imatchbag.Lexicon, *andd.Model) {
	t.Helper()
	resOnce.Do(func() {
		resLex, resErr = imatchbag.DefaultLexicon()
		if resErr == nil {
			resMod, resErr = andd.DefaultModel()
		}
	})
	if resErr != nil {
		t.Fatalf("load lexicon/model: %v", resErr)
	}
	return resLex, resMod
}

// testClock is a settable clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	eng   *Engine
	st    *store.Badger
	clock *testClock
	ctx   context.Context
}

func newFixture(t testing.TB, opts Options) *fixture {
	t.Helper()
	clock := &testClock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	st, err := store.Open(t.TempDir(), store.Options{Now: clock.Now})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	lex, mod := resources(t)
	if opts.Clock == nil {
		opts.Clock = clock.Now
	}
	eng, err := New(st, lex, mod, opts, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &fixture{eng: eng, st: st, clock: clock, ctx: context.Background()}
}

func (f *fixture) report(t testing.TB, raw []byte, kind store.Kind, reporter string) ReportOutcome {
	t.Helper()
	o, err := f.eng.Ingester.Report(f.ctx, raw, kind, reporter)
	if err != nil {
		t.Fatalf("Report(%s): %v", reporter, err)
	}
	return o
}

// sign is the engine's pipeline.Sign of a message.
func (f *fixture) sign(raw []byte) (*pipeline.Message, error) {
	return f.eng.Checker.pipe.Sign(f.ctx, raw)
}

func (f *fixture) check(t testing.TB, raw []byte) Verdict {
	t.Helper()
	v, err := f.eng.Checker.Check(f.ctx, raw)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return v
}

func TestEngineReportAndCheck(t *testing.T) {
	f := newFixture(t, Options{})
	v := f.check(t, baseMessage(0))
	if v.Action != action.Accept || v.Campaign != 0 || !strings.Contains(v.Rule, "no campaign matched") {
		t.Fatalf("empty store: %+v", v)
	}
	o := f.report(t, copyOf(t, 0, 1), store.KindSpam, "alice")
	if !o.Created || o.Campaign == 0 || o.Skipped != "" {
		t.Fatalf("first report: %+v", o)
	}
	id := o.Campaign
	// One reporter: at most tag.
	v = f.check(t, copyOf(t, 0, 2))
	if v.Campaign != id || v.Action != action.Tag {
		t.Fatalf("after one report: %+v", v)
	}
	for i, r := range []string{"bob", "carol", "dave", "erin"} {
		o := f.report(t, copyOf(t, 0, uint64(10+i)), store.KindSpam, r)
		if o.Created || o.Campaign != id || len(o.Joined) == 0 {
			t.Fatalf("report by %s: %+v", r, o)
		}
	}
	v = f.check(t, copyOf(t, 0, 99, spamgen.Typos))
	if v.Campaign != id || v.Action != action.Reject {
		t.Fatalf("after five reporters: %+v", v)
	}
	if !strings.HasPrefix(v.Rule, "reject: p=") || !strings.Contains(v.Rule, "cost_fp.reject=100") ||
		!strings.Contains(v.Rule, "5 spam/0 not-spam reporters") {
		t.Errorf("rule %q", v.Rule)
	}
	if v.Score <= 0.9989 || v.Score > 1 {
		t.Errorf("score %v", v.Score)
	}
	// An exact copy shows both families of evidence.
	v = f.check(t, baseMessage(0))
	var fam = map[string]int{}
	for _, ev := range v.Evidence {
		fam[ev.Family]++
		if len(ev.Key) == 0 || strings.Trim(ev.Key, "0123456789abcdef") != "" {
			t.Errorf("evidence key %q is not hex", ev.Key)
		}
		if ev.Similarity <= 0 || ev.Similarity > 1 {
			t.Errorf("evidence similarity %v", ev.Similarity)
		}
	}
	if fam[FamilyIMatch] < 2 || fam[FamilyANDD] != 1 {
		t.Errorf("evidence of an exact copy: %+v", v.Evidence)
	}
	// A different campaign does not match.
	v = f.check(t, baseMessage(1))
	if v.Action != action.Accept || v.Campaign != 0 {
		t.Errorf("other campaign: %+v", v)
	}
	// Hits are counted.
	f.st.FlushHits(f.ctx)
	c, err := f.st.Get(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c.Messages != 3 || c.Actions["reject"] != 2 || c.Actions["tag"] != 1 || c.SpamReporters != 5 {
		t.Errorf("campaign record: messages %d actions %v reporters %d", c.Messages, c.Actions, c.SpamReporters)
	}
	// Evaluate does not count.
	if _, err := f.eng.Checker.Evaluate(f.ctx, copyOf(t, 0, 3)); err != nil {
		t.Fatal(err)
	}
	f.st.FlushHits(f.ctx)
	if c2, _ := f.st.Get(f.ctx, id); c2.Messages != 3 {
		t.Errorf("Evaluate counted a hit: %d", c2.Messages)
	}
}

func TestEngineReporterFlooding(t *testing.T) {
	f := newFixture(t, Options{})
	var id store.CampaignID
	for i := range 20 {
		// Distinct messages (their own Message-ID): the same one again
		// would count once (TestEngineSameMessageOnce).
		o := f.report(t, withMessageID(copyOf(t, 1, uint64(i)), i), store.KindSpam, "mallory")
		if i == 0 {
			id = o.Campaign
		} else if !o.Repeated || o.Campaign != id {
			t.Fatalf("report %d: %+v", i, o)
		}
	}
	for i := range 50 {
		f.check(t, copyOf(t, 1, uint64(100+i)))
	}
	v := f.check(t, baseMessage(1))
	if v.Campaign != id || v.Action > action.Tag {
		t.Fatalf("one reporter flooding: %+v", v)
	}
	c, _ := f.st.Get(f.ctx, id)
	if c.SpamReporters != 1 || c.SpamReports != 20 {
		t.Errorf("reporters %d reports %d", c.SpamReporters, c.SpamReports)
	}
}

func TestEngineRevocation(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.report(t, copyOf(t, 2, 1), store.KindSpam, "alice").Campaign
	f.report(t, copyOf(t, 2, 2), store.KindSpam, "bob")
	if v := f.check(t, baseMessage(2)); v.Action != action.Tag {
		t.Fatalf("two reporters: %+v", v)
	}
	o := f.report(t, copyOf(t, 2, 3), store.KindHam, "henry")
	if o.Campaign != id || o.Created || o.Revoked {
		t.Fatalf("first ham: %+v", o)
	}
	if v := f.check(t, baseMessage(2)); v.Action != action.Accept || v.Campaign != id || !strings.Contains(v.Rule, "2 spam/1 not-spam") {
		t.Fatalf("after one ham report: %+v", v)
	}
	// The same ham reporter again does not revoke.
	if o := f.report(t, copyOf(t, 2, 4), store.KindHam, "henry"); o.Revoked || !o.Repeated {
		t.Fatalf("repeated ham: %+v", o)
	}
	o = f.report(t, copyOf(t, 2, 5), store.KindHam, "irene")
	if !o.Revoked {
		t.Fatalf("second ham reporter did not revoke: %+v", o)
	}
	c, _ := f.st.Get(f.ctx, id)
	if c.State != store.StateRevoked {
		t.Fatalf("state %v", c.State)
	}
	// Even many more spam reports do not act on a revoked campaign.
	for _, r := range []string{"r1", "r2", "r3", "r4", "r5", "r6"} {
		f.report(t, copyOf(t, 2, 6), store.KindSpam, r)
	}
	v := f.check(t, baseMessage(2))
	if v.Action != action.Accept || !strings.Contains(v.Rule, "revoked") {
		t.Fatalf("revoked: %+v", v)
	}
	// A ham report matching nothing changes nothing.
	if o := f.report(t, baseMessage(0), store.KindHam, "henry"); o.Campaign != 0 || o.Created {
		t.Errorf("ham on nothing: %+v", o)
	}
}

func TestEngineAllowed(t *testing.T) {
	f := newFixture(t, Options{})
	var id store.CampaignID
	for i, r := range []string{"a", "b", "c", "d", "e", "f"} {
		id = f.report(t, copyOf(t, 0, uint64(i)), store.KindSpam, r).Campaign
	}
	if v := f.check(t, baseMessage(0)); v.Action != action.Reject {
		t.Fatalf("before allow: %+v", v)
	}
	if err := f.eng.Ingester.SetState(f.ctx, id, store.StateAllowed); err != nil {
		t.Fatal(err)
	}
	v := f.check(t, baseMessage(0))
	if v.Action != action.Accept || v.Campaign != id || !strings.Contains(v.Rule, "allowed by an administrator") {
		t.Fatalf("allowed: %+v", v)
	}
	if err := f.eng.Ingester.SetState(f.ctx, id, store.StateActive); err != nil {
		t.Fatal(err)
	}
	if v := f.check(t, baseMessage(0)); v.Action != action.Reject {
		t.Fatalf("after undo: %+v", v)
	}
}

func TestEngineExpiry(t *testing.T) {
	f := newFixture(t, Options{Expiry: 30 * 24 * time.Hour})
	a := f.report(t, baseMessage(0), store.KindSpam, "alice").Campaign
	b := f.report(t, baseMessage(1), store.KindSpam, "alice").Campaign
	f.clock.Add(20 * 24 * time.Hour)
	// A hit on b refreshes it.
	if v := f.check(t, baseMessage(1)); v.Campaign != b {
		t.Fatalf("hit: %+v", v)
	}
	if err := f.st.FlushHits(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(11 * 24 * time.Hour)
	n, err := f.eng.Ingester.Expire(f.ctx)
	if err != nil || n != 1 {
		t.Fatalf("Expire = %d, %v; want 1", n, err)
	}
	if _, err := f.st.Get(f.ctx, a); err == nil {
		t.Errorf("campaign %d survived expiry", a)
	}
	if v := f.check(t, baseMessage(0)); v.Campaign != 0 || v.Action != action.Accept {
		t.Errorf("expired campaign still matches: %+v", v)
	}
	if v := f.check(t, baseMessage(1)); v.Campaign != b {
		t.Errorf("refreshed campaign lost: %+v", v)
	}
}

// Two campaigns holding different signatures of one message are merged by
// a report of that message.
func TestEngineMerge(t *testing.T) {
	f := newFixture(t, Options{})
	msg := copyOf(t, 0, 7)
	s, err := f.sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.IMatchKeys) < 4 {
		t.Fatalf("only %d I-Match keys", len(s.IMatchKeys))
	}
	var even, odd [][]byte
	for i, k := range s.IMatchKeys {
		if i%2 == 0 {
			even = append(even, k)
		} else {
			odd = append(odd, k)
		}
	}
	mk := func(keys [][]byte, who string) store.CampaignID {
		r, err := f.st.Report(f.ctx, store.ReportInput{Time: f.clock.Now(), Kind: store.KindSpam, Reporter: who,
			Keys: keys, Create: true, Index: true, Subject: "part " + who})
		if err != nil || !r.Created {
			t.Fatalf("store.Report: %+v %v", r, err)
		}
		return r.Campaign
	}
	a, b := mk(even, "x"), mk(odd, "y")
	v := f.check(t, msg)
	if v.Campaign != a && v.Campaign != b || !strings.Contains(v.Rule, "2 campaigns matched") {
		t.Fatalf("check before merge: %+v", v)
	}
	o := f.report(t, msg, store.KindSpam, "z")
	if o.Created || o.Campaign != a || len(o.Merged) != 1 || o.Merged[0] != b || len(o.Joined) != 2 {
		t.Fatalf("merge report: %+v", o)
	}
	if _, err := f.st.Get(f.ctx, b); err == nil {
		t.Errorf("merged campaign %d still exists", b)
	}
	c, err := f.st.Get(f.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if c.SpamReporters != 3 {
		t.Errorf("merged reporters = %d, want 3", c.SpamReporters)
	}
	v = f.check(t, msg)
	if v.Campaign != a || strings.Contains(v.Rule, "campaigns matched") {
		t.Errorf("check after merge: %+v", v)
	}
}

// A campaign known only by its ANDD sketch is found through band keys and
// verified by cosine; the report of a near copy joins it.
func TestEngineANDDOnly(t *testing.T) {
	f := newFixture(t, Options{})
	if f.eng.Checker.andd == nil {
		t.Skip("no ANDD model")
	}
	base := baseMessage(1)
	s, err := f.sign(base)
	if err != nil || !s.HasSketch() {
		t.Fatalf("sign: %v (sketch %v)", err, s != nil && s.HasSketch())
	}
	r, err := f.st.Report(f.ctx, store.ReportInput{Time: f.clock.Now(), Kind: store.KindSpam, Reporter: "x",
		Keys: s.BandKeys, Sketch: s.SketchBytes, Create: true, Index: true})
	if err != nil {
		t.Fatal(err)
	}
	v := f.check(t, copyOf(t, 1, 3, spamgen.Typos))
	if v.Campaign != r.Campaign {
		t.Fatalf("ANDD-only check: %+v", v)
	}
	if len(v.Evidence) != 1 || v.Evidence[0].Family != FamilyANDD || v.Evidence[0].Similarity < f.eng.Checker.ANDDThreshold() {
		t.Fatalf("evidence %+v (threshold %v)", v.Evidence, f.eng.Checker.ANDDThreshold())
	}
	// A near copy of the campaign's sketch joins it (merge.go).
	o := f.report(t, copyOf(t, 1, 4, spamgen.Typos), store.KindSpam, "y")
	if o.Created || o.Campaign != r.Campaign {
		t.Fatalf("report did not join the ANDD campaign: %+v", o)
	}
}

func TestEngineARF(t *testing.T) {
	f := newFixture(t, Options{})
	orig := baseMessage(2)
	arf := "From: abuse@isp.example\r\nTo: postmaster@example.org\r\nSubject: FW: spam report\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/report; report-type=feedback-report; boundary=\"b1\"\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain\r\n\r\nThis is an email abuse report.\r\n" +
		"--b1\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\nUser-Agent: test/1.0\r\nVersion: 1\r\n\r\n" +
		"--b1\r\nContent-Type: message/rfc822\r\n\r\n" + strings.ReplaceAll(string(orig), "\r\n", "\n") + "\r\n--b1--\r\n"
	o := f.report(t, []byte(arf), store.KindSpam, "isp")
	if !o.ARF || !o.Created {
		t.Fatalf("ARF report: %+v", o)
	}
	c, err := f.st.Get(f.ctx, o.Campaign)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.SampleSubject, "mortgage") && !strings.Contains(c.SampleSubject, "supplement") {
		t.Errorf("sample subject %q is not the attached message's", c.SampleSubject)
	}
	if v := f.check(t, orig); v.Campaign != o.Campaign {
		t.Errorf("original does not match the ARF-reported campaign: %+v", v)
	}
}

func TestEngineTooShort(t *testing.T) {
	f := newFixture(t, Options{})
	for _, raw := range []string{
		"Subject: hi\r\n\r\nok thanks\r\n",
		"",
		"\x00\xff garbage",
	} {
		o := f.report(t, []byte(raw), store.KindSpam, "a")
		if !strings.HasPrefix(o.Skipped, "too short for a signature (") || o.Skip != SkipTooShort || o.Campaign != 0 {
			t.Errorf("%q: %+v", raw, o)
		}
		v := f.check(t, []byte(raw))
		if v.Action != action.Accept || !strings.Contains(v.Rule, "no signature") || v.Skip == nil || v.Skip.Reason != SkipTooShort {
			t.Errorf("%q: check %+v", raw, v)
		}
	}
	if cs, _ := f.st.List(f.ctx, store.Query{}); len(cs) != 0 {
		t.Errorf("%d campaigns created from too-short messages", len(cs))
	}
}

func TestEngineManyCampaignsIsolation(t *testing.T) {
	f := newFixture(t, Options{})
	ids := map[store.CampaignID]int{}
	for i := range campaignTexts {
		o := f.report(t, baseMessage(i), store.KindSpam, fmt.Sprint("r", i))
		if !o.Created {
			t.Fatalf("campaign %d: %+v", i, o)
		}
		ids[o.Campaign] = i
	}
	for id, i := range ids {
		if v := f.check(t, copyOf(t, i, 42)); v.Campaign != id {
			t.Errorf("copy of campaign %d matched %d (%s)", i, v.Campaign, v.Rule)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	f := newFixture(b, Options{})
	// Some campaigns: every text, a few randomized variants reported each.
	for i := range campaignTexts {
		for j := range 5 {
			f.report(b, copyOf(b, i, uint64(j), spamgen.Combo), store.KindSpam, fmt.Sprint("r", j))
		}
	}
	msg := copyOf(b, 0, 1234, spamgen.Typos)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := f.eng.Checker.Check(f.ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckSigned is Check without parsing and signing (the mime,
// imatchbag and andd packages have their own benchmarks): the store
// lookup, the verification of band hits, the policy and the verdict, on a
// campaign copy (allocations and CPU of the engine's own path).
func BenchmarkCheckSigned(b *testing.B) {
	f := newFixture(b, Options{})
	for i := range campaignTexts {
		for j := range 5 {
			f.report(b, copyOf(b, i, uint64(j), spamgen.Combo), store.KindSpam, fmt.Sprint("r", j))
		}
	}
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"copy", copyOf(b, 0, 1234, spamgen.Typos)},
		{"legitimate", spamgen.NewMessage("Minutes of the Tuesday meeting",
			"Dear team, attached are the minutes of Tuesday's planning meeting. We agreed to move the "+
				"release review to Thursday afternoon, Maria will prepare the budget figures for the third "+
				"quarter and Tom will check the contract renewal with the landlord before the end of the month. "+
				"Please send corrections by Friday so that the final version can go to the board.", false)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := f.sign(tc.msg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.eng.Checker.decide(f.ctx, s, false, CheckOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestEngineReportBatch(t *testing.T) {
	f := newFixture(t, Options{})
	var reqs []ReportRequest
	for i := range 12 {
		reqs = append(reqs, ReportRequest{Raw: copyOf(t, i%3, uint64(i)), Kind: store.KindSpam, Reporter: fmt.Sprint("r", i)})
	}
	reqs = append(reqs,
		ReportRequest{Raw: []byte("Subject: hi\r\n\r\nok\r\n"), Kind: store.KindSpam, Reporter: "x"},
		ReportRequest{Raw: baseMessage(0), Kind: store.KindHam, Reporter: "h1"},
		ReportRequest{Raw: baseMessage(0), Kind: store.KindHam, Reporter: "h2"},
	)
	outs, err := f.eng.Ingester.ReportBatch(f.ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != len(reqs) {
		t.Fatalf("%d outcomes for %d reports", len(outs), len(reqs))
	}
	created := map[store.CampaignID]int{}
	for i, o := range outs[:12] {
		if o.Created {
			created[o.Campaign] = i % 3
		} else if o.Campaign == 0 || created[o.Campaign] != i%3 {
			t.Errorf("report %d: %+v (created %v)", i, o, created)
		}
	}
	if len(created) != 3 {
		t.Errorf("%d campaigns created, want 3", len(created))
	}
	if outs[12].Skipped == "" {
		t.Errorf("short message: %+v", outs[12])
	}
	// The campaign is revoked once (both ham reports are applied before
	// the revocation check of the batch).
	if outs[13].Revoked == outs[14].Revoked || outs[14].Campaign == 0 {
		t.Errorf("ham reports: %+v %+v", outs[13], outs[14])
	}
	c, err := f.st.Get(f.ctx, outs[0].Campaign)
	if err != nil || c.SpamReporters != 4 || c.HamReporters != 2 || c.State != store.StateRevoked {
		t.Errorf("campaign after batch: %+v %v", c, err)
	}
}

// Concurrent reports of a new campaign end in one campaign; concurrent
// checks see it.
func TestEngineConcurrent(t *testing.T) {
	// The checks before the campaign exists count its sender as a sender
	// of accepted mail: no graymail sign from it here (graymail.go).
	f := newFixture(t, Options{Policy: Policy{GraymailHamMessages: 1 << 40}})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 5 {
				if _, err := f.eng.Ingester.Report(f.ctx, withMessageID(copyOf(t, 0, uint64(g*10+i)), g*10+i), store.KindSpam, fmt.Sprint("r", g)); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range 10 {
				if _, err := f.eng.Checker.Check(f.ctx, copyOf(t, 0, uint64(100+g*10+i))); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	cs, err := f.st.List(f.ctx, store.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].SpamReporters != 4 || cs[0].SpamReports != 20 {
		t.Fatalf("campaigns after concurrent reports: %+v", cs)
	}
	if v := f.check(t, baseMessage(0)); v.Campaign != cs[0].ID || v.Action != action.Quarantine {
		t.Errorf("check: %+v", v)
	}
}

// benchReports returns n randomized copies of the test campaigns, each
// with its own reporter among 50.
func benchReports(b *testing.B, n int) []ReportRequest {
	reqs := make([]ReportRequest, n)
	for i := range reqs {
		reqs[i] = ReportRequest{Raw: copyOf(b, i%len(campaignTexts), uint64(i), spamgen.Combo), Kind: store.KindSpam, Reporter: fmt.Sprint("r", i%50)}
	}
	return reqs
}

// BenchmarkReport is one report at a time (each durable on its own).
func BenchmarkReport(b *testing.B) {
	f := newFixture(b, Options{})
	reqs := benchReports(b, 512)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		r := reqs[i%len(reqs)]
		if _, err := f.eng.Ingester.Report(f.ctx, r.Raw, r.Kind, r.Reporter); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkReportBatch is bulk ingestion (nddmilter report): ns/op is per
// message, in batches of 256.
func BenchmarkReportBatch(b *testing.B) {
	f := newFixture(b, Options{})
	reqs := benchReports(b, 256)
	b.ResetTimer()
	n := 0
	for b.Loop() {
		if _, err := f.eng.Ingester.ReportBatch(f.ctx, reqs); err != nil {
			b.Fatal(err)
		}
		n += len(reqs)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/msg")
}

// A report that fails stops the batch: the ones before it are applied.
func TestEngineReportBatchError(t *testing.T) {
	f := newFixture(t, Options{})
	reqs := []ReportRequest{
		{Raw: baseMessage(0), Kind: store.KindSpam, Reporter: "a"},
		{Raw: []byte("Subject: x\r\n\r\nshort\r\n"), Kind: store.KindSpam, Reporter: "a"},
		{Raw: baseMessage(1), Kind: store.KindSpam, Reporter: "a"},
		{Raw: baseMessage(2), Kind: store.Kind(9), Reporter: "a"},
		{Raw: baseMessage(2), Kind: store.KindSpam, Reporter: "a"},
	}
	outs, err := f.eng.Ingester.ReportBatch(f.ctx, reqs)
	if err == nil || !strings.Contains(err.Error(), "report 3") || len(outs) != 3 {
		t.Fatalf("outs %+v, err %v", outs, err)
	}
	var be *BatchError
	if !errors.As(err, &be) || be.Index != 3 {
		t.Errorf("error %v: want a *BatchError at report 3", err)
	}
	if !outs[0].Created || outs[1].Skipped == "" || !outs[2].Created {
		t.Errorf("outcomes %+v", outs)
	}
	if cs, _ := f.st.List(f.ctx, store.Query{}); len(cs) != 2 {
		t.Errorf("%d campaigns, want 2", len(cs))
	}
}

// CheckWith's cap (the milter's per-recipient overrides) lowers the
// action, says so in the rule, and the campaign counts the action taken.
func TestEngineCheckWithCap(t *testing.T) {
	f := newFixture(t, Options{})
	var id store.CampaignID
	for i, r := range []string{"alice", "bob", "carol", "dave", "erin"} {
		id = f.report(t, copyOf(t, 0, uint64(10+i)), store.KindSpam, r).Campaign
	}
	tests := []struct {
		name string
		o    CheckOptions
		want action.Action
		rule string
	}{
		{"no cap", CheckOptions{}, action.Reject, ""},
		{"cap without a reason is ignored", CheckOptions{MaxAction: action.Tag}, action.Reject, ""},
		{"capped to tag", CheckOptions{MaxAction: action.Tag, CapBy: "milter.overrides example.org"}, action.Tag, "; reject capped to tag by milter.overrides example.org"},
		{"capped to accept", CheckOptions{MaxAction: action.Accept, CapBy: "milter.overrides abuse@example.org"}, action.Accept, "; reject capped to accept by milter.overrides abuse@example.org"},
		{"cap above the verdict", CheckOptions{MaxAction: action.Reject, CapBy: "milter.overrides example.net"}, action.Reject, ""},
		{"rejects deferred", CheckOptions{DeferRejects: true}, action.Reject, "; deferred with a 4xx reply (milter.reject_with: tempfail)"},
		{"capped, so not deferred", CheckOptions{MaxAction: action.Tag, CapBy: "milter.overrides example.org", DeferRejects: true}, action.Tag, "; reject capped to tag by milter.overrides example.org"},
	}
	for _, tt := range tests {
		v, err := f.eng.Checker.CheckWith(f.ctx, copyOf(t, 0, 99), tt.o)
		if err != nil {
			t.Fatal(err)
		}
		if v.Action != tt.want || v.Campaign != id {
			t.Errorf("%s: %v campaign %d, want %v campaign %d", tt.name, v.Action, v.Campaign, tt.want, id)
		}
		if tt.rule != "" && !strings.HasSuffix(v.Rule, tt.rule) || tt.rule == "" && strings.Contains(v.Rule, "capped") {
			t.Errorf("%s: rule %q", tt.name, v.Rule)
		}
	}
	c, err := f.eng.Reader.Get(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c.Actions["reject"] != 3 || c.Actions["tag"] != 2 || c.Actions["accept"] != 1 || c.Actions["tempfail"] != 1 {
		t.Errorf("actions counted %v, want reject 3, tag 2, accept 1, tempfail 1", c.Actions)
	}
}
