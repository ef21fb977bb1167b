package dashboard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Purges is zero-hour purge (internal/zap) as the campaign page shows
// it: what it took back of a campaign, and the undo of that.
type Purges interface {
	// Purge returns what the purge did for campaign id, with its latest
	// limit jobs.
	Purge(ctx context.Context, id store.CampaignID, limit int) (ledger.Purge, error)
	// UndoPurge moves back what the campaign's purge moved, without
	// allowing the campaign, and returns the undo jobs made; who names
	// the administrator.
	UndoPurge(ctx context.Context, id store.CampaignID, who string) (int, error)
}

// Bounds of the purge section: the jobs listed, and a user's and a
// Message-ID's characters (both come from the mail: attacker-controlled).
const (
	purgeJobs      = 200
	purgeUserRunes = 120
	purgeIDRunes   = 160
)

// purgeView is the campaign page's purge section.
type purgeView struct {
	Triggered, Undone time.Time
	HeldBy            string
	Moves, Undos      tallyRow
	Jobs              []purgeRow
	Total             int
	More              bool
	// CanUndo: some copy moved that no undo job moves back yet.
	CanUndo bool
	Error   string
}

// tallyRow counts a kind of jobs; Skipped by reason, e.g. "read 3, gone 1".
type tallyRow struct {
	Jobs, Moved, Skips, Failed, Pending, Logged int
	Skipped                                     string
}

type purgeRow struct {
	Kind, User, MessageID, From, To string
	At                              time.Time
	Outcome, Reason                 string
}

func newTallyRow(t ledger.Tally) tallyRow {
	var parts []string
	for _, c := range ledger.SkipClasses {
		if n := t.Skipped[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	return tallyRow{Jobs: t.Jobs, Moved: t.Moved, Skips: t.Skips(), Failed: t.Failed, Pending: t.Pending, Logged: t.Logged,
		Skipped: strings.Join(parts, ", ")}
}

// purgeSection reads what the purge did for campaign id (nil when zap is
// off); a failure shows in the section, not as the page's.
func (h *Handler) purgeSection(ctx context.Context, id store.CampaignID) *purgeView {
	if h.opts.Purges == nil {
		return nil
	}
	p, err := h.opts.Purges.Purge(ctx, id, purgeJobs)
	if err != nil {
		return &purgeView{Error: err.Error()}
	}
	v := &purgeView{Triggered: p.Mark.Triggered, Undone: p.Mark.Undone, HeldBy: clean(p.Mark.HeldBy, purgeUserRunes, true),
		Moves: newTallyRow(p.Moves), Undos: newTallyRow(p.Undos), Total: p.Total, More: p.Total > len(p.Jobs),
		CanUndo: p.Moves.Moved > p.Undos.Jobs}
	for _, j := range p.Jobs {
		from, to := j.Path()
		v.Jobs = append(v.Jobs, purgeRow{Kind: j.Kind.String(), User: clean(j.User, purgeUserRunes, true),
			MessageID: clean(j.MessageID, purgeIDRunes, true), From: clean(from, 100, true), To: clean(to, 100, true),
			At: j.When(), Outcome: outcome(j), Reason: clean(j.Reason, 200, true)})
	}
	return v
}

// outcome names where a job stands: pending, or how it finished.
func outcome(j ledger.Job) string {
	if j.Status == ledger.Pending {
		if j.Attempts > 0 {
			return fmt.Sprintf("pending (%d tries)", j.Attempts)
		}
		return "pending"
	}
	return j.Outcome
}
