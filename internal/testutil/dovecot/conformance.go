package dovecot

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/zap/move"
)

// Conformance runs the scenarios every backend must pass against s,
// which Start made with the users alice, bob and carol; mover talks to
// s. Users' choices win: a read copy stays, an older message or a
// substring match is never moved, two copies with one id are left
// alone, an undo moves back only the message the move put in Junk.
func Conformance(t *testing.T, s *Server, m move.Mover) {
	ctx := context.Background()
	at := time.Now().Add(-time.Minute)
	req := func(user, id string) move.Request {
		return move.Request{User: user, MessageID: id, Sources: []string{"INBOX"}, Junk: "Junk", UnreadOnly: true, NotBefore: at}
	}
	must := func(res move.Result, err error) move.Result {
		t.Helper()
		if err != nil {
			t.Fatalf("backend error: %v\n%s", err, s.Log())
		}
		return res
	}
	s.Deliver("alice", "INBOX", Raw("ham-0@example.org", "ham"), false, at)
	s.Deliver("alice", "INBOX", Raw("c1@spam.example", "copy"), false, at)
	s.Deliver("alice", "INBOX", Raw("xc2@spam.example", "substring"), false, at)
	s.Deliver("alice", "INBOX", Raw("c3@spam.example", "read copy"), true, at)
	s.Deliver("alice", "INBOX", Raw("c4@spam.example", "older message"), false, at.Add(-time.Hour))
	s.Deliver("alice", "INBOX", Raw("c5@spam.example", "dup"), false, at)
	s.Deliver("alice", "INBOX", Raw("c5@spam.example", "dup"), false, at)

	res := must(m.Move(ctx, req("alice", "c1@spam.example")))
	if res.Outcome != move.Moved || res.From != "INBOX" || res.To.Mailbox != "Junk" || res.To.UID == 0 || res.To.Validity == "" {
		t.Fatalf("unread copy: %+v", res)
	}
	if !slices.Contains(s.IDs("alice", "Junk"), "c1@spam.example") || slices.Contains(s.IDs("alice", "INBOX"), "c1@spam.example") {
		t.Fatalf("unread copy not moved: INBOX %v, Junk %v", s.IDs("alice", "INBOX"), s.IDs("alice", "Junk"))
	}
	moved := res
	// Again: nothing left to move (the job runner never asks twice, but
	// a backend must not move anything else either).
	if res := must(m.Move(ctx, req("alice", "c1@spam.example"))); res.Outcome != move.Skipped || res.Reason != move.ReasonNotFound {
		t.Errorf("second move: %+v", res)
	}
	for _, c := range []struct{ id, reason string }{
		{"c2@spam.example", move.ReasonNotFound},  // only a substring match
		{"c3@spam.example", move.ReasonRead},      // the user read it
		{"c4@spam.example", move.ReasonNotFound},  // an older message with the id
		{"c5@spam.example", move.ReasonAmbiguous}, // two copies
		{"none@spam.example", move.ReasonNotFound},
	} {
		if res := must(m.Move(ctx, req("alice", c.id))); res.Outcome != move.Skipped || res.Reason != c.reason {
			t.Errorf("%s: %+v, want skipped %q", c.id, res, c.reason)
		}
	}
	inbox := s.IDs("alice", "INBOX")
	for _, id := range []string{"ham-0@example.org", "xc2@spam.example", "c3@spam.example", "c4@spam.example", "c5@spam.example"} {
		if !slices.Contains(inbox, id) {
			t.Errorf("%s left INBOX: %v", id, inbox)
		}
	}
	if n := len(s.IDs("alice", "Junk")); n != 1 {
		t.Errorf("Junk has %d messages, want 1", n)
	}

	// Undo moves it back.
	undo := move.UndoRequest{User: "alice", MessageID: "c1@spam.example", At: moved.To, To: "INBOX"}
	if res := must(m.Undo(ctx, undo)); res.Outcome != move.Moved {
		t.Fatalf("undo: %+v", res)
	}
	if !slices.Contains(s.IDs("alice", "INBOX"), "c1@spam.example") || len(s.IDs("alice", "Junk")) != 0 {
		t.Fatalf("undo: INBOX %v, Junk %v", s.IDs("alice", "INBOX"), s.IDs("alice", "Junk"))
	}
	if res := must(m.Undo(ctx, undo)); res.Outcome != move.Skipped || res.Reason != move.ReasonGone {
		t.Errorf("second undo: %+v", res)
	}

	// bob takes the moved copy out of Junk and puts it back himself: it
	// is his choice now, and an undo leaves it in Junk. carol takes hers
	// out: an undo leaves it where she put it.
	for _, u := range []string{"bob", "carol"} {
		s.Deliver(u, "INBOX", Raw("c6@spam.example", "copy"), false, at)
	}
	rb := must(m.Move(ctx, req("bob", "c6@spam.example")))
	rc := must(m.Move(ctx, req("carol", "c6@spam.example")))
	if rb.Outcome != move.Moved || rc.Outcome != move.Moved {
		t.Fatalf("moves of c6: %+v %+v", rb, rc)
	}
	s.MoveAsUser("bob", "Junk", "INBOX", "c6@spam.example")
	s.MoveAsUser("bob", "INBOX", "Junk", "c6@spam.example")
	s.MoveAsUser("carol", "Junk", "INBOX", "c6@spam.example")
	for _, c := range []struct {
		user string
		at   move.Location
	}{{"bob", rb.To}, {"carol", rc.To}} {
		res := must(m.Undo(ctx, move.UndoRequest{User: c.user, MessageID: "c6@spam.example", At: c.at, To: "INBOX"}))
		if res.Outcome != move.Skipped || res.Reason != move.ReasonGone {
			t.Errorf("undo after %s's own move: %+v", c.user, res)
		}
	}
	if ids := s.IDs("bob", "Junk"); !slices.Contains(ids, "c6@spam.example") {
		t.Errorf("bob's own Junk move undone: Junk %v", ids)
	}
	if ids := s.IDs("carol", "INBOX"); !slices.Contains(ids, "c6@spam.example") {
		t.Errorf("carol's own move undone: INBOX %v", ids)
	}

	// The server down: an error (the job waits), then it works.
	s.Deliver("alice", "INBOX", Raw("c7@spam.example", "copy"), false, at)
	s.Stop()
	if _, err := m.Move(ctx, req("alice", "c7@spam.example")); err == nil {
		t.Error("no error with the server down")
	}
	s.Start()
	if res := must(m.Move(ctx, req("alice", "c7@spam.example"))); res.Outcome != move.Moved {
		t.Errorf("after the server is back: %+v", res)
	}
}
