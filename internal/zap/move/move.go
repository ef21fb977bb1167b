// Package move is what zero-hour purge (internal/zap) asks of a mailbox
// server and what the server's backend (internal/zap/doveadm,
// internal/zap/imap) answers: move one delivered copy, found by its
// Message-ID, from a user's source mailboxes to Junk, or move it back.
//
// A backend finds candidates by a header search, then decides with
// Choose on what it fetched of them: a message is moved only when exactly
// one candidate has exactly the Message-ID and arrived no earlier than
// the milter saw it (a header search matches substrings, and an older
// message may share a forged id). It moves by UID, and says where the
// message went, so that an undo moves back that message only (a copy the
// user took out of Junk, even back in again, has another UID and stays).
package move

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Request asks to move one delivered copy to Junk.
type Request struct {
	User      string   // the mailbox user
	MessageID string   // without angle brackets (ledger.CheckMessageID holds)
	Sources   []string // mailboxes searched, in order
	Junk      string   // where to
	// UnreadOnly moves only a message without \Seen.
	UnreadOnly bool
	// NotBefore: the message arrived (its internal date) no earlier than
	// this, less ClockSlack.
	NotBefore time.Time
}

// UndoRequest asks to move back what a Request moved.
type UndoRequest struct {
	User      string
	MessageID string
	At        Location // where the move put it
	To        string   // the mailbox it was moved from
}

// Location is where a moved message is: its mailbox, that mailbox's
// identity (IMAP UIDVALIDITY, or Dovecot's mailbox GUID) and its UID.
// UID 0: unknown (the server did not say).
type Location struct {
	Mailbox  string
	Validity string
	UID      uint32
}

// Outcome is how a request ended.
type Outcome string

// Outcomes.
const (
	Moved   Outcome = "moved"
	Skipped Outcome = "skipped"
	Failed  Outcome = "failed"
)

// Reasons of Skipped and Failed results.
const (
	ReasonRead      = "read"      // the user has read it (UnreadOnly)
	ReasonNotFound  = "not found" // not (or no longer) in the source mailboxes
	ReasonAmbiguous = "ambiguous" // several messages with that Message-ID: none moved
	ReasonGone      = "gone"      // undo: no longer where the move put it (the user moved or deleted it)
	ReasonNoUser    = "no such user"
	ReasonNoMailbox = "no such mailbox"
)

// Result is a backend's answer.
type Result struct {
	Outcome Outcome
	Reason  string
	From    string   // the mailbox the message was found in
	To      Location // where it is now (Moved)
}

// Mover is a mailbox server's backend. An error is transient (the
// server unreachable, a timeout, a refused login): the job is retried
// later. A Result with Outcome Failed is final.
type Mover interface {
	Move(ctx context.Context, r Request) (Result, error)
	Undo(ctx context.Context, r UndoRequest) (Result, error)
}

// ClockSlack is how much earlier than NotBefore a message's internal date
// may be (the mail server's clock against the milter's).
const ClockSlack = 5 * time.Minute

// Candidate is a message a header search found.
type Candidate struct {
	Mailbox   string
	UID       uint32
	MessageID string // as parsed by ParseMessageID
	Seen      bool
	Received  time.Time // internal date; zero: unknown
}

// Choose picks the message to move among a search's candidates: those
// with exactly the Message-ID that arrived no earlier than NotBefore
// (less ClockSlack). It returns the candidate and true, or the Skipped
// result that says why none is moved.
func Choose(r Request, cs []Candidate) (Candidate, Result, bool) {
	var match []Candidate
	for _, c := range cs {
		if c.MessageID != r.MessageID {
			continue // a substring match
		}
		if !r.NotBefore.IsZero() && !c.Received.IsZero() && c.Received.Before(r.NotBefore.Add(-ClockSlack)) {
			continue // older than the delivery: another message with the same id
		}
		match = append(match, c)
	}
	switch {
	case len(match) == 0:
		return Candidate{}, Result{Outcome: Skipped, Reason: ReasonNotFound}, false
	case len(match) > 1:
		return Candidate{}, Result{Outcome: Skipped, Reason: ReasonAmbiguous}, false
	case r.UnreadOnly && match[0].Seen:
		return Candidate{}, Result{Outcome: Skipped, Reason: ReasonRead, From: match[0].Mailbox}, false
	}
	return match[0], Result{}, true
}

// ParseMessageID is a Message-ID header's value without angle brackets,
// read as the pipeline reads it (internal/mime).
func ParseMessageID(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, '<'); i >= 0 {
		if j := strings.IndexByte(v[i:], '>'); j > 0 {
			return strings.TrimSpace(v[i+1 : i+j])
		}
		return strings.TrimSpace(v[i+1:])
	}
	if i := strings.IndexAny(v, " \t"); i >= 0 {
		v = v[:i]
	}
	return v
}

// ErrConfig is wrapped by the backends' errors about their settings.
var ErrConfig = errors.New("zap backend: configuration")

// String is the outcome's name.
func (o Outcome) String() string { return string(o) }
