package store

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestSampleText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"short", "hello", "hello"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"long", strings.Repeat("x", MaxSampleText+10), strings.Repeat("x", MaxSampleText)},
		{"cut between characters", strings.Repeat("x", MaxSampleText-1) + "é", strings.Repeat("x", MaxSampleText-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sampleText(tt.in)
			if got != tt.want || !utf8.ValidString(got) || len(got) > MaxSampleText {
				t.Errorf("sampleText = %q (%d bytes), want %q", got, len(got), tt.want)
			}
		})
	}
}

// TestSampleTextStored: the first spam report's text is kept, bounded; a
// record written without the field reads as having none.
func TestSampleTextStored(t *testing.T) {
	s := openTest(t, "", Options{})
	in := spam("alice", t0, "t1")
	in.Text = strings.Repeat("ab\xff", MaxSampleText)
	r := mustReport(t, s, in)
	in2 := spam("bob", t0.Add(time.Minute), "t1")
	in2.Text = "second"
	mustReport(t, s, in2)
	c := mustGet(t, s, r.Campaign)
	if len(c.SampleText) == 0 || len(c.SampleText) > MaxSampleText || !utf8.ValidString(c.SampleText) || !strings.HasPrefix(c.SampleText, "ab\uFFFD") {
		t.Errorf("SampleText %q (%d bytes)", c.SampleText[:min(len(c.SampleText), 20)], len(c.SampleText))
	}

	old := (&record{Campaign: Campaign{ID: 1, SampleSubject: "s"}}).encode()
	withText := (&record{Campaign: Campaign{ID: 1, SampleSubject: "s", SampleText: "text"}}).encode()
	if len(withText) <= len(old) || string(withText[:len(old)]) != string(old) {
		t.Fatalf("the sample text is not a trailing field")
	}
	for _, tc := range []struct {
		b    []byte
		want string
	}{{old, ""}, {withText, "text"}} {
		r, err := decodeRecord(1, tc.b)
		if err != nil || r.SampleText != tc.want {
			t.Errorf("decode: %q, %v; want %q", r.SampleText, err, tc.want)
		}
	}
	if _, err := decodeRecord(1, withText[:len(withText)-1]); err == nil {
		t.Error("a cut sample text decoded")
	}
}
