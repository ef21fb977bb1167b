package ledger

import (
	"errors"
	"testing"
	"time"
)

func TestPurgeReport(t *testing.T) {
	l := open(t, t.TempDir(), Options{})
	at := time.Unix(1_700_000_000, 0)
	add := func(k Kind, seq uint64, user string, done bool, outcome, reason string) Job {
		e := makeKey(at, seq)
		j := Job{ID: MakeJobID(k, e, user), Kind: k, Entry: e, Campaign: 9, User: user, MessageID: "m@x", Next: at.Add(time.Duration(seq) * time.Second)}
		if err := l.AddJob(j); err != nil {
			t.Fatal(err)
		}
		if done {
			j.Status, j.Outcome, j.Reason, j.Finished = Done, outcome, reason, at.Add(time.Duration(seq)*time.Minute)
			if outcome == Moved {
				j.From, j.To = "INBOX", Location{Mailbox: "Junk", UID: uint32(seq)}
			}
			if err := l.UpdateJob(j); err != nil {
				t.Fatal(err)
			}
		}
		return j
	}
	moved := add(Move, 1, "a", true, Moved, "")
	add(Move, 2, "b", true, "skipped", "read")
	add(Move, 3, "c", true, "skipped", "unpurgeable: no Message-ID")
	add(Move, 4, "d", true, Failed, "retries ran out: refused")
	add(Move, 5, "e", false, "", "")
	undo := add(Undo, 1, "a", true, Moved, "")
	undo.From, undo.To = moved.From, moved.To
	if err := l.SetMark(9, Mark{Triggered: at, HeldBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	p, err := l.Purge(9, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 6 || len(p.Jobs) != 3 || !p.Mark.Held() || p.Mark.HeldBy != "alice" {
		t.Fatalf("purge %+v", p)
	}
	m := p.Moves
	if m.Jobs != 5 || m.Moved != 1 || m.Failed != 1 || m.Pending != 1 || m.Skipped[SkipRead] != 1 || m.Skipped[SkipUnpurgeable] != 1 || m.Skips() != 2 {
		t.Errorf("moves %+v", m)
	}
	if p.Undos.Jobs != 1 || p.Undos.Moved != 1 {
		t.Errorf("undos %+v", p.Undos)
	}
	// Latest first: the jobs finished 5, 4 and 3 minutes in (the pending
	// one is due 5 s in).
	if p.Jobs[0].User != "d" || p.Jobs[1].User != "c" || p.Jobs[2].User != "b" {
		t.Errorf("order: %s %s %s", p.Jobs[0].User, p.Jobs[1].User, p.Jobs[2].User)
	}
	if f, to := moved.Path(); f != "INBOX" || to != "Junk" {
		t.Errorf("move path %s → %s", f, to)
	}
	if f, to := undo.Path(); f != "Junk" || to != "INBOX" {
		t.Errorf("undo path %s → %s", f, to)
	}
	if none, err := l.Purge(10, -1); err != nil || none.Total != 0 || none.Mark.Triggered != (time.Time{}) {
		t.Errorf("a campaign without jobs: %+v, %v", none, err)
	}
}

// A second process (here: a second open) finds the ledger locked.
func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	open(t, dir, Options{})
	if l, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
}
