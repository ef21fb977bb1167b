// Package api is nddmilter's HTTP API: junk and not-junk reports, message
// checks and campaign statistics over the same campaign Engine the milter
// uses, behind a bearer token. It also holds the JSON views of campaigns
// shared by the API and the command line, and a Client for the API.
//
// Routes (all under /v1, all answering JSON; errors are {"error": "..."}):
//
//	POST   /v1/reports?kind=spam|ham&reporter=ID  raw message (ARF accepted) → Outcome
//	POST   /v1/check[?record=1]                   raw message → campaign.Verdict (a dry run unless record=1; dry_run=1 accepted)
//	GET    /v1/campaigns?since=24h&sort=S&limit=N&offset=M → []Summary: a page (limit default 100, 0 = the most, 10,000)
//	       S: recent (default), volume, reports, hour, day (messages in the last hour/day) or ham (not-spam reports: the false-positive watch)
//	GET    /v1/campaigns/{id}                     → Detail
//	GET    /v1/campaigns/{id}/series              → []Hour (hourly series over the hours kept)
//	GET    /v1/now?sort=hour|day&limit=N&offset=M&hours=24 → Now (campaigns ranked by recent volume with sparklines, totals per hour, store counts)
//	DELETE /v1/campaigns/{id}                     → {"deleted": id}
//	POST   /v1/campaigns/{id}/allow[?undo=1]      → Summary
//	GET    /v1/campaigns/{id}/purge[?limit=N]     → Purge: what zero-hour purge took back (404 when zap is off)
//	POST   /v1/campaigns/{id}/purge/undo          → UndoneAnswer: move it back, without allowing the campaign
//	GET    /v1/store/backup                       → the store's online backup (octet stream; trailer X-Nddmilter-Backup-Status: ok)
//	GET    /v1/store/stats                        → StoreStats
//	GET    /v1/store/verify                       → VerifyAnswer (read-only)
package api

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Outcome is the JSON form of a report's outcome.
type Outcome struct {
	Kind     string             `json:"kind"` // spam or ham
	Campaign store.CampaignID   `json:"campaign"`
	Created  bool               `json:"created"`
	Joined   []store.CampaignID `json:"joined,omitempty"`
	Merged   []store.CampaignID `json:"merged,omitempty"`
	Repeated bool               `json:"repeated"`
	// Duplicate: this reporter had reported this very message with the
	// same kind; nothing changed. Withdrawn: with the other kind; that
	// vote was withdrawn before this one counted.
	Duplicate bool `json:"duplicate,omitempty"`
	Withdrawn bool `json:"withdrawn,omitempty"`
	Revoked   bool `json:"revoked"`
	ARF       bool `json:"arf"`
	// SkipReason and Skipped are set when the message could not be used:
	// the reason's short name (the same for every message it applies to)
	// and the explanation.
	SkipReason campaign.SkipReason `json:"skip_reason,omitempty"`
	Skipped    string              `json:"skipped,omitempty"`
	// VoteOnly says why the report only counted on the campaign (the
	// merge rule, docs/SECURITY.md); Apart that it matched through ANDD
	// only and started a campaign of its own.
	VoteOnly string `json:"vote_only,omitempty"`
	Apart    bool   `json:"apart,omitempty"`
	// Replication, in a fleet: "replicated" (in the fleet's stream) or
	// "queued" (waiting in this node's outbox while NATS is unreachable;
	// no campaign yet).
	Replication string `json:"replication,omitempty"`
}

// NewOutcome converts an engine outcome.
func NewOutcome(kind store.Kind, o campaign.ReportOutcome) Outcome {
	return Outcome{
		Kind:        KindName(kind),
		Campaign:    o.Campaign,
		Created:     o.Created,
		Joined:      o.Joined,
		Merged:      o.Merged,
		Repeated:    o.Repeated,
		Duplicate:   o.Duplicate,
		Withdrawn:   o.Withdrawn,
		Revoked:     o.Revoked,
		ARF:         o.ARF,
		SkipReason:  o.Skip,
		Skipped:     o.Skipped,
		VoteOnly:    o.VoteOnly,
		Apart:       o.Apart,
		Replication: o.Replication,
	}
}

// KindName is "spam" or "ham".
func KindName(k store.Kind) string {
	switch k {
	case store.KindSpam:
		return "spam"
	case store.KindHam:
		return "ham"
	}
	return fmt.Sprintf("kind(%d)", k)
}

// ParseKind parses "spam" (also "junk") or "ham" (also "not-spam",
// "not-junk"); "" is spam.
func ParseKind(s string) (store.Kind, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "spam", "junk":
		return store.KindSpam, nil
	case "ham", "not-spam", "notspam", "not-junk":
		return store.KindHam, nil
	}
	return 0, fmt.Errorf("unknown report kind %q (want spam or ham)", s)
}

// StateName is "active", "allowed" or "revoked".
func StateName(s store.State) string {
	switch s {
	case store.StateActive:
		return "active"
	case store.StateAllowed:
		return "allowed"
	case store.StateRevoked:
		return "revoked"
	}
	return fmt.Sprintf("state(%d)", s)
}

// Summary is the JSON view of a campaign in a listing.
type Summary struct {
	ID            store.CampaignID   `json:"id"`
	State         string             `json:"state"`
	FirstSeen     time.Time          `json:"first_seen"`
	LastSeen      time.Time          `json:"last_seen"`
	Messages      int64              `json:"messages"`
	SpamReports   int64              `json:"spam_reports"`
	HamReports    int64              `json:"ham_reports"`
	SpamReporters int64              `json:"spam_reporters"`
	HamReporters  int64              `json:"ham_reporters"`
	Actions       map[string]int64   `json:"actions,omitempty"`
	SampleSubject string             `json:"sample_subject"`
	SampleFrom    string             `json:"sample_from"`
	Keys          int                `json:"keys,omitempty"` // not filled by listings
	Sketches      int                `json:"sketches"`
	MergedFrom    []store.CampaignID `json:"merged_from,omitempty"`
	// HourMessages and DayMessages are the matched messages of the last
	// hour and day windows (store.RankHourHours, store.RankDayHours).
	HourMessages int64 `json:"hour_messages"`
	DayMessages  int64 `json:"day_messages"`
}

// NewSummary converts a campaign record.
func NewSummary(c *store.Campaign) Summary {
	return Summary{
		ID:            c.ID,
		State:         StateName(c.State),
		FirstSeen:     c.FirstSeen.UTC(),
		LastSeen:      c.LastSeen.UTC(),
		Messages:      c.Messages,
		SpamReports:   c.SpamReports,
		HamReports:    c.HamReports,
		SpamReporters: c.SpamReporters,
		HamReporters:  c.HamReporters,
		Actions:       c.Actions,
		SampleSubject: c.SampleSubject,
		SampleFrom:    c.SampleFrom,
		Keys:          len(c.Keys),
		Sketches:      len(c.Sketches),
		MergedFrom:    c.MergedFrom,
		HourMessages:  c.HourMessages,
		DayMessages:   c.DayMessages,
	}
}

// Watched is the JSON view of a campaign of the false-positive watch
// (GET /v1/watch): the campaign, the sender domains of its copies that
// also send ham, and the reasons in words.
type Watched struct {
	Summary
	HamSenders []HamSender `json:"ham_senders,omitempty"`
	// GraymailCopies are this node's copies held back as graymail, and
	// Graymail says such copies are accepted unless near-copies
	// (campaign.Watched).
	GraymailCopies int64    `json:"graymail_copies,omitempty"`
	Graymail       bool     `json:"graymail,omitempty"`
	Reasons        []string `json:"reasons"`
}

// HamSender is a sender domain of a campaign's copies that also sends
// ham (campaign.HamSender).
type HamSender struct {
	Domain string `json:"domain"`
	Copies int64  `json:"copies"`
	Ham    int64  `json:"ham_messages"`
}

// NewWatched converts a campaign of the false-positive watch.
func NewWatched(w *campaign.Watched) Watched {
	out := Watched{Summary: NewSummary(&w.Campaign), GraymailCopies: w.GraymailCopies, Graymail: w.Graymail, Reasons: w.Reasons()}
	for _, s := range w.HamSenders {
		out.HamSenders = append(out.HamSenders, HamSender{Domain: s.Domain, Copies: s.Copies, Ham: s.Ham})
	}
	return out
}

// Hour is one hour of a campaign's hourly series.
type Hour struct {
	Hour        time.Time `json:"hour"` // start, UTC
	Messages    int64     `json:"messages"`
	SpamReports int64     `json:"spam_reports"`
	HamReports  int64     `json:"ham_reports"`
	Acted       int64     `json:"acted"`
}

// NewHours converts an hourly series.
func NewHours(hs []store.HourCount) []Hour {
	out := make([]Hour, len(hs))
	for i, h := range hs {
		out[i] = Hour{Hour: h.Hour.UTC(), Messages: h.Messages, SpamReports: h.SpamReports, HamReports: h.HamReports, Acted: h.Acted}
	}
	return out
}

// HourTotal is one hour of the store-wide totals.
type HourTotal struct {
	Hour        time.Time        `json:"hour"` // start, UTC
	Checked     int64            `json:"checked"`
	Matched     int64            `json:"matched"`
	Actions     map[string]int64 `json:"actions,omitempty"`
	SpamReports int64            `json:"spam_reports"`
	HamReports  int64            `json:"ham_reports"`
}

// RankedSummary is a campaign of the now view with its sparkline.
type RankedSummary struct {
	Summary
	Series []Hour `json:"series"`
}

// Now is the JSON view of campaign.NowView.
type Now struct {
	At        time.Time       `json:"at"`
	Sort      string          `json:"sort"`
	Campaigns []RankedSummary `json:"campaigns"`
	Totals    []HourTotal     `json:"totals"`
	Stats     StoreStats      `json:"stats"`
}

// NewNow converts the now view.
func NewNow(v campaign.NowView) Now {
	n := Now{At: v.At.UTC(), Sort: v.Sort, Stats: NewStoreStats(v.Stats),
		Campaigns: make([]RankedSummary, len(v.Campaigns)), Totals: make([]HourTotal, len(v.Totals))}
	for i := range v.Campaigns {
		n.Campaigns[i] = RankedSummary{Summary: NewSummary(&v.Campaigns[i].Campaign), Series: NewHours(v.Campaigns[i].Series)}
	}
	for i, t := range v.Totals {
		n.Totals[i] = HourTotal{Hour: t.Hour.UTC(), Checked: t.Checked, Matched: t.Matched, Actions: t.Actions, SpamReports: t.SpamReports, HamReports: t.HamReports}
	}
	return n
}

// ListQuery selects a page of campaigns (the parameters of GET
// /v1/campaigns and of `nddmilter campaigns list`).
type ListQuery struct {
	Since time.Duration // look-back window, 0 for all
	Sort  string        // see ParseSort
	// Limit is the page size (0: the most, store.MaxListLimit),
	// Offset the campaigns skipped.
	Limit, Offset int
}

// Query returns the campaign query of q at time now.
func (q ListQuery) Query(now time.Time) store.Query {
	cq := store.Query{Sort: q.Sort, Limit: q.Limit, Offset: q.Offset}
	if cq.Limit == 0 {
		cq.Limit = store.MaxListLimit
	}
	if q.Since > 0 {
		cq.Since = now.Add(-q.Since)
	}
	return cq
}

// Day is one day of a campaign's time series.
type Day struct {
	Day         string `json:"day"` // YYYY-MM-DD (UTC)
	Messages    int64  `json:"messages"`
	SpamReports int64  `json:"spam_reports"`
	HamReports  int64  `json:"ham_reports"`
}

// Detail is the JSON view of one campaign with its signatures and timeline.
type Detail struct {
	Summary
	// SampleText is the start of the first reported copy's visible text
	// (at most store.MaxSampleText bytes); "" for campaigns reported
	// before it was kept.
	SampleText string `json:"sample_text,omitempty"`
	// Decision is what the policy would do with an exact copy (all I-Match
	// bags matched), with its explanation.
	Decision      action.Action `json:"decision"`
	DecisionRule  string        `json:"decision_rule"`
	Reputation    float64       `json:"reputation"`
	SignatureKeys []string      `json:"signature_keys"` // hex
	Timeline      []Day         `json:"timeline"`
	// Hours is the hourly series over the hours the store keeps.
	Hours []Hour `json:"hours"`
	// Reporters are the campaign's distinct reporters (the first
	// MaxDetailReporters). The store keeps no reporter ids, only their
	// hash: the first 16 hex digits of the SHA-256 of the id.
	Reporters []Reporter `json:"reporters"`
}

// MaxDetailReporters bounds the reporters a Detail lists.
const MaxDetailReporters = 1000

// Reporter is the JSON view of one distinct reporter of a campaign.
type Reporter struct {
	Kind  string    `json:"kind"` // spam or ham
	Hash  string    `json:"hash"` // 16 hex digits: SHA-256 of the reporter id
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// Trust is a spam reporter's record and weight (docs/POLICY.md,
	// "Reporter trust"), for the first MaxTrustReporters spam reporters
	// when reporter trust is on.
	Trust *campaign.TrustRecord `json:"trust,omitempty"`
}

// MaxTrustReporters is the number of a campaign's spam reporters whose
// records a detail reads.
const MaxTrustReporters = 32

// ReporterHash is the Reporter.Hash of a reporter id.
func ReporterHash(id string) string { return fmt.Sprintf("%016x", store.ReporterHash(id)) }

// GetDetail reads a campaign and its timeline through the read model r,
// and shows what its policy would do with an exact copy.
func GetDetail(ctx context.Context, r *campaign.Reader, id store.CampaignID) (Detail, error) {
	c, err := r.Get(ctx, id)
	if err != nil {
		return Detail{}, err // names the campaign already
	}
	days, err := r.Timeline(ctx, id)
	if err != nil {
		return Detail{}, err // names the campaign already
	}
	d := Detail{Summary: NewSummary(c), SampleText: c.SampleText, Reputation: r.Policy().Reputation(c)}
	dec := r.ExactCopy(c)
	d.Decision, d.DecisionRule = dec.Action, dec.Rule
	d.SignatureKeys = make([]string, len(c.Keys))
	for i, k := range c.Keys {
		d.SignatureKeys[i] = hex.EncodeToString(k)
	}
	hours, err := r.Series(ctx, id)
	if err != nil {
		return Detail{}, err
	}
	d.Hours = NewHours(hours)
	d.Timeline = make([]Day, len(days))
	for i, dc := range days {
		d.Timeline[i] = Day{Day: dc.Day.UTC().Format(time.DateOnly), Messages: dc.Messages, SpamReports: dc.SpamReports, HamReports: dc.HamReports}
	}
	reps, err := r.Reporters(ctx, id, MaxDetailReporters)
	if err != nil {
		return Detail{}, err
	}
	d.Reporters = make([]Reporter, len(reps))
	for i, rp := range reps {
		d.Reporters[i] = Reporter{Kind: KindName(rp.Kind), Hash: fmt.Sprintf("%016x", rp.Hash), First: rp.First, Last: rp.Last}
		if rp.Kind == store.KindSpam && i < MaxTrustReporters {
			tr, ok, err := r.ReporterTrust(ctx, rp.Hash)
			if err != nil {
				return Detail{}, err
			}
			if ok {
				d.Reporters[i].Trust = &tr
			}
		}
	}
	return d, nil
}

// ParseSince parses a look-back duration: a Go duration ("90m", "24h")
// optionally preceded by whole days ("7d", "1d12h"); "" means all time.
func ParseSince(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: want e.g. 90m, 24h, 7d", s)
		}
		days = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid duration %q: want e.g. 90m, 24h, 7d", s)
	}
	return days + d, nil
}

// ParseSort validates a listing order ("" is recent).
func ParseSort(s string) (string, error) {
	switch s {
	case "":
		return "recent", nil
	case store.SortRecent, store.SortVolume, store.SortReports, store.SortHour, store.SortDay, store.SortHam:
		return s, nil
	}
	return "", fmt.Errorf("unknown sort %q (want recent, volume, reports, hour, day or ham)", s)
}

// ParseID parses a campaign ID (decimal).
func ParseID(s string) (store.CampaignID, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("invalid campaign id %q", s)
	}
	return store.CampaignID(n), nil
}
