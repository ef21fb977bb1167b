package campaign

import (
	"fmt"
	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

// List footers appended by mailing lists (the SourceForge one is that of
// the SpamAssassin corpus's easy-ham-2-01358).
const (
	footerSourceForge = `-------------------------------------------------------
This sf.net email is sponsored by:ThinkGeek
Welcome to geek heaven.
http://thinkgeek.com/sf
_______________________________________________
Spamassassin-talk mailing list
Spamassassin-talk@lists.sourceforge.net
https://lists.sourceforge.net/lists/listinfo/spamassassin-talk
`
	footerMailman = `_______________________________________________
Kernel-users mailing list
Kernel-users@lists.kernelusers.example.org
https://lists.kernelusers.example.org/mailman/listinfo/kernel-users
Unsubscribe, archives, digest options and list policy:
https://lists.kernelusers.example.org/mailman/options/kernel-users
`
	footerSignature = `-- 
Jonathan Whitfield, systems administration
Harbourside Networks -- https://www.harbourside.example.net/
` + footerMailman
)

// listMessage is a plain-text message posted to a mailing list: with a
// List-Id header naming the list its footer names ("X mailing list" or a
// listinfo URL), if any.
func listMessage(subject, body, footer string) []byte {
	list := ""
	if m := listLine.FindStringSubmatch(footer); m != nil {
		list = "List-Id: <" + strings.ToLower(m[1]+m[2]) + ".lists.example.org>\r\n"
	}
	return []byte("From: poster@example.org\r\nTo: list@lists.example.org\r\n" + list + "Subject: " + subject +
		"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n" +
		strings.ReplaceAll(body+"\n\n"+footer, "\n", "\r\n"))
}

var listLine = regexp.MustCompile(`(?m)^(\S+) mailing list$|listinfo/([\w.-]+)`)

// TestEngineListFooter reproduces the false positives of the SpamAssassin
// corpus (docs/design/footer.md): a short spam relayed by
// a mailing list is reported, and a short legitimate post to the same list
// shares mostly the list's footer with it. The post must be accepted, and
// say why; copies of the spam must still be caught.
func TestEngineListFooter(t *testing.T) {
	const (
		spamSubject = "Replica watches"
		spamBody    = "Cheap replica watches: http://replica-deals.example.biz/"
		hamSubject  = "Re: whitelisting mailing lists"
		hamBody     = "Ross Vandegrift said:\n\n> Won't this whitelist spams sent to mailing lists though?\n\nonly if you've whitelisted the mailing list.  In that case, c'est la vie\n;)\n\n--j."
	)
	for _, tt := range []struct {
		name   string
		footer string
	}{
		{"sourceforge", footerSourceForge},
		{"mailman", footerMailman},
		{"signature and mailman", footerSignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			if f.eng.Checker.andd == nil {
				t.Skip("no ANDD model")
			}
			spam := listMessage(spamSubject, spamBody, tt.footer)
			ham := listMessage(hamSubject, hamBody, tt.footer)
			// The reproduction holds: whole, the post is an ANDD
			// near-duplicate of the spam, and no I-Match signature of
			// theirs is shared.
			ss, err := f.sign(spam)
			if err != nil {
				t.Fatal(err)
			}
			hs, err := f.sign(ham)
			if err != nil {
				t.Fatal(err)
			}
			if !ss.HasSketch() || !hs.HasSketch() {
				t.Fatalf("sketches: spam %v ham %v", ss.HasSketch(), hs.HasSketch())
			}
			cos := andd.Cosine(ss.Sketch, hs.Sketch)
			t.Logf("whole-message ANDD cosine of the post and the spam: %.3f (threshold %.3f)", cos, f.eng.Checker.ANDDThreshold())
			for _, k := range hs.IMatchKeys {
				if slices.ContainsFunc(ss.IMatchKeys, func(x []byte) bool { return string(x) == string(k) }) {
					t.Fatal("the post shares an I-Match signature with the spam")
				}
			}
			// Three reporters: an ANDD-only match with the spam would be
			// tagged (p > 0.6667 from cosine ≈ 0.6 on).
			var id store.CampaignID
			for i, r := range []string{"alice", "bob", "carol"} {
				o := f.report(t, spam, store.KindSpam, r)
				if i == 0 {
					id = o.Campaign
				}
				if o.Campaign != id || id == 0 {
					t.Fatalf("report by %s: %+v", r, o)
				}
			}
			if cos < f.eng.Checker.ANDDThreshold() {
				t.Fatalf("the post is not an ANDD near-duplicate of the spam (%.3f): the test reproduces nothing", cos)
			}

			// Before the footer check, the post matched the campaign
			// through ANDD alone and was tagged.
			c, err := f.eng.Reader.Get(f.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			old := f.eng.Checker.Policy().Decide(c, []Evidence{{Family: FamilyANDD, Similarity: cos}}, f.eng.Checker.ANDDThreshold())
			if old.Action == action.Accept {
				t.Fatalf("the post would not have been flagged without the footer check: %s", old.Rule)
			}

			v := f.check(t, ham)
			if v.Action != action.Accept || v.Campaign != 0 || len(v.Evidence) != 0 {
				t.Fatalf("legitimate post: %+v", v)
			}
			// The band keys of the post and the spam need not collide
			// (LSH): when they do, the rule says why the match was
			// ignored.
			want := fmt.Sprintf("accept: campaign %d matched through the mailing-list footer only", id)
			if !strings.HasPrefix(v.Rule, want) && v.Rule != "accept: no campaign matched" {
				t.Errorf("rule %q, want it to start with %q", v.Rule, want)
			}
			t.Logf("legitimate post: %s", v.Rule)

			if v := f.check(t, spam); v.Action == action.Accept || v.Campaign != id {
				t.Errorf("exact copy of the spam: %+v", v)
			}
			// Randomized copies: each kind catches at least 2 of 3.
			for _, kind := range []spamgen.Kind{spamgen.HashBuster, spamgen.Reencode, spamgen.Typos, spamgen.Delete} {
				caught := 0
				for seed := uint64(1); seed <= 3; seed++ {
					v := f.check(t, mutate(t, spam, kind, seed))
					if v.Action != action.Accept && v.Campaign == id {
						caught++
					}
					imatch := slices.ContainsFunc(v.Evidence, func(e Evidence) bool { return e.Family == FamilyIMatch })
					if v.Action != action.Accept && !imatch && !strings.Contains(v.Rule, "mailing-list footer") {
						t.Errorf("%s copy %d: ANDD-only match without a word on the footer: %q", kind, seed, v.Rule)
					}
					t.Logf("%s copy %d: %s", kind, seed, v.Rule)
				}
				if caught < 2 {
					t.Errorf("%s: %d of 3 copies of the spam caught", kind, caught)
				}
			}

			// Another short spam relayed by the same list is a new
			// campaign: the footer does not merge it into the first.
			other := listMessage("Prescription medicine", "Order your prescription medicine online today without visiting a doctor,\ndiscreet overnight delivery to your door: http://pharma-discount.example.biz/", tt.footer)
			if o := f.report(t, other, store.KindSpam, "dave"); !o.Created || o.Campaign == id {
				t.Errorf("another spam of the list joined the first campaign: %+v", o)
			}
			// Nor when no word of its own is in a lexicon: the I-Match
			// signatures that hash the footer's words alone are not used
			// (dropFooterIMatch).
			meds := listMessage("處方藥", "線上藥房,無需處方,隔夜送達: http://pharma-discount.example.biz/", tt.footer)
			ms, err := f.sign(meds)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("I-Match signatures of the footer alone, not used: %d of the spam, %d of the other", ss.FooterIMatch, ms.FooterIMatch)
			if o := f.report(t, meds, store.KindSpam, "erin"); o.Campaign == id || slices.Contains(o.Joined, id) {
				t.Errorf("a spam whose signed words are the footer's joined the first campaign: %+v", o)
			}
		})
	}
}

func TestDropFooterIMatch(t *testing.T) {
	f := newFixture(t, Options{})
	body := "線上藥房,無需處方,隔夜送達: http://pharma-discount.example.biz/"
	withFooter, err := f.sign(listMessage("處方藥", body, footerSourceForge))
	if err != nil {
		t.Fatal(err)
	}
	if withFooter.FooterAt < 0 || withFooter.FooterIMatch == 0 || len(withFooter.IMatch) != 0 || len(withFooter.IMatchKeys) != 0 {
		t.Fatalf("footer at %d, %d footer signatures dropped, %d kept: want all dropped",
			withFooter.FooterAt, withFooter.FooterIMatch, len(withFooter.IMatch))
	}
	// Another post to the list with no word in a lexicon had the same
	// signatures: they are the footer's.
	other := f.eng.Checker.pipe.Analyze(listMessage("質問", "添付の画面について質問があります。", footerSourceForge))
	if len(other.IMatch.Signatures) != withFooter.FooterIMatch {
		t.Errorf("another post: %d signatures, want the same %d", len(other.IMatch.Signatures), withFooter.FooterIMatch)
	}
	// Without ANDD, nothing usable is left, and a check says why.
	// (The short-message keys, which sign the text without its footer,
	// are off: TestShortListFooter covers them.)
	im := newFixture(t, Options{DisableANDD: true, DisableShort: true})
	if v := im.check(t, listMessage("處方藥", body, footerSourceForge)); v.Action != action.Accept || v.Rule != "accept: no signature, "+(Skip{Reason: SkipFooterIMatch}).String() {
		t.Errorf("I-Match only: %+v", v)
	}
	// The same words without a footer keep every signature they have.
	plain, err := f.sign(listMessage("處方藥", body, ""))
	if err != nil {
		t.Fatal(err)
	}
	if plain.FooterAt >= 0 || plain.FooterIMatch != 0 {
		t.Errorf("no footer: footer at %d, %d dropped", plain.FooterAt, plain.FooterIMatch)
	}
	// A message with words of its own in the lexicons keeps them all.
	own, err := f.sign(listMessage(campaignTexts[0].subject, campaignTexts[0].body, footerMailman))
	if err != nil {
		t.Fatal(err)
	}
	if own.FooterIMatch != 0 || len(own.IMatch) != 11 {
		t.Errorf("long message with a footer: %d signatures, %d dropped", len(own.IMatch), own.FooterIMatch)
	}
}

// mutate randomizes a copy of raw. spamgen rebuilds the header, so a
// List-Id header of raw is put back: the list adds it (and its footer)
// after the spammer's randomization.
func mutate(t *testing.T, raw []byte, k spamgen.Kind, seed uint64) []byte {
	t.Helper()
	b, err := spamgen.Mutate(raw, spamgen.Options{Kinds: []spamgen.Kind{k}, Seed: seed, Strength: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if m := listIDHeader.Find(raw); m != nil && !listIDHeader.Match(b) {
		b = append(append([]byte(nil), m...), b...)
	}
	return b
}

var listIDHeader = regexp.MustCompile(`(?m)^List-Id: [^\r\n]*\r\n`)

// TestEngineFooterEvidence covers each way an ANDD-only match of a message
// with a mailing-list footer is judged (evidence.go): campaigns are made
// of band keys only, as for a spam without any I-Match signature.
func TestEngineFooterEvidence(t *testing.T) {
	const japanese = "いつもお世話になっております。添付の画面について質問があります。よろしくお願いいたします。"
	longSpam := listMessage(campaignTexts[1].subject, campaignTexts[1].body, footerMailman)
	shortSpam := listMessage("Replica watches", "Cheap replica watches: http://replica-deals.example.biz/", footerSourceForge)
	tests := []struct {
		name     string
		reported []byte
		checked  []byte
		flagged  bool
		rule     string // part of the verdict's rule ("": no word on a footer)
	}{
		// The list adds its footer after the spammer's randomization:
		// words inserted, the footer intact.
		{"long spam, randomized copy: still matches without the footer",
			longSpam, mutate(t, longSpam, spamgen.Insert, 1), true, "ANDD still "},
		{"long spam without footer, copy relayed by a list",
			[]byte(baseMessage(1)), longSpam, true, "without the mailing-list footer"},
		{"short spam, exact copy: matches, footer included",
			shortSpam, shortSpam, true, "ANDD: exact copy, mailing-list footer included"},
		{"nothing but the footer signed or weighted",
			shortSpam, listMessage("質問", japanese, footerSourceForge), false, "accept: no signature, " + (Skip{Reason: SkipFooterSketch}).String()},
		{"nothing weighted but the footer",
			shortSpam, listMessage("質問", japanese+"\nThis would have been done with some more time.", footerSourceForge), false, "matched through the mailing-list footer only (ANDD "},
		{"no footer: unchanged",
			[]byte(baseMessage(1)), copyOf(t, 1, 3, spamgen.Typos), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// ANDD's footer rules alone: the short-message keys are off
			// (TestShortListFooter).
			f := newFixture(t, Options{DisableShort: true})
			if f.eng.Checker.andd == nil {
				t.Skip("no ANDD model")
			}
			s, err := f.sign(tt.reported)
			if err != nil || !s.HasSketch() {
				t.Fatalf("sign: %v", err)
			}
			// Three reporters: any match is acted on.
			var id store.CampaignID
			for _, r := range []string{"alice", "bob", "carol"} {
				res, err := f.st.Report(f.ctx, store.ReportInput{Time: f.clock.Now(), Kind: store.KindSpam, Reporter: r,
					Keys: s.BandKeys, Sketch: s.SketchBytes, Create: true, Index: true})
				if err != nil {
					t.Fatal(err)
				}
				id = res.Campaign
			}
			v := f.check(t, tt.checked)
			t.Logf("%s", v.Rule)
			if flagged := v.Action != action.Accept; flagged != tt.flagged || (flagged && v.Campaign != id) {
				t.Fatalf("verdict %+v, want flagged %v", v, tt.flagged)
			}
			if !strings.Contains(v.Rule, tt.rule) || (tt.rule == "" && strings.Contains(v.Rule, "footer")) {
				t.Errorf("rule %q does not say %q", v.Rule, tt.rule)
			}
		})
	}
}

// BenchmarkCheckListFooter is the cost of the footer check: a legitimate
// post matches a campaign through ANDD alone, and its footer is cut off
// and the rest sketched again (footer-only, the worst case), against the
// same check of a message without a footer (no-footer).
func BenchmarkCheckListFooter(b *testing.B) {
	spam := listMessage("Replica watches", "Cheap replica watches: http://replica-deals.example.biz/", footerSourceForge)
	ham := listMessage("Re: whitelisting mailing lists", "Ross Vandegrift said:\n\n> Won't this whitelist spams sent to mailing lists though?\n\nonly if you've whitelisted the mailing list.  In that case, c'est la vie", footerSourceForge)
	for _, bc := range []struct {
		name     string
		reported []byte
		checked  []byte
	}{
		{"footer-only", spam, ham},
		{"no-footer", baseMessage(1), copyOf(b, 1, 3, spamgen.Typos)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b, Options{})
			s, err := f.sign(bc.reported)
			if err != nil || !s.HasSketch() {
				b.Fatalf("sign: %v", err)
			}
			if _, err := f.st.Report(f.ctx, store.ReportInput{Time: f.clock.Now(), Kind: store.KindSpam, Reporter: "x",
				Keys: s.BandKeys, Sketch: s.SketchBytes, Create: true, Index: true}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.eng.Checker.Evaluate(f.ctx, bc.checked); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEngineFooterOnlyReport: a message without I-Match signature whose
// ANDD sketch weighs only its list footer (a foreign-language spam relayed
// by a list, spam-1-00243 of the SpamAssassin corpus) is not a usable
// report, and a check says why.
//
// The short-message keys are off here: they sign the same message without
// its footer, which makes it usable (TestShortListFooter).
func TestEngineFooterOnlyReport(t *testing.T) {
	f := newFixture(t, Options{DisableShort: true})
	if f.eng.Checker.andd == nil {
		t.Skip("no ANDD model")
	}
	footer := "-- \nIrish Linux Users' Group: ilug@linux.ie\nhttp://www.linux.ie/mailman/listinfo/ilug for (un)subscription information.\nList maintainer: listmaster@linux.ie\n"
	msg := listMessage("[ILUG] 辦公室出租", "台北市各區辦公室出租,歡迎來電洽詢。\n電話: 02-27492314", footer)
	s, err := f.sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.IMatchKeys) != 0 || !s.HasSketch() || s.Skip != pipeline.FooterSketch {
		t.Fatalf("want a sketch of the footer only and no I-Match signature: %d I-Match keys, sketch %v, footer only %v",
			len(s.IMatchKeys), s.HasSketch(), s.Skip == pipeline.FooterSketch)
	}
	o := f.report(t, msg, store.KindSpam, "alice")
	if o.Skipped != (Skip{Reason: SkipFooterSketch}).String() || o.Campaign != 0 {
		t.Errorf("report: %+v", o)
	}
	if v := f.check(t, msg); v.Action != action.Accept || v.Rule != "accept: no signature, "+(Skip{Reason: SkipFooterSketch}).String() {
		t.Errorf("check: %+v", v)
	}
	// Without the footer the same text has no sketch at all, as before.
	plain := listMessage("[ILUG] 辦公室出租", "台北市各區辦公室出租,歡迎來電洽詢。\n電話: 02-27492314", "")
	if s, _ := f.sign(plain); s.HasSketch() || s.Skip == pipeline.FooterSketch {
		t.Errorf("without the footer: sketch %v, footer only %v", s.HasSketch(), s.Skip == pipeline.FooterSketch)
	}
}

// BenchmarkSignListMessage is the cost of the footer on signing a message
// relayed by a list: sign (pipeline.Sign: footer found, I-Match
// signatures checked against the footer's by dropFooterIMatch) against
// pipeline.Analyze (the signatures alone) on the same message.
func BenchmarkSignListMessage(b *testing.B) {
	f := newFixture(b, Options{})
	msg := listMessage(campaignTexts[0].subject, campaignTexts[0].body, footerSignature)
	b.Run("sign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.sign(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pipeline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f.eng.Checker.pipe.Analyze(msg)
		}
	})
}

// Reported together in one batch, a short list spam and a list post that
// shares only the footer with it stay apart, as they do when reported one
// after the other.
func TestReportBatchListFooter(t *testing.T) {
	spam := listMessage("Replica watches", "Cheap replica watches: http://replica-deals.example.biz/", footerSourceForge)
	post := listMessage("Re: whitelisting mailing lists",
		"Ross Vandegrift said:\n\n> Won't this whitelist spams sent to mailing lists though?\n\nonly if you've whitelisted the mailing list.  In that case, c'est la vie\n;)\n\n--j.",
		footerSourceForge)
	reqs := []ReportRequest{
		{Raw: spam, Kind: store.KindSpam, Reporter: "alice"},
		{Raw: post, Kind: store.KindSpam, Reporter: "bob"},
		{Raw: spam, Kind: store.KindSpam, Reporter: "carol"},
	}
	one := newFixture(t, Options{})
	if one.eng.Checker.andd == nil {
		t.Skip("no ANDD model")
	}
	var want []store.CampaignID
	for _, r := range reqs {
		want = append(want, one.report(t, r.Raw, r.Kind, r.Reporter).Campaign)
	}
	batch := newFixture(t, Options{})
	outs, err := batch.eng.Ingester.ReportBatch(batch.ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	var got []store.CampaignID
	for _, o := range outs {
		got = append(got, o.Campaign)
	}
	if !slices.Equal(got, want) {
		t.Errorf("batch campaigns %v, one by one %v", got, want)
	}
	if want[0] == want[1] || want[0] != want[2] {
		t.Errorf("one by one: campaigns %v, want the post apart from the spam", want)
	}
}

// A spammer cannot make a campaign's text a "footer" (whose signatures
// the engine does not use) by putting a line and a separator above it:
// copies get the same verdict as copies of the plain campaign.
func TestFooterEvasion(t *testing.T) {
	tricks := []struct{ name, headers, before string }{
		{"signature delimiter", "", "Hi\n--\n"},
		{"rule", "", "Hi\n____________________\n"},
		{"forged List-Id the tail does not name", "List-Id: <friends.lists.example.org>\r\n", "Hi\n--\n"},
	}
	msg := func(headers, subject, body string) []byte {
		return []byte("From: offers@example.biz\r\nTo: user@example.org\r\n" + headers + "Subject: " + subject +
			"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n" + strings.ReplaceAll(body, "\n", "\r\n"))
	}
	for ci, c := range campaignTexts {
		for _, tr := range tricks {
			t.Run(fmt.Sprintf("campaign %d, %s", ci, tr.name), func(t *testing.T) {
				plain, tricked := newFixture(t, Options{}), newFixture(t, Options{})
				rawPlain := msg("", c.subject, c.body)
				rawTricked := msg(tr.headers, c.subject, tr.before+c.body)
				for i := range 5 {
					plain.report(t, rawPlain, store.KindSpam, fmt.Sprint("r", i))
					tricked.report(t, rawTricked, store.KindSpam, fmt.Sprint("r", i))
				}
				for _, k := range []spamgen.Kind{spamgen.Reencode, spamgen.Typos} {
					want := plain.check(t, mutate(t, rawPlain, k, 7))
					got := tricked.check(t, mutate(t, rawTricked, k, 7))
					if got.Action < want.Action || strings.Contains(got.Rule, "footer") {
						t.Errorf("%s copy: %v (%s), plain campaign: %v", k, got.Action, got.Rule, want.Action)
					}
				}
			})
		}
	}
}
