package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Purges is zero-hour purge (internal/zap) as the API serves it: what it
// took back of a campaign, and the undo of that.
type Purges interface {
	// Purge returns what the purge did for campaign id, with its latest
	// limit jobs (all with limit < 0); an error wrapping
	// store.ErrNotFound when neither the store nor the ledger knows the
	// campaign.
	Purge(ctx context.Context, id store.CampaignID, limit int) (ledger.Purge, error)
	// UndoPurge moves back what the campaign's purge moved, without
	// allowing the campaign, and returns the undo jobs made; who names
	// the administrator.
	UndoPurge(ctx context.Context, id store.CampaignID, who string) (int, error)
}

// Bounds of GET /v1/campaigns/{id}/purge's jobs (?limit=, 0: the most).
const (
	DefaultPurgeJobs = 100
	MaxPurgeJobs     = 10_000
)

// errPurgeOff answers the purge routes of a daemon without zero-hour
// purge.
var errPurgeOff = errors.New("zero-hour purge is off: the configuration names no zap backend (docs/ZAP.md)")

// Purge is the JSON view of what zero-hour purge did for a campaign.
type Purge struct {
	Campaign store.CampaignID `json:"campaign"`
	// Triggered is when the campaign's verdict reached zap.trigger (zero:
	// not now); Undone when its purge was last undone (allowed, revoked,
	// dropped below the trigger, or by hand); HeldBy the administrator who
	// undid it by hand, while it stays at the trigger.
	Triggered time.Time `json:"triggered,omitzero"`
	Undone    time.Time `json:"undone,omitzero"`
	HeldBy    string    `json:"held_by,omitempty"`
	Moves     Tally     `json:"moves"`
	Undos     Tally     `json:"undos"`
	// TotalJobs counts the jobs; Jobs are the latest of them.
	TotalJobs int        `json:"total_jobs"`
	Jobs      []PurgeJob `json:"jobs"`
}

// Tally counts a kind of purge jobs by outcome; Skipped by reason class
// (read, gone, not found, ambiguous, unpurgeable, no user, left the
// trigger, other).
type Tally struct {
	Jobs    int            `json:"jobs"`
	Moved   int            `json:"moved"`
	Skipped map[string]int `json:"skipped,omitempty"`
	Failed  int            `json:"failed"`
	Pending int            `json:"pending"`
	Logged  int            `json:"logged,omitempty"`
}

// PurgeJob is one move (or move back) of one delivered copy.
type PurgeJob struct {
	Kind      string    `json:"kind"` // move or undo
	User      string    `json:"user"`
	Rcpt      string    `json:"rcpt"`
	MessageID string    `json:"message_id"`
	From      string    `json:"from,omitempty"`
	To        string    `json:"to,omitempty"`
	Delivered time.Time `json:"delivered"`
	At        time.Time `json:"at"` // finished, or due when pending
	Status    string    `json:"status"`
	Outcome   string    `json:"outcome,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Attempts  int       `json:"attempts"`
}

// NewPurge is the JSON view of p.
func NewPurge(p ledger.Purge) Purge {
	out := Purge{Campaign: store.CampaignID(p.Campaign), Triggered: p.Mark.Triggered, Undone: p.Mark.Undone, HeldBy: p.Mark.HeldBy,
		Moves: newTally(p.Moves), Undos: newTally(p.Undos), TotalJobs: p.Total, Jobs: make([]PurgeJob, len(p.Jobs))}
	for i, j := range p.Jobs {
		from, to := j.Path()
		out.Jobs[i] = PurgeJob{Kind: j.Kind.String(), User: j.User, Rcpt: j.Rcpt, MessageID: j.MessageID, From: from, To: to,
			Delivered: j.Delivered.UTC(), At: j.When().UTC(), Status: string(j.Status), Outcome: j.Outcome, Reason: j.Reason, Attempts: j.Attempts}
	}
	return out
}

func newTally(t ledger.Tally) Tally {
	return Tally{Jobs: t.Jobs, Moved: t.Moved, Skipped: t.Skipped, Failed: t.Failed, Pending: t.Pending, Logged: t.Logged}
}

// UndoneAnswer is the answer of POST /v1/campaigns/{id}/purge/undo.
type UndoneAnswer struct {
	Campaign store.CampaignID `json:"campaign"`
	// UndoJobs counts the moves back queued now (each moved copy is moved
	// back once: a second undo queues none).
	UndoJobs int `json:"undo_jobs"`
}

// purge serves GET /v1/campaigns/{id}/purge[?limit=N].
func (h *handler) purge(w http.ResponseWriter, r *http.Request) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	if h.opts.Purges == nil {
		h.fail(w, r, http.StatusNotFound, errPurgeOff)
		return
	}
	limit := DefaultPurgeJobs
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > MaxPurgeJobs {
			h.fail(w, r, http.StatusBadRequest, fmt.Errorf("invalid limit %q: want 0 to %d", s, MaxPurgeJobs))
			return
		}
		limit = n
		if n == 0 {
			limit = MaxPurgeJobs
		}
	}
	p, err := h.opts.Purges.Purge(r.Context(), id, limit)
	if err != nil {
		h.failStore(w, r, err)
		return
	}
	h.reply(w, http.StatusOK, NewPurge(p))
}

// undoPurge serves POST /v1/campaigns/{id}/purge/undo.
func (h *handler) undoPurge(w http.ResponseWriter, r *http.Request) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	if h.opts.Purges == nil {
		h.fail(w, r, http.StatusNotFound, errPurgeOff)
		return
	}
	who := "the API"
	if t := tokenOf(r); t != nil {
		who = "API token " + t.Name
	}
	n, err := h.opts.Purges.UndoPurge(r.Context(), id, who)
	if err != nil {
		h.failStore(w, r, err)
		return
	}
	h.opts.Logger.Info("api: purge undone", "campaign", uint64(id), "by", who, "undo_jobs", n)
	h.reply(w, http.StatusOK, UndoneAnswer{Campaign: id, UndoJobs: n})
}

// Purge returns what zero-hour purge did for a campaign, with its latest
// limit jobs (0: DefaultPurgeJobs; negative: the most, MaxPurgeJobs).
func (c *Client) Purge(ctx context.Context, id store.CampaignID, limit int) (Purge, error) {
	var q url.Values
	if limit != 0 {
		q = url.Values{"limit": {strconv.Itoa(max(limit, 0))}}
	}
	var p Purge
	err := c.do(ctx, http.MethodGet, "/v1/campaigns/"+strconv.FormatUint(uint64(id), 10)+"/purge", q, nil, &p)
	return p, err
}

// UndoPurge moves back what a campaign's purge moved, without allowing
// it.
func (c *Client) UndoPurge(ctx context.Context, id store.CampaignID) (UndoneAnswer, error) {
	var a UndoneAnswer
	err := c.do(ctx, http.MethodPost, "/v1/campaigns/"+strconv.FormatUint(uint64(id), 10)+"/purge/undo", nil, nil, &a)
	return a, err
}
