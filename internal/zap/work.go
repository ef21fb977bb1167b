package zap

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/zap/move"
)

// Work runs the jobs due now, at most Rate per second, and returns how
// many it finished.
func (p *Purger) Work(ctx context.Context) (int, error) {
	done := 0
	for {
		jobs, err := p.l.DueJobs(p.o.Clock(), 64)
		if err != nil || len(jobs) == 0 {
			return done, err
		}
		for _, j := range jobs {
			if err := p.lim.Wait(ctx); err != nil {
				return done, err
			}
			finished, err := p.run(ctx, j)
			if err != nil {
				return done, err
			}
			if finished {
				done++
			}
		}
		if ctx.Err() != nil {
			return done, ctx.Err()
		}
	}
}

// run runs one job and stores its outcome, or its next try.
func (p *Purger) run(ctx context.Context, j ledger.Job) (bool, error) {
	now := p.o.Clock()
	j.Attempts++
	var res move.Result
	mark, err := p.l.GetMark(j.Campaign)
	if err != nil {
		return false, err
	}
	switch {
	case j.Kind == ledger.Move && mark.Held():
		res = move.Result{Outcome: move.Skipped, Reason: "the purge was undone by " + mark.HeldBy}
	case j.Kind == ledger.Move && mark.Triggered.IsZero():
		res = move.Result{Outcome: move.Skipped, Reason: "the campaign left the trigger"}
	case p.o.Mode == ModeLog:
		res = move.Result{Outcome: ledger.Logged}
	case j.Kind == ledger.Move:
		res, err = p.m.Move(ctx, move.Request{User: j.User, MessageID: j.MessageID, Sources: p.o.Sources, Junk: p.o.Junk,
			UnreadOnly: !p.o.MoveRead, NotBefore: j.Delivered})
	default:
		res, err = p.m.Undo(ctx, move.UndoRequest{User: j.User, MessageID: j.MessageID,
			At: move.Location{Mailbox: j.To.Mailbox, Validity: j.To.Validity, UID: j.To.UID}, To: j.From})
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if now.Sub(j.Created) < p.o.GiveUp {
			j.Next = now.Add(p.backoff(j.Attempts))
			j.Reason = err.Error()
			p.log.Warn("zap: mail server unavailable, job retried", "kind", j.Kind.String(), "campaign", j.Campaign,
				"user", j.User, "attempt", j.Attempts, "retry_in", j.Next.Sub(now).String(), "err", err)
			return false, p.update(j)
		}
		res = move.Result{Outcome: move.Failed, Reason: "retries ran out: " + err.Error()}
	}
	j.Status, j.Outcome, j.Reason, j.Finished = ledger.Done, string(res.Outcome), res.Reason, now
	if j.Kind == ledger.Move && res.Outcome == move.Moved {
		j.From = res.From
		j.To = ledger.Location{Mailbox: res.To.Mailbox, Validity: res.To.Validity, UID: res.To.UID}
	}
	if err := p.finish(j); err != nil {
		return true, err
	}
	if j.Kind == ledger.Move && j.Outcome == ledger.Moved && !p.triggered(j.Campaign) {
		// The campaign was allowed, revoked or its purge undone while
		// the move ran: the undo made then did not know of this one.
		if err := p.l.AddJob(undoOf(j, p.o.Clock())); err != nil && !errors.Is(err, ledger.ErrJobExists) {
			return true, err
		}
	}
	return true, nil
}

// finish stores a finished job, logs it and counts it.
func (p *Purger) finish(j ledger.Job) error {
	if err := p.update(j); err != nil {
		return err
	}
	p.o.Metrics.Job(j.Kind.String(), j.Outcome)
	lvl := slog.LevelInfo
	if j.Outcome == move.Failed.String() {
		lvl = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("kind", j.Kind.String()), slog.Uint64("campaign", j.Campaign),
		slog.String("user", j.User), slog.String("message_id", j.MessageID), slog.String("outcome", j.Outcome)}
	if j.Reason != "" {
		attrs = append(attrs, slog.String("reason", j.Reason))
	}
	if j.From != "" {
		attrs = append(attrs, slog.String("from", j.From))
	}
	if j.To.Mailbox != "" {
		attrs = append(attrs, slog.String("to", j.To.Mailbox))
	}
	p.log.LogAttrs(context.Background(), lvl, "zap", attrs...)
	return nil
}

func (p *Purger) update(j ledger.Job) error {
	err := p.l.UpdateJob(j)
	if errors.Is(err, ledger.ErrJobDone) {
		return nil // finished elsewhere: the first outcome stands
	}
	return err
}

// backoff is the wait before attempt n+1: MinBackoff doubled per
// attempt, at most MaxBackoff.
func (p *Purger) backoff(n int) time.Duration {
	d := p.o.MinBackoff
	for i := 1; i < n && d < p.o.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.o.MaxBackoff)
}

// triggered reports whether campaign c's copies are purged now.
func (p *Purger) triggered(c uint64) bool {
	m, err := p.l.GetMark(c)
	return err == nil && !m.Triggered.IsZero() && !m.Held()
}
