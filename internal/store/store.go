// Package store keeps nddmilter's memory: known campaigns, the signature
// index that maps signature keys to campaigns, reporters, per-campaign
// daily and hourly counters, and the rankings and store-wide counters
// that every write keeps up to date so that listings and statistics never
// scan the campaigns (index.go, hours.go, counts.go). Keys are opaque
// byte strings to this package: it knows
// nothing of parsing or of how signatures are computed. The only backend is
// Badger (see Open); Store is the narrow interface a shared fleet backend
// will implement later.
package store

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned for an unknown campaign.
var ErrNotFound = errors.New("campaign not found (expired, deleted or merged into another; see `nddmilter campaigns list`)")

// CampaignID identifies a campaign. IDs are never reused.
type CampaignID uint64

// Kind is the kind of a report.
type Kind uint8

const (
	KindSpam Kind = 1 // the reporter says the message is junk
	KindHam  Kind = 2 // the reporter says the message is not junk
)

// State is the administrative state of a campaign.
type State uint8

const (
	StateActive  State = 0 // acted on according to policy
	StateAllowed State = 1 // an administrator said: never act on it
	StateRevoked State = 2 // not-spam evidence outweighed spam reports
)

// Campaign is the record of one campaign.
type Campaign struct {
	ID        CampaignID
	State     State
	FirstSeen time.Time
	LastSeen  time.Time // last hit or report; drives expiry
	// Messages counts checked messages that matched the campaign.
	Messages int64
	// SpamReports and HamReports count reports; the *Reporters fields count
	// distinct reporters (one reporter counts once per campaign).
	SpamReports, HamReports     int64
	SpamReporters, HamReporters int64
	// Actions counts the actions taken on matching messages, by action name.
	Actions       map[string]int64
	SampleSubject string
	SampleFrom    string
	// SampleText is an excerpt of the first reported copy's visible text
	// (at most MaxSampleText bytes, valid UTF-8), for administrators.
	SampleText string
	// Keys is every index key pointing at the campaign, so that deleting the
	// campaign removes all of them.
	Keys [][]byte
	// Sketches holds a few representative similarity sketches (opaque),
	// capped in number, used to verify candidates found through band keys.
	Sketches [][]byte
	// MergedFrom lists campaigns merged into this one.
	MergedFrom []CampaignID
	// HourMessages and DayMessages are the matched messages of the hour
	// and day windows (RankHourHours, RankDayHours) as of the query; set by
	// List and Record, not stored.
	HourMessages, DayMessages int64
	// Terms holds the term sets (opaque, versioned by their writer) of a
	// few reported messages, capped like Sketches, used to verify
	// similarity matches exactly.
	Terms [][]byte
}

// ReportInput is one report, applied atomically by Store.Report.
type ReportInput struct {
	Time     time.Time
	Kind     Kind
	Reporter string // "" counts as an anonymous reporter
	// ReporterHashed says that Reporter is not an id but the hash the
	// store keeps of one (ReporterHashHex): what a fleet's events carry,
	// so that reporter ids never leave the node that took the report.
	ReporterHashed bool
	// Keys are the message's index keys. Without Vetted, campaigns sharing
	// any of them are joined (several active ones are merged into the
	// oldest). A key already owned by a campaign the report does not join
	// or merge stays with its owner.
	Keys [][]byte
	// Sketch is the message's similarity sketch, kept as a representative.
	Sketch []byte
	// MoreSketches are sketches of other families of the message, kept the
	// same way. Sketches are grouped by their first byte (a family's
	// version or tag byte): a campaign keeps up to Options.MaxSketches of
	// each group.
	MoreSketches [][]byte
	// Terms is the message's term set (opaque), kept like Sketch; longer
	// than MaxTermsLen, it is not kept.
	Terms []byte
	// Join lists campaigns the caller matched by similarity, joined like
	// those found through Keys (ignored when Vetted).
	Join []CampaignID
	// Vetted says that the caller (the campaign engine) decided what the
	// report joins and merges (docs/SECURITY.md, "What one reporter can
	// do"): the report joins Target — or, when Target is 0, the oldest
	// campaign owning one of Keys (a campaign created earlier in the same
	// batch), without merging anything, and else creates one (Create) —
	// and only the campaigns of MayMerge are merged with it.
	Vetted bool
	// Target is the campaign a Vetted report joins (0: see Vetted).
	Target CampaignID
	// MayMerge lists the campaigns a Vetted report merges with Target,
	// into the oldest of them.
	MayMerge []CampaignID
	// Create makes a new campaign when nothing matches (spam reports).
	Create bool
	// Index adds Keys to the index of the resulting campaign (spam reports).
	Index         bool
	Subject, From string
	// Text is an excerpt of the message's visible text, kept as the
	// campaign's SampleText (cut to MaxSampleText bytes).
	Text string
	// Revoke, when set, is asked after a not-spam report counted on an
	// active campaign whether the campaign is now revoked (the engine's
	// policy): the state changes in the report's own transaction.
	Revoke func(*Campaign) bool `json:"-"`
	// Digest identifies the message reported (any stable digest of its
	// content, at most MaxDigestLen bytes; empty: none). The same
	// reporter reporting the same digest again with the same kind counts
	// once (ReportResult.Duplicate); with the other kind it withdraws the
	// earlier vote (ReportResult.Withdrawn). See msgreport.go.
	Digest []byte
}

// MaxSampleText bounds Campaign.SampleText, in bytes.
const MaxSampleText = 1024

// ReportResult tells what a report did.
type ReportResult struct {
	Campaign CampaignID // 0 when nothing matched and nothing was created
	Created  bool
	Merged   []CampaignID // campaigns merged into Campaign
	// Repeated is true when this reporter had already reported the campaign
	// with the same kind: counts of reports grow, counts of reporters don't.
	Repeated bool
	// Duplicate is true when this reporter had already reported this very
	// message (ReportInput.Digest) with the same kind: nothing changed
	// (Repeated is set too, Campaign is the campaign of the first report).
	Duplicate bool
	// Withdrawn is true when this reporter had reported this very message
	// with the other kind: that vote was taken off Campaign before this
	// one counted.
	Withdrawn bool
	// Revoked is true when the report revoked the campaign (Revoke).
	Revoked bool
}

// Hit is one index key found in the store.
type Hit struct {
	Key      []byte
	Campaign CampaignID
}

// Listing orders of Query.Sort.
const (
	SortRecent  = "recent"  // last seen, latest first (the default)
	SortVolume  = "volume"  // matched messages over the campaign's life
	SortReports = "reports" // distinct spam reporters, then spam reports
	SortHour    = "hour"    // matched messages in the hour window (RankHourHours)
	SortDay     = "day"     // matched messages in the day window (RankDayHours)
	SortHam     = "ham"     // distinct not-spam reporters, then not-spam reports; only campaigns that have some
)

// Listing bounds of Query.Limit.
const (
	DefaultListLimit = 100
	MaxListLimit     = 10000
)

// Query selects a page of campaigns. Every order is read from an index
// kept up to date by reports and hits, so a page costs about
// Offset+Limit index entries and Limit records, whatever the store's size.
type Query struct {
	// Since keeps campaigns whose LastSeen is at or after it; zero for
	// all. The window orders (SortHour, SortDay) ignore it.
	Since time.Time
	// Sort is one of the Sort* orders ("" is SortRecent).
	Sort string
	// Limit is the page size: 0 means DefaultListLimit, at most
	// MaxListLimit.
	Limit int
	// Offset skips that many campaigns of the order (paging).
	Offset int
}

// Page returns q's page size and offset within their bounds.
func (q Query) Page() (limit, offset int) {
	limit = q.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	return min(limit, MaxListLimit), max(q.Offset, 0)
}

// DayCount is one day of a campaign's time series.
type DayCount struct {
	Day         time.Time // midnight UTC
	Messages    int64
	SpamReports int64
	HamReports  int64
}

// Stats summarizes the store. The counts are kept up to date by every
// write, so Stats costs a few reads whatever the store's size.
type Stats struct {
	Campaigns int64
	// Active, Allowed and Revoked count the campaigns by State.
	Active, Allowed, Revoked int64
	Keys                     int64
	// SpamReports and HamReports count the reports of the campaigns in
	// the store, Messages the matched messages counted on them.
	SpamReports, HamReports, Messages int64
	DiskBytes                         int64
	// DiskFree is the free space of the store's filesystem (-1: unknown),
	// DiskFull whether writes are refused for lack of it (ErrDiskFull),
	// WritesRefused how many were refused since the store was opened.
	DiskFree      int64
	DiskFull      bool
	WritesRefused int64
}

// Store is the interface the campaign engine uses. Implementations are safe
// for concurrent use.
type Store interface {
	Lookup(ctx context.Context, keys [][]byte) ([]Hit, error)
	Get(ctx context.Context, id CampaignID) (*Campaign, error)
	// Record is Get without Keys, which a large campaign has thousands of.
	Record(ctx context.Context, id CampaignID) (*Campaign, error)
	List(ctx context.Context, q Query) ([]Campaign, error)
	Report(ctx context.Context, in ReportInput) (ReportResult, error)
	// RecordHit counts a matched message and the action taken, and
	// refreshes LastSeen. It may be buffered briefly.
	RecordHit(ctx context.Context, id CampaignID, action string, at time.Time) error
	// RecordCheck counts a checked message that matched no campaign in the
	// hourly totals. It may be buffered briefly.
	RecordCheck(ctx context.Context, action string, at time.Time) error
	SetState(ctx context.Context, id CampaignID, s State) error
	Delete(ctx context.Context, id CampaignID) error
	Timeline(ctx context.Context, id CampaignID) ([]DayCount, error)
	// Hours is a campaign's hourly series from since on (kept for a
	// bounded time, Options.HourRetention for Badger).
	Hours(ctx context.Context, id CampaignID, since time.Time) ([]HourCount, error)
	// Totals is the store-wide hourly totals from since on.
	Totals(ctx context.Context, since time.Time) ([]HourTotal, error)
	// Expire deletes campaigns whose LastSeen is before cutoff.
	Expire(ctx context.Context, cutoff time.Time) (int, error)
	Stats(ctx context.Context) (Stats, error)
	Close() error
}
