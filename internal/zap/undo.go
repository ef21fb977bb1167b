package zap

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nddmilter/nddmilter/internal/ledger"
)

// UndoPurge undoes campaign c's purge by hand: what its jobs moved goes
// back where it was (undo jobs, run as an allow's are), its moves not
// run yet are skipped, and its copies are not purged again until the
// campaign leaves the trigger and reaches it anew. The campaign itself
// is not changed (it is not allowed). who names the administrator; it is
// logged and kept with the campaign's purge state. It returns the number
// of undo jobs made.
func (p *Purger) UndoPurge(ctx context.Context, c uint64, who string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return UndoPurge(ctx, p.l, c, who, p.o.Clock(), p.log)
}

// Purge returns what the purge did for campaign c, with its latest limit
// jobs (all with limit < 0).
func (p *Purger) Purge(c uint64, limit int) (ledger.Purge, error) { return p.l.Purge(c, limit) }

// UndoPurge is Purger.UndoPurge on a ledger no purger runs on (the
// command line while the daemon is stopped): the undo jobs run when the
// daemon starts.
func UndoPurge(ctx context.Context, l *ledger.Ledger, c uint64, who string, now time.Time, log *slog.Logger) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if who == "" {
		who = "an administrator"
	}
	m, err := l.GetMark(c)
	if err != nil {
		return 0, err
	}
	m.Triggered, m.Undone, m.HeldBy = time.Time{}, now, who
	if err := l.SetMark(c, m); err != nil {
		return 0, err
	}
	n, err := undoJobs(l, c, now)
	if err != nil {
		return n, fmt.Errorf("zap: undo the purge of campaign %d: %w", c, err)
	}
	if log != nil {
		log.Info("zap: purge undone by hand: moving back", "campaign", c, "by", who, "undo_jobs", n)
	}
	return n, nil
}
