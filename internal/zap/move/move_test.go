package move

import (
	"testing"
	"time"
)

func TestChoose(t *testing.T) {
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	r := Request{MessageID: "a@x", UnreadOnly: true, NotBefore: at}
	c := func(id string, seen bool, recv time.Time) Candidate {
		return Candidate{Mailbox: "INBOX", UID: 1, MessageID: id, Seen: seen, Received: recv}
	}
	for _, tc := range []struct {
		name   string
		cs     []Candidate
		ok     bool
		reason string
	}{
		{"one", []Candidate{c("a@x", false, at.Add(time.Second))}, true, ""},
		{"none", nil, false, ReasonNotFound},
		{"substring only", []Candidate{c("xa@x", false, at), c("a@xy", false, at)}, false, ReasonNotFound},
		{"read", []Candidate{c("a@x", true, at)}, false, ReasonRead},
		{"older: another message with a forged id", []Candidate{c("a@x", false, at.Add(-time.Hour))}, false, ReasonNotFound},
		{"within the clock slack", []Candidate{c("a@x", false, at.Add(-time.Minute))}, true, ""},
		{"older one and the copy", []Candidate{c("a@x", false, at.Add(-time.Hour)), c("a@x", false, at)}, true, ""},
		{"two copies", []Candidate{c("a@x", false, at), c("a@x", false, at.Add(time.Second))}, false, ReasonAmbiguous},
		{"unknown date", []Candidate{c("a@x", false, time.Time{})}, true, ""},
	} {
		_, res, ok := Choose(r, tc.cs)
		if ok != tc.ok || (!ok && res.Reason != tc.reason) {
			t.Errorf("%s: ok %v %q, want %v %q", tc.name, ok, res.Reason, tc.ok, tc.reason)
		}
	}
	r.UnreadOnly = false
	if _, _, ok := Choose(r, []Candidate{c("a@x", true, at)}); !ok {
		t.Error("read message not chosen without UnreadOnly")
	}
}

func TestParseMessageID(t *testing.T) {
	for in, want := range map[string]string{
		"<a@x>": "a@x", " <a@x> (comment)": "a@x", "a@x": "a@x", "a@x junk": "a@x", "<a@x": "a@x", "": "",
	} {
		if got := ParseMessageID(in); got != want {
			t.Errorf("ParseMessageID(%q) = %q, want %q", in, got, want)
		}
	}
}
