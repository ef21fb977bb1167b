package campaign

import (
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/store"
)

// A signed note (a one-line note, then its author's signature) matches a
// campaign through its body key alone only once 2 accounts reported it:
// every note of the author shares that key, so one account's mistaken
// report of one note must not tag the others. A copy of the whole note,
// and an unsigned short message with another greeting, match as before.
func TestSignedNote(t *testing.T) {
	const sig = "\n-- \n\"I don't take no stocks in mathematics, anyway\" --Huckleberry Finn\n"
	msg := func(subject, text string) []byte {
		return []byte("From: CDale <cdale@techmonkeys.example>\r\nTo: fork@xent.example\r\nSubject: " + subject + "\r\n\r\n" + text + "\n")
	}
	reported := msg("EFnet #fork", "Someone has taken it. Mostly newtel users. I think we can take the.\nC"+sig)
	other := msg("calling wayne", "You around?\nC"+sig)
	// A spammer's short pitch set as a signature under a changed greeting.
	pitch := func(greeting string) []byte {
		return msg("hello", greeting+"\nC\n-- \nCheap meds without prescription, visit http://pills.example.com/x now")
	}
	unsigned := func(greeting string) []byte {
		return msg("meeting", greeting+"\nsee you at the meeting tomorrow in the big room")
	}
	tests := []struct {
		name      string
		report    []byte
		reporters int
		check     []byte
		want      action.Action
		ignored   bool // the verdict names the signed note's campaign as not counted
	}{
		{"another note of the author, 1 reporter", reported, 1, other, action.Accept, true},
		{"another note of the author, 2 reporters", reported, 2, other, action.Tag, false},
		{"the reported note itself, 1 reporter", reported, 1, reported, action.Tag, false},
		{"a signed pitch with another greeting, 1 reporter", pitch("Hi Bob,"), 1, pitch("Dear Ann,"), action.Accept, true},
		{"a signed pitch with another greeting, 2 reporters", pitch("Hi Bob,"), 2, pitch("Dear Ann,"), action.Tag, false},
		{"an unsigned note with another greeting, 1 reporter", unsigned("Hi Bob,"), 1, unsigned("Dear Ann,"), action.Tag, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			for i := range tt.reporters {
				f.report(t, tt.report, store.KindSpam, string(rune('a'+i)))
			}
			v := f.check(t, tt.check)
			if v.Action != tt.want {
				t.Errorf("action %v, want %v (%s)", v.Action, tt.want, v.Rule)
			}
			if got := len(v.SignedNoteOnly) > 0; got != tt.ignored {
				t.Errorf("signed note ignored %v, want %v (%s)", got, tt.ignored, v.Rule)
			}
			if tt.ignored && !strings.Contains(v.Rule, "body key of a signed note only") {
				t.Errorf("rule %q does not say why", v.Rule)
			}
		})
	}
}
