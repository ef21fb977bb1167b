package store

import "context"

// The store's optional capabilities: what a store may do besides Store.
// The Badger store has them all; the campaign engine asserts them once,
// when it is built over a store, and does without those it lacks
// (SenderStore, senders.go, is one more).

// BatchReporter applies many reports in as few transactions as fit
// (Badger.ReportBatch), each report atomic, in order.
type BatchReporter interface {
	ReportBatch(ctx context.Context, ins []ReportInput) ([]ReportResult, error)
}

// ReporterLister lists the distinct reporters of a campaign, at most
// limit (0: all), as the store keeps them (Badger.Reporters).
type ReporterLister interface {
	Reporters(ctx context.Context, id CampaignID, limit int) ([]Reporter, error)
}

// ReporterHistory lists the campaigns a reporter reported, newest
// first, as their records stand (Badger.ReporterCampaigns): a reporter's
// record.
type ReporterHistory interface {
	ReporterCampaigns(ctx context.Context, hash uint64, limit int) ([]ReporterCampaign, error)
}

// SketchLookup is Lookup for keys of two kinds (Badger.LookupSketched):
// keys[:exact] are keys a hit on which is evidence in itself, and a
// campaign one of them alone found is verified against its key list, as
// Lookup does; keys[exact:] are keys of similarity sketches (band keys),
// whose campaigns the caller compares with their sketches anyway, and a
// campaign only they found is taken without reading its key list.
type SketchLookup interface {
	LookupSketched(ctx context.Context, keys [][]byte, exact int) ([]Hit, error)
}

// ListStore counts the accepted messages of each mailing list
// (Badger.RecordListHam), a graymail sign that outlives a restart.
type ListStore interface {
	// RecordListHam counts an accepted message that matched no campaign
	// under its list identifier.
	RecordListHam(list string)
	// ListHamMessages is the guaranteed lower bound of the accepted
	// messages counted under list (0 when it is not in the table).
	ListHamMessages(list string) int64
}

// EventStore applies the events of a fleet's stream (fleet.go): the
// writes of an event go through the EventWriter it returns, which records
// the event as applied in the same transactions.
type EventStore interface {
	// ForEvent is the store as stream event seq writes it.
	ForEvent(seq uint64) *EventWriter
	// ForRound is the store as a round of a report event writes it.
	ForRound(r *Round) *EventWriter
}

var (
	_ BatchReporter   = (*Badger)(nil)
	_ ReporterLister  = (*Badger)(nil)
	_ ReporterHistory = (*Badger)(nil)
	_ EventStore      = (*Badger)(nil)
	_ SketchLookup    = (*Badger)(nil)
	_ ListStore       = (*Badger)(nil)
	_ Store           = (*EventWriter)(nil)
	_ BatchReporter   = (*EventWriter)(nil)
)
