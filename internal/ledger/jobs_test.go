package ledger

import (
	"errors"
	"testing"
	"time"
)

func TestJobsIdempotentAndQueued(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	at := time.Unix(1_700_000_000, 0)
	e := makeKey(at, 1)
	j := Job{ID: MakeJobID(Move, e, "alice"), Kind: Move, Entry: e, Campaign: 7, User: "alice", MessageID: "m@x", Next: at}
	if err := l.AddJob(j); err != nil {
		t.Fatal(err)
	}
	if err := l.AddJob(j); !errors.Is(err, ErrJobExists) {
		t.Fatalf("second AddJob: %v, want ErrJobExists", err)
	}
	// Another user of the same entry is another job.
	j2 := j
	j2.ID, j2.User, j2.Next = MakeJobID(Move, e, "bob"), "bob", at.Add(time.Minute)
	if err := l.AddJob(j2); err != nil {
		t.Fatal(err)
	}
	due, err := l.DueJobs(at, 10)
	if err != nil || len(due) != 1 || due[0].User != "alice" || due[0].Entry != e {
		t.Fatalf("DueJobs(at) = %+v, %v", due, err)
	}
	// A retry later.
	due[0].Attempts, due[0].Next = 1, at.Add(2*time.Minute)
	if err := l.UpdateJob(due[0]); err != nil {
		t.Fatal(err)
	}
	due, _ = l.DueJobs(at.Add(90*time.Second), 10)
	if len(due) != 1 || due[0].User != "bob" {
		t.Fatalf("DueJobs(+90s) = %+v", due)
	}
	// Done survives a restart, and is never redone.
	a, _ := l.GetJob(j.ID)
	a.Status, a.Outcome, a.To = Done, Moved, Location{Mailbox: "Junk", Validity: "v1", UID: 42}
	if err := l.UpdateJob(a); err != nil {
		t.Fatal(err)
	}
	if err := l.UpdateJob(a); !errors.Is(err, ErrJobDone) {
		t.Fatalf("updating a job done: %v, want ErrJobDone", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, Options{})
	if err := l.AddJob(j); !errors.Is(err, ErrJobExists) {
		t.Fatalf("AddJob after a restart: %v, want ErrJobExists", err)
	}
	got, err := l.GetJob(j.ID)
	if err != nil || got.Status != Done || got.To.UID != 42 || got.Entry != e || got.Campaign != 7 {
		t.Fatalf("job after a restart %+v, %v", got, err)
	}
	due, _ = l.DueJobs(at.Add(time.Hour), 10)
	if len(due) != 1 || due[0].User != "bob" {
		t.Fatalf("queue after a restart %+v", due)
	}
	cj, err := l.CampaignJobs(7)
	if err != nil || len(cj) != 2 {
		t.Fatalf("CampaignJobs = %d, %v", len(cj), err)
	}
	if n, _ := l.PendingJobs(); n != 1 {
		t.Errorf("PendingJobs = %d, want 1", n)
	}
}

func TestMarksAndCursor(t *testing.T) {
	l := open(t, "", Options{})
	at := time.Unix(1_700_000_000, 0).UTC()
	if err := l.SetMark(3, Mark{Triggered: at, Action: "quarantine"}); err != nil {
		t.Fatal(err)
	}
	m, err := l.Marks()
	if err != nil || len(m) != 1 || !m[3].Triggered.Equal(at) || m[3].Action != "quarantine" {
		t.Fatalf("Marks = %+v, %v", m, err)
	}
	k := makeKey(at, 9)
	if err := l.SetCursor(k); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Cursor(); err != nil || got != k {
		t.Fatalf("Cursor = %v, %v", got, err)
	}
}

func TestPruneJobs(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	l := open(t, "", Options{JobRetention: time.Hour, Clock: c.now})
	e := makeKey(c.now(), 1)
	j := Job{ID: MakeJobID(Move, e, "a"), Kind: Move, Entry: e, Campaign: 1, Next: c.now()}
	if err := l.AddJob(j); err != nil {
		t.Fatal(err)
	}
	j.Status, j.Outcome, j.Finished = Done, Moved, c.now()
	if err := l.UpdateJob(j); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.pruneJobs(); n != 0 {
		t.Fatalf("pruned %d within the retention", n)
	}
	c.add(2 * time.Hour)
	if n, err := l.pruneJobs(); n != 1 || err != nil {
		t.Fatalf("pruneJobs = %d, %v", n, err)
	}
	if cj, _ := l.CampaignJobs(1); len(cj) != 0 {
		t.Errorf("jobs left %+v", cj)
	}
}
