package campaign

import (
	"context"
	"fmt"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/pipeline"
)

// The two entry points of zero-hour purge (internal/zap): the milter
// keeps the evidence of what it lets through (CheckEvidence), and when a
// campaign escalates the evidence kept, with the message's signs, is
// matched again against the campaigns as they are now (MatchEvidence).

// CheckEvidence is CheckWith that also returns the signed message, for
// the milter's delivery ledger: the same path (signing, lookup, policy,
// the campaign's statistics), the message not signed twice. The message
// is nil when signing failed.
func (e *Checker) CheckEvidence(ctx context.Context, raw []byte, o CheckOptions) (Verdict, *pipeline.Message, error) {
	m, err := e.pipe.Sign(ctx, raw)
	if err != nil {
		v := Verdict{Action: action.Accept, Failed: "sign"}
		v.Rule = v.Explain()
		return v, nil, fmt.Errorf("check: %w", err)
	}
	v, err := e.decide(ctx, m, true, o)
	return v, m, err
}

// MatchEvidence decides on a message's evidence (pipeline.MarshalEvidence)
// and its signs (pipeline.MarshalSigns: its graymail signs, which the
// evidence does not hold; nil for none) as a check of the message would
// now, against the campaigns as they are now, and counts nothing: it
// only reads.
func (e *Checker) MatchEvidence(ctx context.Context, ev, signs []byte) (Verdict, error) {
	m, err := pipeline.UnmarshalEvidence(ev)
	if err != nil {
		return Verdict{Action: action.Accept, Failed: "evidence"}, fmt.Errorf("match evidence: %w", err)
	}
	s, err := pipeline.UnmarshalSigns(signs)
	if err != nil {
		// Matched as a message without signs: what the evidence says.
		e.log.Warn("match evidence: signs ignored", "err", err)
	}
	m.SetSigns(s)
	return e.decide(ctx, m, false, CheckOptions{})
}
