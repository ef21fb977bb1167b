package pipeline

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
)

func TestFooterStart(t *testing.T) {
	mailman := "_______________________________________________\nUsers mailing list\nusers@lists.example.org\nhttps://lists.example.org/mailman/listinfo/users\n"
	long := strings.Repeat("a line of the footer that goes on\n", 20)
	tests := []struct {
		name string
		text string
		want string // the footer's first line, "" for none
	}{
		{"none", "Hello,\nsee you tomorrow.\n", ""},
		{"empty", "", ""},
		{"mailman", "Hello,\nsee you tomorrow.\n\n" + mailman, "_______________________________________________"},
		{"signature then mailman: the longest footer", "Hello.\n-- \nJoe\n" + mailman, "-- "},
		{"signature without its space", "Hello.\n--\nJoe Example\n", "--"},
		{"sourceforge sponsor block", "Hi.\n\n-------------------------------------------------------\nThis sf.net email is sponsored by: ThinkGeek\n" + mailman,
			"-------------------------------------------------------"},
		{"rule with text", "Hi.\n------------------------ Yahoo! Groups Sponsor ---------------------~-->\nGet it now\n", "------------------------ Yahoo! Groups Sponsor ---------------------~-->"},
		{"equals rule", "Hi.\n==========\nsent by the list\n", "=========="},
		{"indented rule", "Hi.\n   ____________\n list footer\n", "   ____________"},
		{"too short a rule", "Hi.\n---------\nnot a footer\n", ""},
		{"dashes with a word are not a delimiter", "Hi.\n--DeathToSpam--\nmore\n", ""},
		{"nothing before it", mailman, ""},
		{"only blank lines before it", "\n \n" + mailman, ""},
		{"a rule in the middle of a long text", "Intro\n__________\n" + long, ""},
		{"too many lines after the rule", "Intro\n__________\n" + strings.Repeat("x\n", footerMaxLines+1), ""},
		{"as many lines as allowed", "Intro\n__________\n" + strings.Repeat("x\n", footerMaxLines), "__________"},
		{"too many bytes after the rule", "Intro\n__________\n" + strings.Repeat("y", footerMaxBytes) + "\n", ""},
		{"CRLF line ends", "Hello.\r\n-- \r\nJoe\r\n", "-- \r"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := footerStart(tt.text)
			got := ""
			if i >= 0 {
				got, _, _ = strings.Cut(tt.text[i:], "\n")
			}
			if got != tt.want {
				t.Errorf("footer starts with %q, want %q (offset %d)", got, tt.want, i)
			}
			if i > 0 && tt.text[i-1] != '\n' {
				t.Errorf("offset %d is not at a line start", i)
			}
		})
	}
}

func TestWithoutFooter(t *testing.T) {
	doc := &mime.Document{
		Subject: "Re: [Users] build fails",
		Text:    "Try make clean, see https://docs.example.org/build\n-- \nhttps://lists.example.org/listinfo/users\nhttps://docs.example.org/build\n",
		URLs:    []string{"https://docs.example.org/build", "https://lists.example.org/listinfo/users"},
		Hosts:   []string{"docs.example.org", "lists.example.org"},
		From:    "joe@example.org",
	}
	got, ok := withoutFooter(doc)
	if !ok {
		t.Fatal("no footer found")
	}
	if got.Text != "Try make clean, see https://docs.example.org/build\n" || got.Subject != doc.Subject || got.From != doc.From {
		t.Errorf("document without footer: %+v", got)
	}
	if !slices.Equal(got.URLs, []string{"https://docs.example.org/build"}) || !slices.Equal(got.Hosts, []string{"docs.example.org"}) {
		t.Errorf("URLs %v hosts %v: want the body's only", got.URLs, got.Hosts)
	}
	if doc.Text == got.Text || len(doc.URLs) != 2 {
		t.Error("the original document was changed")
	}
	if d, ok := withoutFooter(&mime.Document{Text: "no footer here"}); ok || d.Text != "no footer here" {
		t.Errorf("without a footer: %v %+v", ok, d)
	}
	if _, ok := withoutFooter(nil); ok {
		t.Error("nil document has a footer")
	}
}

func FuzzFooterStart(f *testing.F) {
	for _, s := range []string{"", "--", "a\n--\nb", "a\n__________\n", "\n\n\n", "x\r\n-- \r\ny", "é\n==========é\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		i := footerStart(s)
		if i < -1 || i >= len(s) || (i > 0 && s[i-1] != '\n') {
			t.Fatalf("footerStart(%q) = %d", s, i)
		}
		withoutFooter(&mime.Document{Text: s, URLs: []string{s}, Hosts: []string{s}})
	})
}

// maskedBags is the plain version of BagsWithin that dropFooterIMatch
// relies on: the bags whose signature of terms is also the signature of
// terms with every word i not in[i] replaced by "\x00" (a word of no
// lexicon, sorting first).
func maskedBags(im *imatchbag.Signer, terms []string, in []bool) uint64 {
	masked := make([]string, 0, len(terms))
	var inside []string
	for i, t := range terms {
		if in[i] {
			inside = append(inside, t)
		} else {
			masked = append(masked, "\x00")
		}
	}
	masked = append(masked, inside...)
	same := im.SignSorted(masked).Signatures
	var bags uint64
	for _, sig := range im.SignSorted(terms).Signatures {
		if slices.Contains(same, sig) {
			bags |= 1 << sig.Bag
		}
	}
	return bags
}

// TestBagsWithinMatchesReference checks imatchbag's BagsWithin, on which
// dropFooterIMatch relies, against maskedBags on every corpus message
// with signatures: the words of its footer, when it has one, and random
// subsets of its words (from a tenth to all of them).
func TestBagsWithinMatchesReference(t *testing.T) {
	msgs, names, _ := loadCorpus(t)
	im, _, _ := signers(t)
	rng := rand.New(rand.NewPCG(1, 2))
	checked, dropped := 0, 0
	for n, raw := range msgs {
		doc := mime.Parse(raw, mime.Options{})
		terms := mime.Analyze(doc, mime.TokenOptions{}).Sorted
		if len(im.SignSorted(terms).Signatures) == 0 {
			continue
		}
		var masks [][]bool
		if at := messageFooter(doc); at >= 0 {
			foot := mime.UniqueTermsOf(&mime.Document{Text: doc.Text[at:]}, mime.TokenOptions{})
			in := make([]bool, len(terms))
			for i, t := range terms {
				_, in[i] = slices.BinarySearch(foot, t)
			}
			masks = append(masks, in)
		}
		for range 3 {
			p := 0.1 + 0.9*rng.Float64()
			in := make([]bool, len(terms))
			for i := range in {
				in[i] = rng.Float64() < p
			}
			masks = append(masks, in)
		}
		for _, in := range masks {
			want := maskedBags(im, terms, in)
			got := im.BagsWithin(terms, func(i int) bool { return in[i] })
			if got != want {
				t.Fatalf("%s: BagsWithin = %#x, masked signatures say %#x", names[n], got, want)
			}
			checked++
			if got != 0 {
				dropped++
			}
		}
	}
	t.Logf("%d term subsets checked, %d with signatures of their own", checked, dropped)
}

// TestContainsLower checks containsLower against strings.ToLower and
// strings.Contains.
func TestContainsLower(t *testing.T) {
	subs := []string{"", "users", "users-list", "k", "i̇", "ß", "straße"}
	texts := []string{"", "Users mailing list", "USERS", "use", "Users-List@lists", "\u212a", "K", "İstanbul", "STRASSE", "Straße users", "xusersx"}
	for _, s := range texts {
		for _, sub := range subs {
			if got, want := containsLower(s, sub), strings.Contains(strings.ToLower(s), sub); got != want {
				t.Errorf("containsLower(%q, %q) = %v, want %v", s, sub, got, want)
			}
		}
	}
}
