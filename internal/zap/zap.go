// Package zap is zero-hour purge: it takes back the copies of a campaign
// that were delivered before the campaign escalated. The milter keeps
// what it lets through in the delivery ledger (internal/ledger); when a
// campaign's verdict for its copies reaches the trigger (default
// quarantine), the ledger's entries are matched again against the
// campaigns as they are now (campaign.Engine.MatchEvidence), and each
// entry that a check would now act on becomes a purge job per recipient:
// move the copy from the user's source mailboxes to Junk, through a
// mailbox server's backend (internal/zap/doveadm, internal/zap/imap).
// When the campaign is allowed, revoked or falls below the trigger, what
// was moved is moved back (undo jobs).
//
// Users' choices win: only unread copies move (by default); a job is made
// once per entry and user, so a copy the user took out of Junk is never
// moved again; an undo moves back only the message the move put in Junk.
// Jobs are durable in the ledger's database, retried with backoff while
// the mail server is down, rate-limited, and in mode log only logged.
package zap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/metrics"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/nddmilter/nddmilter/internal/zap/move"
)

// Campaigns is what the purge reads of the campaign engine
// (*campaign.Engine): its read queries and MatchEvidence.
type Campaigns interface {
	List(ctx context.Context, q store.Query) ([]store.Campaign, error)
	Get(ctx context.Context, id store.CampaignID) (*store.Campaign, error)
	ExactCopy(c *store.Campaign) campaign.Decision
	MatchEvidence(ctx context.Context, ev, signs []byte) (campaign.Verdict, error)
}

// Modes of Options.Mode.
const (
	ModeMove = "move" // move (the default)
	ModeLog  = "log"  // only log what would move
)

// Options configure a Purger. Zero values select the defaults.
type Options struct {
	// Mode is ModeMove (default) or ModeLog.
	Mode string
	// Trigger is the action from which a campaign's copies are purged.
	// Default quarantine.
	Trigger action.Action
	// Sources are the mailboxes searched. Default [INBOX].
	Sources []string
	// Junk is where copies go. Default "Junk".
	Junk string
	// MoveRead moves read copies too. Default false: unread only.
	MoveRead bool
	// Rate bounds the jobs run per second. Default 10.
	Rate float64
	// UserMap maps recipients to mailbox users. Default as-is.
	UserMap UserMap
	// ScanInterval is how often campaigns are looked at and due jobs
	// run. Default 2 s.
	ScanInterval time.Duration
	// RematchInterval is the least time between two matches of the whole
	// ledger made because a triggered campaign grew (new reporters or
	// signatures: copies that matched it below the trigger, or not at
	// all, may match now); at least ten times the last one's duration.
	// Default 1 min.
	RematchInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait before a retry (doubling
	// from MinBackoff). Defaults 5 s and 10 min.
	MinBackoff, MaxBackoff time.Duration
	// GiveUp is how long a job is retried before it fails. Default 48 h.
	GiveUp time.Duration
	// Logger gets a line per job finished. Default: discard.
	Logger *slog.Logger
	// Metrics counts the jobs (nil: none).
	Metrics *metrics.Zap
	// Clock is the time source. Default time.Now.
	Clock func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Mode == "" {
		o.Mode = ModeMove
	}
	if o.Trigger == action.Accept {
		o.Trigger = action.Quarantine
	}
	if len(o.Sources) == 0 {
		o.Sources = []string{"INBOX"}
	}
	if o.Junk == "" {
		o.Junk = "Junk"
	}
	if o.Rate <= 0 {
		o.Rate = 10
	}
	if o.UserMap == nil {
		o.UserMap, _ = ParseUserMap(MapAsIs)
	}
	if o.ScanInterval <= 0 {
		o.ScanInterval = 2 * time.Second
	}
	if o.RematchInterval <= 0 {
		o.RematchInterval = 10 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 5 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Minute
	}
	if o.GiveUp <= 0 {
		o.GiveUp = 48 * time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// Purger runs zero-hour purge. Scan and Work are called by Run; tests
// call them directly.
type Purger struct {
	l   *ledger.Ledger
	c   Campaigns
	m   move.Mover
	o   Options
	lim *rate.Limiter
	log *slog.Logger

	// mu orders the changes of the campaigns' purge state: a scan's,
	// and an undo by hand from the API.
	mu       sync.Mutex
	lastScan time.Time
	// grown: a triggered campaign changed (new reporters, signatures)
	// since the ledger was last matched whole: copies that matched it
	// below the trigger, or not at all, may match now. seen is each
	// triggered campaign's growth at that match; lastFull when it was and
	// fullTook how long it took (the next waits at least ten times that).
	grown    bool
	seen     map[store.CampaignID]growth
	lastFull time.Time
	fullTook time.Duration
}

// growth is what makes a campaign match more copies, or more strongly.
type growth struct {
	spamReporters int64
	evidence      int
}

func growthOf(c *store.Campaign) growth {
	return growth{spamReporters: c.SpamReporters, evidence: len(c.Keys) + len(c.Sketches)}
}

// New returns a purger over the ledger, the campaigns and a backend.
func New(l *ledger.Ledger, c Campaigns, m move.Mover, o Options) (*Purger, error) {
	if l == nil || c == nil || m == nil {
		return nil, errors.New("zap: a ledger, the campaigns and a backend are needed")
	}
	o = o.withDefaults()
	if o.Mode != ModeMove && o.Mode != ModeLog {
		return nil, fmt.Errorf("zap: mode %q is not %s or %s", o.Mode, ModeLog, ModeMove)
	}
	if o.Trigger < action.Tag {
		return nil, fmt.Errorf("zap: trigger %s: want tag, quarantine or reject", o.Trigger)
	}
	return &Purger{l: l, c: c, m: m, o: o, lim: rate.NewLimiter(rate.Limit(o.Rate), 1), log: o.Logger,
		seen: map[store.CampaignID]growth{}}, nil
}

// Run scans and works every ScanInterval until ctx ends.
func (p *Purger) Run(ctx context.Context) {
	t := time.NewTicker(p.o.ScanInterval)
	defer t.Stop()
	for {
		if err := p.Scan(ctx); err != nil && ctx.Err() == nil {
			p.log.Error("zap: scan", "err", err)
		}
		if _, err := p.Work(ctx); err != nil && ctx.Err() == nil {
			p.log.Error("zap: jobs", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
