// Package action is the one vocabulary of what nddmilter does with a
// message: accept, tag, quarantine or reject (the verdict actions, mildest
// first), and tempfail, the 4xx reply that defers a message instead of
// rejecting it or when checking it failed. The campaign engine, the
// configuration, the milter, the metrics and the HTTP API all use it.
package action

import (
	"errors"
	"fmt"
	"strings"
)

// Action is what is done with a message. The verdict actions are ordered
// mildest first, so that a cap is a comparison: Accept < Tag < Quarantine
// < Reject. Tempfail is a reply, not a verdict: it is never the outcome of
// the policy and sorts after Reject only to keep the order of the others.
type Action uint8

// The actions.
const (
	Accept Action = iota
	Tag
	Quarantine
	Reject
	Tempfail
)

var names = [...]string{"accept", "tag", "quarantine", "reject", "tempfail"}

// Verdicts lists the verdict actions, mildest first.
func Verdicts() []Action { return []Action{Accept, Tag, Quarantine, Reject} }

// All lists every action, the verdict actions then Tempfail (e.g. for the
// label values of a metric).
func All() []Action { return []Action{Accept, Tag, Quarantine, Reject, Tempfail} }

// String returns the action's name: accept, tag, quarantine, reject or
// tempfail.
func (a Action) String() string {
	if int(a) < len(names) {
		return names[a]
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Valid reports whether a is one of the actions.
func (a Action) Valid() bool { return int(a) < len(names) }

// IsVerdict reports whether a is a verdict action (not Tempfail).
func (a Action) IsVerdict() bool { return a <= Reject }

// ErrUnknown is wrapped by the errors of Parse.
var ErrUnknown = errors.New("unknown action")

// Parse parses an action name (case-insensitive, surrounding spaces
// ignored), among the given actions; with none given, among the verdict
// actions. The error names the accepted values.
func Parse(s string, among ...Action) (Action, error) {
	if len(among) == 0 {
		among = Verdicts()
	}
	name := strings.ToLower(strings.TrimSpace(s))
	for _, a := range among {
		if a.String() == name {
			return a, nil
		}
	}
	return Accept, fmt.Errorf("%w %q (want %s)", ErrUnknown, s, list(among))
}

// list spells actions as "a, b or c".
func list(as []Action) string {
	var b strings.Builder
	for i, a := range as {
		switch {
		case i == 0:
		case i == len(as)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	return b.String()
}

// MarshalText encodes the action as its name (so JSON shows "reject").
func (a Action) MarshalText() ([]byte, error) {
	if !a.Valid() {
		return nil, fmt.Errorf("invalid action %d", int(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText decodes any action's name.
func (a *Action) UnmarshalText(b []byte) error {
	v, err := Parse(string(b), All()...)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Cap returns a lowered to limit when it is stronger.
func (a Action) Cap(limit Action) Action { return min(a, limit) }
