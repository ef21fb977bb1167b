package campaign

// Regression tests for campaign-merge poisoning (docs/SECURITY.md, "What
// one reporter can do"): one account crafting reports must not make
// another campaign's reporters count for a message it did not report, nor
// undo an administrator's decision. They use the engine as the daemon
// does: New, Report, Check/Evaluate and SetState over a real Badger store.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/store"
)

// legitTexts are legitimate bulk mail: newsletters and notices a single
// account might try to get rejected for everyone.
var legitTexts = []struct{ subject, body string }{
	{
		"Riverside Gardening Club newsletter: November",
		`Welcome to the November issue of the Riverside Gardening Club newsletter. The autumn plant swap in the community hall was our busiest yet, with more than sixty members trading cuttings, bulbs and seedlings.

Our next monthly meeting takes place on the second Thursday at seven in the evening. Margaret will talk about pruning roses and fruit trees before the first frosts, and there will be tea and homemade cake afterwards.

The allotment committee reminds plot holders that the water supply will be switched off at the end of the month to protect the pipes. Please collect your tools from the shared shed before the locks are changed.

Membership renewals for next year are now open. The annual fee remains unchanged and includes the seed catalogue discount, the spring coach trip to the botanical gardens and access to the lending library of gardening books.`,
	},
	{
		"Northfield Library: events and opening hours this winter",
		`The Northfield public library announces its programme of events for the winter season. Story time for toddlers continues every Tuesday and Friday morning in the children's corner on the ground floor.

A series of evening lectures on local history begins next month, starting with the construction of the canal and the old textile mills along the river. Admission is free but places are limited, so please reserve at the front desk.

During the holidays the library will close early on the twenty fourth and remain closed on the twenty fifth and twenty sixth. Books may still be returned through the drop box next to the main entrance at any time.

Volunteers are needed to help with the reading programme for adults learning English. Training is provided, and a commitment of two hours each week is all we ask of our helpers.`,
	},
	{
		"Hillcrest Primary School parents bulletin",
		`Dear parents and guardians, thank you for attending the harvest assembly last week. The children collected over two hundred tins and packets for the food bank, which the volunteers delivered on Saturday.

Parent teacher consultations will take place in the week after half term. An appointment letter with available times will come home in book bags, and you can also book a slot through the school office.

Please remember that the playground gates open at eight forty five and that children should bring a named water bottle and a warm coat every day now that the weather is turning colder.

The winter concert rehearsals start on Monday. Year four pupils will need a plain white shirt and dark trousers or skirt for the performance, which will be held in the church hall on the last Wednesday of term.`,
	},
	{
		"Community orchestra: rehearsal schedule and concert tickets",
		`The community orchestra will rehearse every Wednesday evening in the assembly rooms until the spring concert. Section leaders ask all players to practise the slow movement of the symphony carefully before the next session.

Tickets for the concert are now on sale at the music shop on the high street and at the door on the evening. Children under twelve are admitted free when accompanied by an adult.

We are still looking for a second bassoon and two violas. Anyone who plays and would like to join us is welcome to come along to a rehearsal and meet the conductor during the interval.

Thanks to a grant from the arts council we have been able to repair the timpani and buy new music stands, which will make the rehearsals in the cold hall a little more comfortable.`,
	},
}

func legitMessage(i int) []byte {
	c := legitTexts[i%len(legitTexts)]
	return spamgen.NewMessage(c.subject, c.body, false)
}

// bodyOf returns the body text of campaign (spam i >= 0) or legit text
// (i < 0: legitTexts[-i-1]).
func bodyOf(i int) (subject, body string) {
	if i < 0 {
		c := legitTexts[(-i-1)%len(legitTexts)]
		return c.subject, c.body
	}
	c := campaignTexts[i%len(campaignTexts)]
	return c.subject, c.body
}

// concat builds a message with fresh headers whose body is the bodies of
// the given texts, one after the other (what the attacker sends).
func concat(subject string, texts ...int) []byte {
	var parts []string
	for _, i := range texts {
		_, b := bodyOf(i)
		parts = append(parts, b)
	}
	return spamgen.NewMessage(subject, strings.Join(parts, "\n\n"), false)
}

// bridge returns a crafted message with fresh headers made of the bodies
// of spam campaign s and legit text l (repeated so that neither dominates
// the ANDD weights) that matches both campaigns: the attack.
func (f *fixture) bridge(t testing.TB, subject string, s, l int) []byte {
	t.Helper()
	for seed := range uint64(40) {
		for _, parts := range [][]int{{s, l, l}, {s, l}, {l, s, s}, {l, s}, {s, l, l, l}, {s, s, l, l, l}} {
			m := concat(subject, parts...)
			if seed > 0 {
				var err error
				m, err = spamgen.Mutate(m, spamgen.Options{Kinds: []spamgen.Kind{spamgen.Shuffle}, Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
			}
			if v := f.evaluate(t, m); strings.Contains(v.Rule, "2 campaigns matched") {
				return m
			}
		}
	}
	t.Fatalf("no concatenation of texts %d and %d matches both campaigns", s, l)
	return nil
}

// legitCopy is a lightly randomized copy of legit text i.
func legitCopy(t testing.TB, i int, seed uint64) []byte {
	t.Helper()
	b, err := spamgen.Mutate(legitMessage(i), spamgen.Options{Kinds: []spamgen.Kind{spamgen.Reencode}, Seed: seed, Strength: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) evaluate(t testing.TB, raw []byte) Verdict {
	t.Helper()
	v, err := f.eng.Checker.Evaluate(f.ctx, raw)
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	return v
}

// spamWithReporters reports n copies of spam campaign i by n distinct
// honest users and returns its campaign.
func (f *fixture) spamWithReporters(t testing.TB, i, n int, who string) store.CampaignID {
	t.Helper()
	var id store.CampaignID
	for r := range n {
		o := f.report(t, copyOf(t, i, uint64(1000*i+r+1)), store.KindSpam, fmt.Sprintf("%s-%d", who, r))
		if id == 0 {
			id = o.Campaign
		} else if o.Campaign != id {
			t.Fatalf("honest report %d of campaign %d landed in %d (want %d): %+v", r, i, o.Campaign, id, o)
		}
	}
	if v := f.evaluate(t, copyOf(t, i, 77)); n >= 5 && v.Action != action.Reject {
		t.Fatalf("setup: spam campaign %d with %d reporters: %+v", i, n, v)
	}
	return id
}

// Attack 1: a spam campaign reported by 5 users, a newsletter reported
// once; one crafted report (the spam's body + the newsletter's body) must
// not give the newsletter the spam's reporters.
func TestPoisonNewsletterMerge(t *testing.T) {
	for _, order := range []string{"spam first", "newsletter first"} {
		t.Run(order, func(t *testing.T) {
			f := newFixture(t, Options{})
			var s, n store.CampaignID
			if order == "spam first" {
				s = f.spamWithReporters(t, 0, 5, "user")
				n = f.report(t, legitMessage(0), store.KindSpam, "mallory").Campaign
			} else {
				n = f.report(t, legitMessage(0), store.KindSpam, "mallory").Campaign
				s = f.spamWithReporters(t, 0, 5, "user")
			}
			if s == n || s == 0 || n == 0 {
				t.Fatalf("setup: campaigns %d and %d", s, n)
			}
			o := f.report(t, f.bridge(t, "Re: hello", 0, -1), store.KindSpam, "mallory")
			t.Logf("crafted report: %+v", o)
			if len(o.Merged) > 0 {
				t.Errorf("the crafted report merged %v into %d", o.Merged, o.Campaign)
			}
			v := f.check(t, legitCopy(t, 0, 5))
			if v.Action > action.Tag {
				t.Errorf("newsletter after the crafted report: %v (%s)", v.Action, v.Rule)
			}
			v = f.check(t, copyOf(t, 0, 6))
			if v.Action != action.Reject {
				t.Errorf("spam after the crafted report: %v (%s)", v.Action, v.Rule)
			}
		})
	}
}

// Attack 2: one crafted report bridging a 5-reporter spam campaign and a
// campaign an administrator allowed must neither accept the spam nor act
// on the allowed campaign, whichever campaign is older.
func TestPoisonAllowedMerge(t *testing.T) {
	for _, order := range []string{"allowed older", "spam older"} {
		t.Run(order, func(t *testing.T) {
			f := newFixture(t, Options{})
			var s, a store.CampaignID
			mkAllowed := func() store.CampaignID {
				id := f.report(t, legitMessage(2), store.KindSpam, "someone").Campaign
				if err := f.eng.Ingester.SetState(f.ctx, id, store.StateAllowed); err != nil {
					t.Fatal(err)
				}
				return id
			}
			if order == "allowed older" {
				a = mkAllowed()
				s = f.spamWithReporters(t, 1, 5, "user")
			} else {
				s = f.spamWithReporters(t, 1, 5, "user")
				a = mkAllowed()
			}
			o := f.report(t, f.bridge(t, "fwd", 1, -3), store.KindSpam, "mallory")
			t.Logf("crafted report: %+v", o)
			if len(o.Merged) > 0 {
				t.Errorf("the crafted report merged %v into %d", o.Merged, o.Campaign)
			}
			if v := f.check(t, copyOf(t, 1, 9)); v.Action != action.Reject || v.Campaign != s {
				t.Errorf("spam after the crafted report: %v campaign %d (want reject, %d): %s", v.Action, v.Campaign, s, v.Rule)
			}
			if v := f.check(t, legitCopy(t, 2, 9)); v.Action != action.Accept {
				t.Errorf("allowed newsletter after the crafted report: %v (%s)", v.Action, v.Rule)
			}
			for _, id := range []store.CampaignID{s, a} {
				c, err := f.st.Get(f.ctx, id)
				if err != nil {
					t.Fatalf("campaign %d: %v", id, err)
				}
				want := store.StateActive
				if id == a {
					want = store.StateAllowed
				}
				if c.State != want {
					t.Errorf("campaign %d state %d, want %d", id, c.State, want)
				}
			}
		})
	}
}

// Attack 3: three planted accounts bridge a 20-reporter spam campaign and
// an older revoked campaign: the spam must stay rejected, the revoked
// campaign accepted.
func TestPoisonRevokedMerge(t *testing.T) {
	f := newFixture(t, Options{})
	r := f.report(t, legitMessage(0), store.KindSpam, "confused").Campaign
	for _, u := range []string{"parent1", "parent2"} {
		f.report(t, legitCopy(t, 0, 3), store.KindHam, u)
	}
	if c, err := f.st.Get(f.ctx, r); err != nil || c.State != store.StateRevoked {
		t.Fatalf("setup: campaign %d not revoked: %+v %v", r, c, err)
	}
	s := f.spamWithReporters(t, 2, 20, "user")
	x := f.bridge(t, "note", 2, -1)
	for i := range 3 {
		o := f.report(t, x, store.KindSpam, fmt.Sprintf("planted-%d", i))
		t.Logf("crafted report %d: %+v", i, o)
		if len(o.Merged) > 0 {
			t.Errorf("crafted report %d merged %v into %d", i, o.Merged, o.Campaign)
		}
	}
	if v := f.check(t, copyOf(t, 2, 11)); v.Action != action.Reject || v.Campaign != s {
		t.Errorf("spam after the crafted reports: %v campaign %d (want reject, %d): %s", v.Action, v.Campaign, s, v.Rule)
	}
	if v := f.check(t, legitCopy(t, 0, 11)); v.Action != action.Accept {
		t.Errorf("revoked campaign after the crafted reports: %v (%s)", v.Action, v.Rule)
	}
	if c, err := f.st.Get(f.ctx, r); err != nil || c.State != store.StateRevoked {
		t.Errorf("campaign %d no longer revoked: %+v %v", r, c, err)
	}
}

// lexiconWords splits the words of text into those that are in the
// I-Match lexicons (primary or secondary) and the others.
func (f *fixture) lexiconWords(text string) (in, out []string) {
	toks := mime.Analyze(&mime.Document{Text: text}, f.eng.Checker.opts.Tokens).Sorted
	for _, w := range toks {
		if p, s := f.eng.Checker.imatch.Class(w); p || s {
			in = append(in, w)
		} else {
			out = append(out, w)
		}
	}
	return in, out
}

// smuggle builds a message whose I-Match words are those of legit text
// target and whose other words are those of spam campaign carrier: its
// I-Match signatures are (mostly) the target's, its ANDD sketch leans to
// the carrier.
func (f *fixture) smuggle(target, carrier int) []byte {
	_, tb := bodyOf(target)
	_, cb := bodyOf(carrier)
	in, _ := f.lexiconWords(tb)
	_, out := f.lexiconWords(cb)
	words := append(append([]string{}, in...), out...)
	rng := rand.New(rand.NewPCG(uint64(target+10), uint64(carrier+10)))
	rng.Shuffle(len(words), func(i, j int) { words[i], words[j] = words[j], words[i] })
	return spamgen.NewMessage("hi", strings.Join(words, " "), false)
}

func cosOf(a, b *pipeline.Message) float64 {
	if !a.HasSketch() || !b.HasSketch() {
		return -1
	}
	return andd.Cosine(a.Sketch, b.Sketch)
}

// mergeTrio returns three short messages (no ANDD sketch: fewer than
// Options.ANDDMinTerms words) such that a and b share no I-Match
// signature, and c shares one with each: reported in that order, a and b
// start two campaigns and c merges them (both without sketches, both
// matched through I-Match: the merge rule allows it).
func mergeTrio(t testing.TB) (a, b, c []byte) {
	t.Helper()
	lex, _ := resources(t)
	sg, err := imatchbag.NewSigner(lex, imatchbag.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := sg.Options().K
	absent := func(w string) (n, bag int) {
		for i := 0; i <= k; i++ {
			if !sg.InBag(w, i) {
				n, bag = n+1, i
			}
		}
		return n, bag
	}
	byBag := map[int]string{} // a word absent from that bag only
	for _, w := range lex.Primary() {
		if n, bag := absent(w); n == 1 && bag != 0 && byBag[bag] == "" && len(w) >= 5 &&
			!strings.ContainsAny(w, "0123456789") {
			byBag[bag] = w
		}
	}
	var bi, bj int
	for bag := range byBag {
		if bi == 0 || bag < bi {
			bi, bj = bag, bi
		} else if bj == 0 || bag < bj {
			bj = bag
		}
	}
	wa, wb := byBag[bi], byBag[bj]
	// Eight words of both bags: a's and b's signatures in them exist.
	var common []string
	for _, w := range lex.Primary() {
		if len(common) < 8 && w != wa && w != wb && sg.InBag(w, bi) && sg.InBag(w, bj) &&
			len(w) >= 5 && !strings.ContainsAny(w, "0123456789") {
			common = append(common, w)
		}
	}
	if len(common) < 8 || wa == "" || wb == "" {
		t.Fatalf("lexicon: %d words in bags %d and %d, words absent from one bag %v", len(common), bi, bj, byBag)
	}
	msg := func(extra ...string) []byte {
		words := append(slices.Clone(common[1:]), extra...)
		return spamgen.NewMessage(common[0], strings.Join(words, " "), false)
	}
	return msg(wa), msg(wb), msg()
}

func TestEngineLegitMerge(t *testing.T) {
	f := newFixture(t, Options{})
	a, b, c := mergeTrio(t)
	oa := f.report(t, a, store.KindSpam, "r1")
	ob := f.report(t, b, store.KindSpam, "r2")
	if !oa.Created || !ob.Created {
		t.Fatalf("a and b must start two campaigns: %+v %+v", oa, ob)
	}
	oc := f.report(t, c, store.KindSpam, "r3")
	if oc.Campaign != oa.Campaign || !slices.Equal(oc.Merged, []store.CampaignID{ob.Campaign}) {
		t.Fatalf("c must merge %d into %d: %+v", ob.Campaign, oa.Campaign, oc)
	}
	if c, err := f.st.Get(f.ctx, oa.Campaign); err != nil || c.SpamReporters != 3 {
		t.Errorf("merged campaign: %+v %v", c, err)
	}
}

// lateSpam is a spam campaign that honest users report only after the
// attacker's reports (the attacker may be its sender and know it first).
var lateSpam = struct{ subject, body string }{
	"Limited time: earn thousands from home with crypto trading signals",
	`Join the exclusive trading club that turned ordinary people into confident investors. Our automated signals tell you exactly when to buy and sell the most profitable cryptocurrencies, with no experience required.

Members report average weekly profits of several thousand dollars from just twenty minutes a day on their phone. The platform handles every trade for you while you sleep, travel or spend time with your family.

Registration is free for the next forty eight hours only. After that, membership closes and the waiting list reopens next year. Secure your place now and claim the welcome bonus credited to your trading wallet.

Warning: this opportunity is not available in every country and places are strictly limited. Click the registration link below and start earning before your neighbours discover the secret.`,
}

// TestPoisonOneReporter is the property of issue 11: whatever sequence
// of reports one account sends (copies of campaigns and of legitimate
// mail, concatenations of two or three bodies, bodies mixed with another
// text's words, one text's I-Match words with another's other words,
// not-spam reports, repeats), it counts as at most one reporter on any
// message: a legitimate message that h honest users reported gets at most
// the action of a campaign with h+1 spam reporters (at most tag here),
// spam that honest users reported keeps at least the action of its
// campaign with one not-spam reporter more, and campaigns an
// administrator allowed or that were revoked are still accepted.
func TestPoisonOneReporter(t *testing.T) {
	const seeds, ops = 5, 16
	for _, batch := range []bool{false, true} {
		for seed := range uint64(seeds) {
			t.Run(fmt.Sprintf("batch=%v/seed%d", batch, seed), func(t *testing.T) {
				poisonRun(t, seed, ops, batch)
			})
		}
	}
}

// poisonRun is one run of TestPoisonOneReporter; with batch, the
// attacker's reports are applied in one ReportBatch.
func poisonRun(t *testing.T, seed uint64, ops int, batch bool) {
	f := newFixture(t, Options{})
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	late := func() []byte { return spamgen.NewMessage(lateSpam.subject, lateSpam.body, false) }
	// Honest state: three spam campaigns with 5 reporters each; legit 0
	// never reported, legit 1 reported once, legit 2 allowed, legit 3
	// revoked.
	spam := make([]store.CampaignID, len(campaignTexts))
	for i := range spam {
		spam[i] = f.spamWithReporters(t, i, 5, fmt.Sprint("user", i))
	}
	f.report(t, legitMessage(1), store.KindSpam, "clumsy")
	allowed := f.report(t, legitMessage(2), store.KindSpam, "clumsy").Campaign
	if err := f.eng.Ingester.SetState(f.ctx, allowed, store.StateAllowed); err != nil {
		t.Fatal(err)
	}
	revoked := f.report(t, legitMessage(3), store.KindSpam, "clumsy2").Campaign
	for _, u := range []string{"reader1", "reader2"} {
		f.report(t, legitCopy(t, 3, 1), store.KindHam, u)
	}
	honest := map[int]int{-1: 0, -2: 1} // legit text → honest spam reporters

	// The attacker's texts: the spam campaigns (0..2), the late spam (3)
	// and the legitimate texts (-1..-4).
	text := func(i int) (subject, body string) {
		if i == len(campaignTexts) {
			return lateSpam.subject, lateSpam.body
		}
		return bodyOf(i)
	}
	pick := func() int { return rng.IntN(len(campaignTexts)+1+len(legitTexts)) - len(legitTexts) }
	mutate := func(raw []byte, o spamgen.Options) []byte {
		b, err := spamgen.Mutate(raw, o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	base := func(i int) []byte {
		s, b := text(i)
		return spamgen.NewMessage(s, b, false)
	}
	var sent [][]byte
	var log []string
	var reqs []ReportRequest
	for range ops {
		var msg []byte
		kind := store.KindSpam
		switch op := rng.IntN(9); {
		case op >= 7: // a concatenation crafted to match two campaigns
			i, j := pick(), pick()
			_, bi := text(i)
			_, bj := text(j)
			for try := range 12 {
				parts := []string{bi, bj, bj}
				if try%2 == 1 {
					parts = []string{bj, bi, bi}
				}
				msg = mutate(spamgen.NewMessage(fmt.Sprint("re: ", rng.IntN(1000)), strings.Join(parts, "\n\n"), false),
					spamgen.Options{Kinds: []spamgen.Kind{spamgen.Shuffle}, Seed: rng.Uint64()})
				if strings.Contains(f.evaluate(t, msg).Rule, "campaigns matched") {
					break
				}
			}
			log = append(log, fmt.Sprintf("bridge(%d,%d)", i, j))
		case op == 0: // a copy of a campaign or of legitimate mail
			i := pick()
			msg = mutate(base(i), spamgen.Options{Kinds: []spamgen.Kind{spamgen.Combo}, Seed: rng.Uint64(), Strength: 0.05 + 0.3*rng.Float64()})
			log = append(log, fmt.Sprintf("copy(%d)", i))
		case op == 1 || op == 2: // two or three bodies, in any order
			n := 2 + rng.IntN(2)
			var parts []string
			var ids []int
			for range n {
				i := pick()
				_, b := text(i)
				for range 1 + rng.IntN(2) {
					parts = append(parts, b)
				}
				ids = append(ids, i)
			}
			rng.Shuffle(len(parts), func(a, b int) { parts[a], parts[b] = parts[b], parts[a] })
			msg = spamgen.NewMessage(fmt.Sprint("re: ", rng.IntN(1000)), strings.Join(parts, "\n\n"), false)
			log = append(log, fmt.Sprintf("concat%v", ids))
		case op == 3: // a body mixed with another text's words
			i, j := pick(), pick()
			_, b := text(j)
			msg = mutate(base(i), spamgen.Options{Kinds: []spamgen.Kind{spamgen.Insert}, Seed: rng.Uint64(),
				Strength: 0.3 + 0.6*rng.Float64(), Words: strings.Fields(b)})
			log = append(log, fmt.Sprintf("mix(%d,%d)", i, j))
		case op == 4: // one text's I-Match words, another's other words
			i, j := pick(), pick()
			_, bi := text(i)
			_, bj := text(j)
			in, _ := f.lexiconWords(bi)
			_, out := f.lexiconWords(bj)
			words := append(slices.Clone(in), out...)
			rng.Shuffle(len(words), func(a, b int) { words[a], words[b] = words[b], words[a] })
			msg = spamgen.NewMessage("hello", strings.Join(words, " "), false)
			log = append(log, fmt.Sprintf("smuggle(%d,%d)", i, j))
		case op == 5: // not spam
			i := pick()
			msg, kind = mutate(base(i), spamgen.Options{Kinds: []spamgen.Kind{spamgen.Reencode}, Seed: rng.Uint64()}), store.KindHam
			log = append(log, fmt.Sprintf("ham(%d)", i))
		default: // again
			if len(sent) == 0 {
				continue
			}
			msg = sent[rng.IntN(len(sent))]
			log = append(log, "repeat")
		}
		sent = append(sent, msg)
		reqs = append(reqs, ReportRequest{Raw: msg, Kind: kind, Reporter: "mallory"})
		if batch {
			continue
		}
		if _, err := f.eng.Ingester.Report(f.ctx, msg, kind, "mallory"); err != nil {
			t.Fatalf("report %v: %v", log, err)
		}
	}
	if batch {
		if _, err := f.eng.Ingester.ReportBatch(f.ctx, reqs); err != nil {
			t.Fatalf("report batch %v: %v", log, err)
		}
	}
	// Honest users report the late spam after the attacker.
	for r := range 5 {
		f.report(t, mutate(late(), spamgen.Options{Kinds: []spamgen.Kind{spamgen.Reencode}, Seed: uint64(r + 1)}), store.KindSpam, fmt.Sprint("late", r))
	}

	pol := f.eng.Checker.Policy()
	th := f.eng.Checker.ANDDThreshold()
	upper := func(h int) action.Action {
		return pol.Decide(&store.Campaign{SpamReporters: int64(h + 1)}, allBags(), th).Action
	}
	lower := pol.Decide(&store.Campaign{SpamReporters: 5, HamReporters: 1}, allBags(), th).Action
	for c := range 3 {
		cs := uint64(100 + c)
		for l, h := range honest {
			if v := f.evaluate(t, legitCopy(t, -l-1, cs)); v.Action > upper(h) {
				t.Errorf("legit %d (%d honest reporters) after %v: %v > %v: %s", l, h, log, v.Action, upper(h), v.Rule)
			}
		}
		for _, l := range []int{2, 3} {
			if v := f.evaluate(t, legitCopy(t, l, cs)); v.Action != action.Accept {
				t.Errorf("legit %d (allowed or revoked) after %v: %v: %s", l, log, v.Action, v.Rule)
			}
		}
		for i := range spam {
			if v := f.evaluate(t, copyOf(t, i, cs)); v.Action < lower {
				t.Errorf("spam %d after %v: %v < %v: %s", i, log, v.Action, lower, v.Rule)
			}
		}
		if v := f.evaluate(t, mutate(late(), spamgen.Options{Kinds: []spamgen.Kind{spamgen.Reencode}, Seed: cs})); v.Action < lower {
			t.Errorf("late spam after %v: %v < %v: %s", log, v.Action, lower, v.Rule)
		}
	}
	for id, want := range map[store.CampaignID]store.State{allowed: store.StateAllowed, revoked: store.StateRevoked} {
		if c, err := f.st.Get(f.ctx, id); err != nil || c.State != want {
			t.Errorf("campaign %d after %v: %+v %v, want state %d", id, log, c, err, want)
		}
	}
}

// One account seeds a campaign with a message made of a spam it is about
// to send and a newsletter; the honest reports of the spam that follow
// match it through ANDD only. They must start the spam's own campaign
// (and reach reject), not become mere votes on the seeded one (the spam
// would then only ever be tagged), and the newsletter stays at most
// tagged.
func TestPoisonSeededCampaign(t *testing.T) {
	f := newFixture(t, Options{})
	late := spamgen.NewMessage(lateSpam.subject, lateSpam.body, false)
	copyLate := func(s uint64) []byte {
		b, err := spamgen.Mutate(late, spamgen.Options{Kinds: []spamgen.Kind{spamgen.Reencode}, Seed: s})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The attacker knows the model: he picks an order of the paragraphs
	// whose sketch shares band keys with the spam's.
	sl, _ := f.sign(late)
	var seed []byte
	for try := range uint64(40) {
		m, err := spamgen.Mutate(spamgen.NewMessage("hi", lateSpam.body+"\n\n"+legitTexts[0].body+"\n\n"+legitTexts[0].body, false),
			spamgen.Options{Kinds: []spamgen.Kind{spamgen.Shuffle}, Seed: try})
		if err != nil {
			t.Fatal(err)
		}
		sm, _ := f.sign(m)
		if cosOf(sm, sl) >= f.eng.Checker.ANDDThreshold() && sharesKey(sm.BandKeys, sl.BandKeys) {
			seed = m
			break
		}
	}
	if seed == nil {
		t.Fatal("no seed message found")
	}
	f.report(t, seed, store.KindSpam, "mallory")
	if v := f.evaluate(t, copyLate(1)); v.Campaign == 0 {
		t.Fatalf("setup: the spam does not match the seeded campaign: %+v", v)
	}
	for r := range 5 {
		f.report(t, copyLate(uint64(10+r)), store.KindSpam, fmt.Sprint("user", r))
	}
	if v := f.check(t, copyLate(99)); v.Action != action.Reject {
		t.Errorf("spam after 5 honest reports: %v (%s)", v.Action, v.Rule)
	}
	if v := f.check(t, legitCopy(t, 0, 3)); v.Action > action.Tag {
		t.Errorf("newsletter: %v (%s)", v.Action, v.Rule)
	}
}

func sharesKey(a, b [][]byte) bool {
	for _, x := range a {
		for _, y := range b {
			if string(x) == string(y) {
				return true
			}
		}
	}
	return false
}
