package campaign

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

// One account never raises a campaign above tag, whatever the match
// model, the volume, the prior and however often it reports.
func TestSingleReporterCapPolicy(t *testing.T) {
	strong := append(allBags(), Evidence{Family: FamilyANDD, Similarity: 1}, Evidence{Family: FamilyQGram, Similarity: 1, Threshold: 0.55})
	tests := []struct {
		name   string
		policy Policy
		msgs   int64
	}{
		{name: "defaults", policy: Policy{}},
		{name: "defaults, huge volume", policy: Policy{}, msgs: 1e12},
		{name: "calibrated model", policy: Policy{MatchModel: MatchCalibrated}, msgs: 1e6},
		{name: "hand-set confidences", policy: Policy{MatchModel: MatchConfidences}, msgs: 1e6},
		// p alone would quarantine (and reject but for reject_min_reporters).
		{name: "credulous prior", policy: Policy{PriorOdds: 1000}, msgs: 1e6},
		{name: "credulous prior, no reject guard", policy: Policy{PriorOdds: 1000, RejectMinReporters: 1}},
		{name: "cheap false positives", policy: Policy{PriorOdds: 100, CostFP: Costs{Quarantine: 1.01, Reject: 1.02}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &store.Campaign{ID: 1, SpamReporters: 1, SpamReports: 1e6, Messages: tt.msgs}
			d := tt.policy.Decide(c, strong, 0.8)
			if d.Action > action.Tag {
				t.Fatalf("action %v (rule %q)", d.Action, d.Rule)
			}
			th := tt.policy.WithDefaults().Thresholds()
			if d.P > th[action.Quarantine].From && !d.SingleReporter {
				t.Errorf("p=%.4f would quarantine, but the cap is not named (rule %q)", d.P, d.Rule)
			}
			if d.SingleReporter && !strings.Contains(d.Rule, "one spam reporter never raises a campaign above tag") {
				t.Errorf("rule %q does not name the cap", d.Rule)
			}
			// A second account lifts the cap.
			c.SpamReporters = 2
			if d2 := tt.policy.Decide(c, strong, 0.8); d2.SingleReporter {
				t.Errorf("two reporters: still capped (rule %q)", d2.Rule)
			}
		})
	}
}

// The same through the engine: one account reporting many copies, over a
// volume of checked copies, never gets its campaign above tag.
func TestSingleReporterCapEngine(t *testing.T) {
	tests := []struct {
		name            string
		reports, checks int
		policy          Policy
	}{
		{name: "one report", reports: 1},
		{name: "twenty reports of copies", reports: 20},
		{name: "reports and volume", reports: 5, checks: 50},
		{name: "credulous prior", reports: 5, checks: 20, policy: Policy{PriorOdds: 1000, RejectMinReporters: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{Policy: tt.policy})
			for i := range tt.reports {
				f.report(t, copyOf(t, 0, uint64(i+1)), store.KindSpam, "mallory@example.org")
			}
			for i := range tt.checks {
				f.check(t, copyOf(t, 0, uint64(1000+i)))
			}
			v := f.check(t, baseMessage(0))
			if v.Campaign == 0 {
				t.Fatalf("the reported campaign did not match: %s", v.Rule)
			}
			if v.Action > action.Tag {
				t.Fatalf("action %v (rule %q)", v.Action, v.Rule)
			}
			if v.Decision.SpamReporters != 1 {
				t.Errorf("spam reporters %d, want 1", v.Decision.SpamReporters)
			}
		})
	}
}

// The reputation a campaign's reporters give it stays within bounds: in
// (0, 1), never lower with one more spam reporter, never higher with one
// more not-spam reporter, and volume moves it by at most volume_max_lr.
func TestReporterWeightBounds(t *testing.T) {
	p := DefaultPolicy()
	logit := func(x float64) float64 { return math.Log(x / (1 - x)) }
	for _, msgs := range []int64{0, 10, 1e6, 1e12} {
		prev := 0.0
		for spam := int64(1); spam <= 30; spam++ {
			prevHam := 1.0
			for ham := int64(0); ham <= 5; ham++ {
				r := p.reputation(&store.Campaign{SpamReporters: spam, HamReporters: ham, Messages: msgs})
				if r <= 0 || r > 1 || math.IsNaN(r) {
					t.Fatalf("spam=%d ham=%d msgs=%d: reputation %v", spam, ham, msgs, r)
				}
				if r > prevHam+1e-12 {
					t.Errorf("spam=%d ham=%d msgs=%d: a not-spam reporter raised the reputation (%v > %v)", spam, ham, msgs, r, prevHam)
				}
				prevHam = r
				if ham == 0 {
					if r+1e-12 < prev {
						t.Errorf("spam=%d msgs=%d: a spam reporter lowered the reputation (%v < %v)", spam, msgs, r, prev)
					}
					prev = r
				}
			}
		}
		one := p.reputation(&store.Campaign{SpamReporters: 1, Messages: msgs})
		if up := logit(one) - math.Log(p.PriorOdds); up > math.Log(p.VolumeMaxLR)+1e-9 {
			t.Errorf("msgs=%d: volume raised one reporter's log-odds by %.4f > ln(volume_max_lr)", msgs, up)
		}
	}
}

// The graymail limit: copies of a campaign reported by fewer than
// graymail_reporters accounts that carry graymail signs stay at accept
// unless near-copies, which are at most tagged.
func TestGraymailLimit(t *testing.T) {
	gray := &Graymail{List: "announce.example.org", ListHam: 40, Bulk: true}
	anddAt := func(sim float64) Evidence { return Evidence{Family: FamilyANDD, Similarity: sim} }
	qAt := func(sim float64) Evidence { return Evidence{Family: FamilyQGram, Similarity: sim, Threshold: 0.55} }
	in := func(bags int, andd, q float64) MatchInputs {
		return MatchInputs{Bags: bags, ANDD: andd, ANDDVerified: andd >= 0.589, QGram: q}
	}
	tests := []struct {
		name     string
		spam     int64
		ev       []Evidence
		in       MatchInputs
		gray     *Graymail
		want     action.Action
		wantGray bool
	}{
		{name: "look-alike, no signs: tagged", spam: 1, ev: []Evidence{anddAt(0.9), qAt(0.6)}, in: in(0, 0.9, 0.6), want: action.Tag},
		{name: "look-alike of graymail: accepted", spam: 1, ev: []Evidence{anddAt(0.9), qAt(0.6)}, in: in(0, 0.9, 0.6), gray: gray, want: action.Accept, wantGray: true},
		{name: "ANDD alone, q-grams far: accepted", spam: 1, ev: []Evidence{anddAt(0.95)}, in: in(0, 0.95, 0.3), gray: gray, want: action.Accept, wantGray: true},
		{name: "near-copy without I-Match: tagged", spam: 1, ev: []Evidence{anddAt(0.95), qAt(0.85)}, in: in(0, 0.95, 0.85), gray: gray, want: action.Tag},
		{name: "one bag, q-grams close: tagged", spam: 1, ev: append(allBags()[:1], qAt(0.75)), in: in(1, 0.7, 0.75), gray: gray, want: action.Tag},
		{name: "one bag, q-grams far: accepted", spam: 1, ev: append(allBags()[:1], qAt(0.6)), in: in(1, 0.9, 0.6), gray: gray, want: action.Accept, wantGray: true},
		{name: "exact copy of a short message: tagged", spam: 1, ev: allBags(), in: in(11, -1, -1), gray: gray, want: action.Tag},
		{name: "whole short content: tagged", spam: 1, ev: []Evidence{{Family: FamilyShort, Kind: "all", Similarity: 1}}, in: MatchInputs{ANDD: -1, QGram: -1, Short: true, Whole: true}, gray: gray, want: action.Tag},
		{name: "short body only: accepted", spam: 1, ev: []Evidence{{Family: FamilyShort, Kind: "body", Similarity: 1}}, in: MatchInputs{ANDD: -1, QGram: -1, Short: true}, gray: gray, want: action.Accept, wantGray: true},
		{name: "near-copy, three reporters: held at tag", spam: 3, ev: allBags(), in: in(11, 1, 1), gray: gray, want: action.Tag, wantGray: true},
		{name: "five reporters: decided as any other", spam: 5, ev: allBags(), in: in(11, 1, 1), gray: gray, want: action.Reject},
	}
	p := DefaultPolicy()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &store.Campaign{ID: 3, SpamReporters: tt.spam, SpamReports: tt.spam, Messages: 10}
			d := p.decide(c, tt.ev, tt.in, tt.gray, nil, 0.8, p.Thresholds())
			d.Rule = d.Explain()
			if d.Action != tt.want {
				t.Errorf("action %v, want %v (rule %q)", d.Action, tt.want, d.Rule)
			}
			if (d.Graymail != nil) != tt.wantGray {
				t.Errorf("graymail named: %v, want %v (rule %q)", d.Graymail != nil, tt.wantGray, d.Rule)
			}
			if tt.wantGray && !strings.Contains(d.Rule, "graymail (list announce.example.org (40 accepted messages), bulk-mail header)") {
				t.Errorf("rule %q does not name the signs", d.Rule)
			}
		})
	}
}

// listPost is a post of a mailing list with subject and text, from a
// sender of domain.
func listPost(subject, text, list, domain string) []byte {
	return viaList(spamgen.NewMessage(subject, text, false), list, domain)
}

// viaList gives raw the headers of list and a sender of domain.
func viaList(raw []byte, list, domain string) []byte {
	raw = bytes.Replace(raw, []byte("sender@campaign.example"), []byte("member@"+domain), 1)
	hdr := fmt.Sprintf("List-Id: Announcements <%s>\r\nList-Post: <mailto:post@%s>\r\nList-Unsubscribe: <mailto:leave@%s>\r\nPrecedence: list\r\n", list, list, list)
	return append([]byte(hdr), raw...)
}

// knowList checks n accepted posts of list, each from its own domain, so
// that the list becomes a sign of graymail.
func (f *fixture) knowList(t testing.TB, list string, n int) {
	t.Helper()
	for i := range n {
		text := fmt.Sprintf("Meeting notes number %d. The committee discussed item %d of the agenda, the budget of quarter %d and the venue of the next gathering in room %d. Minutes follow next week.", i, i*7, i%4+1, 100+i)
		if v := f.check(t, listPost(fmt.Sprintf("Notes %d", i), text, list, fmt.Sprintf("site%d.example", i))); v.Action != action.Accept {
			t.Fatalf("list post %d: %v (%s)", i, v.Action, v.Rule)
		}
	}
}

// Graymail signs are replies and a list's own mail (Precedence: list),
// unless GraymailHistoryOnly, and lists, lists' posting addresses and
// sender domains that delivered accepted mail here; a list's header alone
// is none.
func TestGraymailSigns(t *testing.T) {
	f := newFixture(t, Options{})
	strict := newFixture(t, Options{Policy: Policy{GraymailHistoryOnly: true}})
	text := campaignTexts[1].body
	sign := func(f *fixture, raw []byte) string {
		m, err := f.sign(raw)
		if err != nil {
			t.Fatal(err)
		}
		if g := f.eng.Checker.graymailOf(m); g != nil {
			return g.String()
		}
		return ""
	}
	reply := func(hdr string) []byte {
		raw := bytes.Replace(spamgen.NewMessage("Re: Offer", text, false), []byte("sender@campaign.example"), []byte("member@reply.example"), 1)
		return append([]byte(hdr), raw...)
	}
	for _, ff := range []*fixture{f, strict} {
		ff.knowList(t, "announce.example.org", 10)
	}
	tests := []struct {
		name        string
		raw         []byte
		want        string // Graymail.String(), "" for none
		wantHistory string // the same with GraymailHistoryOnly
	}{
		{name: "known list", raw: listPost("Offer", text, "announce.example.org", "new.example"),
			want:        "list announce.example.org (10 accepted messages), Precedence: list header, bulk-mail header",
			wantHistory: "list announce.example.org (10 accepted messages), bulk-mail header"},
		{name: "forged list id", raw: bytes.Replace(listPost("Offer", text, "announce.example.net", "new.example"), []byte("Precedence: list\r\n"), nil, 1)},
		{name: "a reply", raw: reply("In-Reply-To: <1@reply.example>\r\n"), want: "In-Reply-To or References header"},
		{name: "a list's mail", raw: reply("Precedence: list\r\n"), want: "Precedence: list header, bulk-mail header"},
		{name: "a reply on a list never seen", raw: reply("References: <1@reply.example>\r\nList-Id: <x.example.net>\r\nPrecedence: list\r\n"),
			want: "In-Reply-To or References header, Precedence: list header, bulk-mail header"},
		{name: "a reply naming no message", raw: reply("In-Reply-To: your mail\r\n")},
		{name: "bulk header alone", raw: reply("List-Unsubscribe: <mailto:leave@reply.example>\r\nPrecedence: bulk\r\n")},
		// A reply sent straight to the list's members and to the list: no
		// list headers, the list's posting address in Cc.
		{name: "sent to a known list", raw: reply("Cc: Ann <ann@example.net>, post@announce.example.org\r\n"),
			want:        "sent to list post@announce.example.org (10 accepted messages)",
			wantHistory: "sent to list post@announce.example.org (10 accepted messages)"},
		{name: "sent to an unknown list", raw: reply("Cc: post@announce.example.net\r\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sign(f, tt.raw); got != tt.want {
				t.Errorf("graymail %q, want %q", got, tt.want)
			}
			if got := sign(strict, tt.raw); got != tt.wantHistory {
				t.Errorf("graymail_history_only: graymail %q, want %q", got, tt.wantHistory)
			}
		})
	}
	t.Run("known sender domain", func(t *testing.T) {
		g := &Graymail{}
		for i := range 10 {
			raw := spamgen.NewMessage(fmt.Sprintf("Invoice %d", i), fmt.Sprintf("Your invoice number %d of order %d is attached; the amount of %d euros is due within thirty days of delivery.", i, 5000+i, 20+i), false)
			f.check(t, bytes.Replace(raw, []byte("sender@campaign.example"), []byte("billing@shop.example"), 1))
		}
		raw := bytes.Replace(baseMessage(2), []byte("sender@campaign.example"), []byte("news@shop.example"), 1)
		m, err := f.sign(raw)
		if err != nil {
			t.Fatal(err)
		}
		if g = f.eng.Checker.graymailOf(m); g == nil || g.Sender != "shop.example" || g.SenderHam < 10 {
			t.Errorf("graymail %+v, want sender shop.example", g)
		}
	})
}

// A post of a known mailing list reported by one account: the list's
// other recipients get their copies, a look-alike is accepted and a
// near-copy at most tagged; reported by graymail_reporters accounts, it
// is decided as any other.
func TestGraymailGuardEngine(t *testing.T) {
	const list = "announce.example.org"
	reported := listPost(campaignTexts[0].subject, campaignTexts[0].body, list, "poster.example")
	setup := func(t *testing.T, known bool, reporters, senderMsgs int, historyOnly bool) *fixture {
		f := newFixture(t, Options{Policy: Policy{GraymailHistoryOnly: historyOnly}})
		if known {
			f.knowList(t, list, 12)
		}
		// A correspondent: senderMsgs accepted messages from the
		// look-alike's sender domain, outside any list.
		for i := range senderMsgs {
			text := fmt.Sprintf("Dear colleague, about the draft of chapter %d: the figures of section %d need the data of run %d before the review of week %d.", i, i+3, 40+i, i%5+1)
			raw := bytes.Replace(spamgen.NewMessage(fmt.Sprintf("Draft %d", i), text, false), []byte("sender@campaign.example"), []byte("author@other.example"), 1)
			if v := f.check(t, raw); v.Action != action.Accept {
				t.Fatalf("message %d of the correspondent: %v (%s)", i, v.Action, v.Rule)
			}
		}
		for i := range reporters {
			f.report(t, reported, store.KindSpam, fmt.Sprintf("member%d@example.org", i))
		}
		return f
	}
	// A look-alike: the campaign's text with a fifth of its words changed,
	// which matches it without being a near-copy (no I-Match signature in
	// common, q-gram similarity below the graymail bar).
	plain := setup(t, false, 1, 0, true)
	var lookAlike []byte
	for seed := uint64(1); seed <= 40 && lookAlike == nil; seed++ {
		raw, err := spamgen.Mutate(baseMessage(0), spamgen.Options{Kinds: []spamgen.Kind{spamgen.Insert, spamgen.Delete}, Strength: 0.2, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		raw = viaList(raw, list, "other.example")
		v := plain.check(t, raw)
		if v.Action == action.Tag && v.Decision.Inputs != nil && !plain.eng.Checker.policy.nearCopy(*v.Decision.Inputs) {
			lookAlike = raw
		}
	}
	if lookAlike == nil {
		t.Fatal("no look-alike among 40 seeds")
	}
	// The same look-alike as a reply (In-Reply-To), outside any list.
	var reply []byte
	for _, line := range bytes.SplitAfter(append([]byte("In-Reply-To: <thread@other.example>\r\n"), lookAlike...), []byte("\r\n")) {
		if !bytes.HasPrefix(line, []byte("List-")) && !bytes.HasPrefix(line, []byte("Precedence:")) {
			// No list header: a reply of a correspondent.
			reply = append(reply, line...)
		}
	}
	tests := []struct {
		name        string
		known       bool
		senderMsgs  int
		reporters   int
		historyOnly bool // policy.graymail_history_only
		raw         []byte
		want        action.Action
		wantGray    bool
	}{
		{name: "list never seen, look-alike", reporters: 1, historyOnly: true, raw: lookAlike, want: action.Tag},
		{name: "list never seen, its own mail, look-alike", reporters: 1, raw: lookAlike, want: action.Accept, wantGray: true},
		{name: "reply, look-alike", reporters: 1, raw: reply, want: action.Accept, wantGray: true},
		{name: "reply, look-alike, history only", reporters: 1, historyOnly: true, raw: reply, want: action.Tag},
		{name: "list never seen, its own mail, the post itself", reporters: 1, raw: reported, want: action.Tag},
		{name: "known list, look-alike", known: true, reporters: 1, historyOnly: true, raw: lookAlike, want: action.Accept, wantGray: true},
		{name: "known list, the post itself", known: true, reporters: 1, historyOnly: true, raw: reported, want: action.Tag},
		{name: "known list, five reporters", known: true, reporters: 5, raw: lookAlike, want: action.Quarantine},
		{name: "sender with two accepted messages, look-alike", senderMsgs: 2, reporters: 1, historyOnly: true, raw: lookAlike, want: action.Tag},
		{name: "sender with three accepted messages, look-alike", senderMsgs: 3, reporters: 1, historyOnly: true, raw: lookAlike, want: action.Accept, wantGray: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, tt.known, tt.reporters, tt.senderMsgs, tt.historyOnly)
			v := f.check(t, tt.raw)
			if v.Campaign == 0 {
				t.Fatalf("no campaign matched: %s", v.Rule)
			}
			if tt.wantGray && v.Action != tt.want || !tt.wantGray && v.Action < tt.want {
				t.Errorf("action %v, want %v (rule %q)", v.Action, tt.want, v.Rule)
			}
			if (v.Decision.Graymail != nil) != tt.wantGray {
				t.Errorf("graymail named %v, want %v (rule %q)", v.Decision.Graymail != nil, tt.wantGray, v.Rule)
			}
			// The false-positive watch lists a campaign whose copy was
			// held back, whatever the sign, and labels it graymail.
			if _, err := f.st.StateHash(f.ctx); err != nil { // flushes the buffered counts
				t.Fatal(err)
			}
			w, err := f.eng.Reader.FalsePositiveWatch(f.ctx, WatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var listed *Watched
			for i := range w {
				if w[i].ID == v.Campaign {
					listed = &w[i]
				}
			}
			switch {
			case !tt.wantGray && listed != nil && listed.GraymailCopies != 0:
				t.Errorf("watch: %d copies held back as graymail, want none", listed.GraymailCopies)
			case tt.wantGray && (listed == nil || listed.GraymailCopies != 1 || !listed.Graymail):
				t.Errorf("watch: campaign %d not listed with 1 copy held back as graymail: %+v", v.Campaign, listed)
			case tt.wantGray && !strings.Contains(strings.Join(listed.Reasons(), "; "), "1 copy held back as graymail"):
				t.Errorf("watch reasons: %q", listed.Reasons())
			}
		})
	}
}

// The shipped match model loads, names only known features, and gives
// the probabilities it was fitted to give (golden values).
func TestDefaultMatchModel(t *testing.T) {
	m, err := DefaultMatchModel()
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != MatchModelFormat || m.Version != 1 || len(m.Weights) != len(matchFeatureNames) || len(m.Confirmed) != len(matchFeatureNames) {
		t.Fatalf("model %q v%d with %d weights, %d confirmed", m.Format, m.Version, len(m.Weights), len(m.Confirmed))
	}
	tests := []struct {
		name      string
		in        MatchInputs
		confirmed bool
		want      float64 // within 1e-4; -1: above 0.9999
	}{
		{name: "nothing measured", in: NoInputs(), want: 0},
		{name: "exact copy", in: MatchInputs{Bags: 11, ANDD: 1, ANDDVerified: true, QGram: 1, Lead: true}, want: -1},
		{name: "look-alike", in: MatchInputs{ANDD: 0.641, ANDDVerified: true, QGram: 0.738}, want: 0.92195},
		{name: "look-alike, confirmed campaign", in: MatchInputs{ANDD: 0.641, ANDDVerified: true, QGram: 0.738}, confirmed: true, want: 0.98287},
		{name: "ANDD alone, q-grams far", in: MatchInputs{ANDD: 0.874, ANDDVerified: true, QGram: 0.470}, want: 0.89599},
		{name: "randomized copy", in: MatchInputs{ANDD: 0.914, ANDDVerified: true, QGram: 0.846}, want: 0.99846},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := m.Probability(tt.in, tt.confirmed)
			if tt.want < 0 && got <= 0.9999 || tt.want >= 0 && math.Abs(got-tt.want) > 1e-4 {
				t.Errorf("P = %.6f, want %v", got, tt.want)
			}
		})
	}
}

// The match probability never falls as the evidence grows: more I-Match
// bags, a higher ANDD or q-gram estimate, a verified ANDD match, a
// short-message or lead key.
func TestMatchProbabilityMonotone(t *testing.T) {
	m, err := DefaultMatchModel()
	if err != nil {
		t.Fatal(err)
	}
	for _, confirmed := range []bool{false, true} {
		for bags := 0; bags <= 11; bags++ {
			for a := 0.0; a <= 1.0001; a += 0.05 {
				for q := 0.0; q <= 1.0001; q += 0.05 {
					in := MatchInputs{Bags: bags, ANDD: a, ANDDVerified: a >= 0.589, QGram: q}
					p := m.Probability(in, confirmed)
					more := []struct {
						what string
						in   MatchInputs
					}{
						{"one more bag", MatchInputs{Bags: bags + 1, ANDD: a, ANDDVerified: in.ANDDVerified, QGram: q}},
						{"higher ANDD", MatchInputs{Bags: bags, ANDD: min(a+0.05, 1), ANDDVerified: min(a+0.05, 1) >= 0.589, QGram: q}},
						{"higher q-grams", MatchInputs{Bags: bags, ANDD: a, ANDDVerified: in.ANDDVerified, QGram: min(q+0.05, 1)}},
						{"short key", MatchInputs{Bags: bags, ANDD: a, ANDDVerified: in.ANDDVerified, QGram: q, Short: true}},
						{"lead key", MatchInputs{Bags: bags, ANDD: a, ANDDVerified: in.ANDDVerified, QGram: q, Lead: true}},
					}
					for _, mo := range more {
						if p2 := m.Probability(mo.in, confirmed); p2+1e-12 < p {
							t.Fatalf("confirmed=%v %+v: %s lowers P from %.6f to %.6f", confirmed, in, mo.what, p, p2)
						}
					}
				}
			}
		}
	}
}

// A model file that is not a match model, or whose probability would
// fall as an estimate rises, is refused.
func TestParseMatchModelRefuses(t *testing.T) {
	tests := []struct{ name, file string }{
		{"not JSON", `{`},
		{"other format", `{"format":"x","version":1,"weights":{}}`},
		{"no version", `{"format":"nddmilter-match-model","weights":{}}`},
		{"unknown feature", `{"format":"nddmilter-match-model","version":1,"weights":{"colour":1}}`},
		{"falls with ANDD", `{"format":"nddmilter-match-model","version":1,"weights":{"andd":-1}}`},
		{"falls with q-grams (confirmed)", `{"format":"nddmilter-match-model","version":1,"weights":{"qgram":1},"confirmed":{"qgram":1,"qgram_sq":-2}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseMatchModel([]byte(tt.file)); !errors.Is(err, ErrMatchModel) {
				t.Errorf("err = %v, want ErrMatchModel", err)
			}
		})
	}
	if _, err := ParseMatchModel([]byte(`{"format":"nddmilter-match-model","version":2,"weights":{"bias":-1,"andd":2}}`)); err != nil {
		t.Errorf("a valid model: %v", err)
	}
}

// With policy.authserv_ids, a list or sender domain is a graymail sign
// only for a message that this server's MTA authenticated for a domain
// of the same organization: a forged List-Id or From is none.
func TestGraymailAuthenticated(t *testing.T) {
	f := newFixture(t, Options{Policy: Policy{AuthservIDs: []string{"MX.example.net"}}})
	f.knowList(t, "announce.example.org", 10)
	for i := range 10 {
		raw := spamgen.NewMessage(fmt.Sprintf("Invoice %d", i), fmt.Sprintf("Your invoice number %d of order %d is attached; the amount of %d euros is due within thirty days of delivery.", i, 5000+i, 20+i), false)
		f.check(t, bytes.Replace(raw, []byte("sender@campaign.example"), []byte("billing@shop.example"), 1))
	}
	text := campaignTexts[1].body
	tests := []struct {
		name, ar string // ar: an Authentication-Results value, "" for none
		list     bool   // a post of the known list, else a message of shop.example
		cc       bool   // a reply with the known list's address in Cc
		reply    bool   // a reply (In-Reply-To) from reply.example
		want     string // Graymail.String(), "" for none
	}{
		{name: "list, no result", list: true},
		{name: "list, dkim of the list's domain", list: true, ar: "mx.example.net; dkim=pass header.d=example.org",
			want: "list announce.example.org (10 accepted messages), bulk-mail header, authenticated: dkim example.org by mx.example.net"},
		{name: "list, result of another host", list: true, ar: "relay.spammer.example; dkim=pass header.d=example.org"},
		{name: "list, dkim of another domain", list: true, ar: "mx.example.net; dkim=pass header.d=spammer.example"},
		{name: "list, dkim failed", list: true, ar: "mx.example.net; dkim=fail header.d=example.org"},
		// A spammer writes a known list's address in Cc as easily as a
		// List-Id: with authserv_ids, only the list's domain vouches.
		{name: "sent to the list, no result", cc: true},
		{name: "sent to the list, dkim of the sender's domain", cc: true, ar: "mx.example.net; dkim=pass header.d=reply.example"},
		{name: "sent to the list, dkim of the list's domain", cc: true, ar: "mx.example.net; dkim=pass header.d=example.org",
			want: "sent to list post@announce.example.org (10 accepted messages), authenticated: dkim example.org by mx.example.net"},
		// A reply header vouches for nothing: the sender's domain must.
		{name: "reply, no result", reply: true},
		{name: "reply, dkim of another domain", reply: true, ar: "mx.example.net; dkim=pass header.d=example.org"},
		{name: "reply, dkim of the sender's domain", reply: true, ar: "mx.example.net; dkim=pass header.d=reply.example",
			want: "In-Reply-To or References header, authenticated: dkim reply.example by mx.example.net"},
		{name: "sender, no result"},
		{name: "sender, dmarc pass", ar: "mx.example.net; dmarc=pass header.from=shop.example",
			want: "sender shop.example (10 accepted messages), authenticated: dmarc shop.example by mx.example.net"},
		{name: "sender, dkim of a subdomain", ar: "mx.example.net; dkim=pass header.d=mail.shop.example",
			want: "sender shop.example (10 accepted messages), authenticated: dkim mail.shop.example by mx.example.net"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raw []byte
			switch {
			case tt.list:
				raw = listPost("Offer", text, "announce.example.org", "new.example")
			case tt.cc:
				raw = bytes.Replace(spamgen.NewMessage("Re: Offer", text, false), []byte("sender@campaign.example"), []byte("member@reply.example"), 1)
				raw = append([]byte("Cc: post@announce.example.org\r\n"), raw...)
			case tt.reply:
				raw = bytes.Replace(spamgen.NewMessage("Re: Offer", text, false), []byte("sender@campaign.example"), []byte("member@reply.example"), 1)
				raw = append([]byte("In-Reply-To: <1@reply.example>\r\n"), raw...)
			default:
				raw = bytes.Replace(baseMessage(2), []byte("sender@campaign.example"), []byte("news@shop.example"), 1)
			}
			if tt.ar != "" {
				raw = append([]byte("Authentication-Results: "+tt.ar+"\r\n"), raw...)
			}
			m, err := f.sign(raw)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if g := f.eng.Checker.graymailOf(m); g != nil {
				got = g.String()
			}
			if got != tt.want {
				t.Errorf("graymail %q, want %q", got, tt.want)
			}
		})
	}
}

// A list's accepted messages are counted in the store: a restart does not
// forget that the list is graymail.
func TestGraymailListOutlivesRestart(t *testing.T) {
	const list = "announce.example.org"
	dir := t.TempDir()
	clock := &testClock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	lex, mod := resources(t)
	open := func() *fixture {
		t.Helper()
		st, err := store.Open(dir, store.Options{Now: clock.Now})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		eng, err := New(st, lex, mod, Options{Clock: clock.Now}, nil)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return &fixture{eng: eng, st: st, clock: clock, ctx: context.Background()}
	}
	f := open()
	f.knowList(t, list, 10)
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	f = open()
	defer f.st.Close()
	m, err := f.sign(listPost("Offer", campaignTexts[1].body, list, "new.example"))
	if err != nil {
		t.Fatal(err)
	}
	if g := f.eng.Checker.graymailOf(m); g == nil || g.List != list || g.ListHam != 10 {
		t.Errorf("after a restart: graymail %+v, want list %s with 10 accepted messages", g, list)
	}
}
