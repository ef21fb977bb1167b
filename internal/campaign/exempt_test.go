package campaign

// Regression tests for red-team finding 2 (an allowed campaign hid
// rejected spam): a message made of a spam's text and an allowed
// mailing's text, in either order, padded or not, keeps the spam
// campaign's action; the allowed mailing itself, and randomized copies of
// it, stay accepted even when they also match a campaign to act on. They
// use the engine as the daemon does, over a real Badger store.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

// reportCopies reports n lightly randomized copies of a message made of
// subject and body, each by its own reporter, and returns the campaign.
func (f *fixture) reportCopies(t testing.TB, subject, body string, n int, who string) store.CampaignID {
	t.Helper()
	var id store.CampaignID
	for r := range n {
		raw, err := spamgen.Mutate(spamgen.NewMessage(subject, body, false),
			spamgen.Options{Kinds: []spamgen.Kind{spamgen.Reencode}, Seed: uint64(r + 1), Strength: 0.02})
		if err != nil {
			t.Fatal(err)
		}
		o := f.report(t, raw, store.KindSpam, fmt.Sprintf("%s-%d", who, r))
		if id != 0 && o.Campaign != id {
			t.Fatalf("setup: report %d of %s landed in campaign %d, not %d", r, who, o.Campaign, id)
		}
		id = o.Campaign
	}
	return id
}

// matchedBoth says whether raw matches both campaigns (with evidence).
func (f *fixture) matchedBoth(t testing.TB, raw []byte, a, b store.CampaignID) bool {
	t.Helper()
	m, err := f.sign(raw)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.eng.Checker.match(f.ctx, m, false)
	if err != nil {
		t.Fatal(err)
	}
	var sa, sb bool
	for _, c := range res.matched {
		sa = sa || c.id == a
		sb = sb || c.id == b
	}
	return sa && sb
}

// TestAllowedDoesNotHideSpam: a spam campaign with 5 reporters and a
// newsletter that 5 users reported as spam and an administrator then
// allowed (or that not-spam reports revoked). Every message made of the
// spam's text and the newsletter's, spam first or newsletter first,
// repeated, padded with innocent text, under either subject, that matches
// both campaigns gets the spam campaign's action, and its rule names both
// campaigns and the rule applied.
func TestAllowedDoesNotHideSpam(t *testing.T) {
	const (
		spamFirst = "spam first"
		newsFirst = "newsletter first"
	)
	for _, state := range []store.State{store.StateAllowed, store.StateRevoked} {
		for _, long := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/long=%v", map[store.State]string{store.StateAllowed: "allowed", store.StateRevoked: "revoked"}[state], long), func(t *testing.T) {
				seen := map[string]int{}
				for si := range campaignTexts {
					f := newFixture(t, Options{})
					li := (si + 1) % len(legitTexts)
					spam, news, pad := campaignTexts[si], legitTexts[li], legitTexts[(li+1)%len(legitTexts)].body
					body := spam.body
					if long {
						// Long enough that its q-grams match after a newsletter.
						body += "\n\n" + campaignTexts[(si+1)%len(campaignTexts)].body
					}
					s := f.reportCopies(t, spam.subject, body, 5, "user")
					a := f.reportCopies(t, news.subject, news.body, 5, "reader")
					if s == a {
						t.Fatalf("setup: one campaign %d", s)
					}
					if err := f.eng.Ingester.SetState(f.ctx, a, state); err != nil {
						t.Fatal(err)
					}
					S, N := body, news.body
					variants := []struct {
						order string
						parts []string
					}{
						{spamFirst, []string{S, N}},
						{spamFirst, []string{S, N, N}},
						{spamFirst, []string{S, N, N, N}},
						{spamFirst, []string{S, N, pad}},
						{spamFirst, []string{S, pad, N}},
						{spamFirst, []string{pad, S, N}},
						{newsFirst, []string{N, S}},
						{newsFirst, []string{N, N, S}},
						{newsFirst, []string{N, S, pad}},
						{newsFirst, []string{N, pad, S}},
						{newsFirst, []string{pad, N, S}},
					}
					for _, vr := range variants {
						for _, subject := range []string{"fwd", news.subject, spam.subject} {
							raw := spamgen.NewMessage(subject, strings.Join(vr.parts, "\n\n"), false)
							if !f.matchedBoth(t, raw, s, a) {
								continue
							}
							padded := ""
							if strings.Contains(strings.Join(vr.parts, ""), pad) {
								padded = " padded"
							}
							seen[vr.order+padded]++
							v := f.evaluate(t, raw)
							if v.Campaign != s || v.Action == action.Accept {
								t.Errorf("%s%s (%d parts, subject %q): %v campaign %d, want the spam campaign %d's action: %s",
									vr.order, padded, len(vr.parts), subject, v.Action, v.Campaign, s, v.Rule)
								continue
							}
							if v.Exempt == nil || v.Exempt.Followed || v.Exempt.Campaign != a || v.Exempt.Acting != s {
								t.Errorf("%s: exemption %+v, want campaign %d set aside for %d", vr.order, v.Exempt, a, s)
							}
							for _, want := range []string{fmt.Sprintf("campaign %d is %s", a, stateWords(state)),
								fmt.Sprintf("campaign %d's %s stands", s, v.Action)} {
								if !strings.Contains(v.Rule, want) {
									t.Errorf("%s: rule %q lacks %q", vr.order, v.Rule, want)
								}
							}
						}
					}
				}
				t.Logf("variants matching both campaigns: %v", seen)
				// The test is only as good as the mixtures that match both.
				if seen[spamFirst] == 0 || seen[newsFirst] == 0 || seen[spamFirst+" padded"]+seen[newsFirst+" padded"] == 0 {
					t.Errorf("too few mixtures matched both campaigns: %v", seen)
				}
			})
		}
	}
}

// TestAllowedMailingStillAccepted: a phishing campaign that wraps an
// allowed newsletter (its own paragraph, then the newsletter) matches
// the newsletter's copies too. The newsletter and its randomized copies
// are still accepted as the allowed campaign's, saying why; the
// phishing copies are acted on.
func TestAllowedMailingStillAccepted(t *testing.T) {
	const phish = "Important: your membership card expires today. Verify your banking details at once on our secure renewal portal " +
		"or your account will be suspended and your data deleted. Enter your card number, expiry date and security code to keep your benefits."
	both := 0
	for li := range legitTexts {
		f := newFixture(t, Options{})
		news := legitTexts[li]
		imitation := phish + "\n\n" + news.body
		p := f.reportCopies(t, news.subject, imitation, 5, "user")
		a := f.reportCopies(t, news.subject, news.body, 5, "reader")
		if p == a {
			t.Fatalf("setup: one campaign %d", p)
		}
		if err := f.eng.Ingester.SetState(f.ctx, a, store.StateAllowed); err != nil {
			t.Fatal(err)
		}
		for seed := range uint64(12) {
			raw := legitCopy(t, li, seed)
			if seed > 0 {
				var err error
				if raw, err = spamgen.Mutate(legitMessage(li), spamgen.Options{Seed: seed}); err != nil {
					t.Fatal(err)
				}
			}
			v := f.evaluate(t, raw)
			if v.Action != action.Accept || v.Campaign != a {
				t.Errorf("newsletter %d copy %d: %v campaign %d, want accept as allowed campaign %d: %s", li, seed, v.Action, v.Campaign, a, v.Rule)
			}
			if f.matchedBoth(t, raw, a, p) {
				both++
				if v.Exempt == nil || !v.Exempt.Followed || !strings.Contains(v.Rule, fmt.Sprintf("near-copy of campaign %d as a whole", a)) ||
					!strings.Contains(v.Rule, fmt.Sprintf("campaign %d's", p)) {
					t.Errorf("newsletter %d copy %d: rule %q does not say why campaign %d was set aside", li, seed, v.Rule, p)
				}
			}
			raw, err := spamgen.Mutate(spamgen.NewMessage(news.subject, imitation, false), spamgen.Options{Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			if v := f.evaluate(t, raw); v.Action == action.Accept {
				t.Errorf("phishing copy %d of newsletter %d accepted: %s", seed, li, v.Rule)
			}
		}
	}
	if both < 10 {
		t.Errorf("only %d newsletter copies matched the phishing campaign too", both)
	}
}
