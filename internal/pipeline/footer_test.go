package pipeline

import (
	"slices"
	"strings"
	"testing"

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
