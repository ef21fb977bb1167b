// Package ledger is the delivery ledger of zero-hour purge (internal/zap):
// a bounded, persisted record of every message the milter let through
// (accepted or tagged), so that the copies of a campaign delivered before
// it escalated can be found again, re-matched and moved, and of the purge
// jobs made from them.
//
// The ledger is its own small Badger database, apart from the campaign
// store: its entries are per-message delivery facts of one host (a fleet
// does not replicate them), they churn on a window of hours, and the store
// stays ignorant of messages.
//
// Keys (one byte of prefix, then big-endian fields, so that an iteration
// is in time order):
//
//	'e' time(8) seq(8)         an entry (entry.go's encoding)
//	'x' hash(msgid)(8) key(16) the entries of a Message-ID (duplicates)
//	'j' id                     a job (JSON), id = kind(1) entry key(16) user hash(8)
//	'q' due(8) id              a pending job's place in the queue
//	'c' campaign(8)            a campaign's purge state (JSON)
//	'k' campaign(8) id         the jobs of a campaign
//
// Recording costs the milter a copy of the evidence and a channel send:
// entries are written in batches by a goroutine, and a full queue drops
// (and counts) rather than waits. A graceful Close writes what is queued.
package ledger
