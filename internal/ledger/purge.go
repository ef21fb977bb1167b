package ledger

import (
	"slices"
	"strings"
	"time"
)

// Purge is what zero-hour purge did for one campaign: its purge state,
// its jobs counted by outcome, and the jobs themselves, the latest first.
// The API, the dashboard and the command line show it.
type Purge struct {
	Campaign uint64
	Mark     Mark  // zero when the campaign never reached the trigger
	Moves    Tally // the move jobs
	Undos    Tally // the undo jobs
	// Jobs are the campaign's jobs, the latest first (by Job.When), at
	// most the limit asked; Total counts them all.
	Jobs  []Job
	Total int
}

// Tally counts jobs by outcome.
type Tally struct {
	Jobs    int
	Moved   int
	Skipped map[string]int // by reason class (SkipClass)
	Failed  int
	Pending int
	Logged  int // zap.mode log: only logged
}

// Reason classes of skipped jobs (SkipClass), in the order they are shown.
const (
	SkipRead        = "read"             // the user had read it
	SkipGone        = "gone"             // undo: no longer where the move put it
	SkipNotFound    = "not found"        // not (or no longer) in the source mailboxes
	SkipAmbiguous   = "ambiguous"        // several messages with its Message-ID
	SkipUnpurgeable = "unpurgeable"      // no usable Message-ID
	SkipNoUser      = "no user"          // no mailbox user for the recipient, or no such user
	SkipLeft        = "left the trigger" // the campaign was allowed, revoked or its purge undone first
	SkipOther       = "other"
)

// SkipClasses are the reason classes in the order they are shown.
var SkipClasses = []string{SkipRead, SkipGone, SkipNotFound, SkipAmbiguous, SkipUnpurgeable, SkipNoUser, SkipLeft, SkipOther}

// SkipClass is the class of a skipped job's reason (the reasons of
// internal/zap and of its backends, internal/zap/move).
func SkipClass(reason string) string {
	switch {
	case reason == "read":
		return SkipRead
	case reason == "gone":
		return SkipGone
	case reason == "not found", reason == "no such mailbox":
		return SkipNotFound
	case strings.HasPrefix(reason, "ambiguous"):
		return SkipAmbiguous
	case strings.HasPrefix(reason, "unpurgeable"):
		return SkipUnpurgeable
	case reason == "no such user", strings.HasPrefix(reason, "no mailbox user"):
		return SkipNoUser
	case strings.HasPrefix(reason, "the campaign left the trigger"), strings.HasPrefix(reason, "the purge was undone"):
		return SkipLeft
	}
	return SkipOther
}

// Add counts job j.
func (t *Tally) Add(j Job) {
	t.Jobs++
	switch {
	case j.Status == Pending:
		t.Pending++
	case j.Outcome == Moved:
		t.Moved++
	case j.Outcome == Failed:
		t.Failed++
	case j.Outcome == Logged:
		t.Logged++
	default:
		if t.Skipped == nil {
			t.Skipped = map[string]int{}
		}
		t.Skipped[SkipClass(j.Reason)]++
	}
}

// Skips is the number of skipped jobs.
func (t Tally) Skips() int {
	n := 0
	for _, v := range t.Skipped {
		n += v
	}
	return n
}

// When is the job's latest time: when it finished, else when it is due.
func (j Job) When() time.Time {
	if !j.Finished.IsZero() {
		return j.Finished
	}
	return j.Next
}

// Path is where the job moves the message: from the source mailbox to
// Junk for a move, back for an undo ("" where not known: a move that did
// not find the message).
func (j Job) Path() (from, to string) {
	if j.Kind == Undo {
		return j.To.Mailbox, j.From
	}
	return j.From, j.To.Mailbox
}

// NewPurge counts campaign c's jobs and keeps the latest limit of them
// (all with limit < 0).
func NewPurge(c uint64, m Mark, jobs []Job, limit int) Purge {
	p := Purge{Campaign: c, Mark: m, Total: len(jobs)}
	for _, j := range jobs {
		if j.Kind == Undo {
			p.Undos.Add(j)
		} else {
			p.Moves.Add(j)
		}
	}
	jobs = slices.Clone(jobs)
	slices.SortStableFunc(jobs, func(a, b Job) int { return b.When().Compare(a.When()) })
	if limit >= 0 && len(jobs) > limit {
		jobs = jobs[:limit]
	}
	p.Jobs = jobs
	return p
}

// Purge returns what zero-hour purge did for campaign c, with its latest
// limit jobs (all with limit < 0).
func (l *Ledger) Purge(c uint64, limit int) (Purge, error) {
	if l.closed.Load() {
		return Purge{}, ErrClosed
	}
	m, err := l.GetMark(c)
	if err != nil {
		return Purge{}, err
	}
	jobs, err := l.CampaignJobs(c)
	if err != nil {
		return Purge{}, err
	}
	return NewPurge(c, m, jobs, limit), nil
}
