package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// The reporters' index by reporter ('u' entries): for each distinct
// reporter of a campaign ('r' entry), the same fact keyed by the
// reporter's hash first, so that a reporter's campaigns are one range,
// newest campaign last. It is written and deleted in the transactions
// that write and delete the 'r' entry, so it is derived from the
// replicated state and the same on every node of a fleet; the state hash
// leaves it out for that reason.

// ReporterCampaign is one campaign a reporter reported, as its record
// stands now.
type ReporterCampaign struct {
	ID    CampaignID
	Kind  Kind // what the reporter said
	State State
	// SpamReporters and HamReporters are the campaign's distinct
	// reporters of each kind.
	SpamReporters, HamReporters int64
}

// ReporterCampaigns lists the campaigns reporter hash (ReporterHash)
// reported, newest campaign first, at most limit (0: all); campaigns
// deleted since are not listed.
func (b *Badger) ReporterCampaigns(ctx context.Context, hash uint64, limit int) ([]ReporterCampaign, error) {
	var out []ReporterCampaign
	err := b.view(func(txn *badger.Txn) error {
		pfx := binary.BigEndian.AppendUint64([]byte{pfxReporterCamp}, hash)
		var ids []ReporterCampaign
		err := scanPrefixReverse(txn, pfx, func(s []byte) (bool, error) {
			if len(s) != 8+1 {
				return true, nil // verify reports it
			}
			ids = append(ids, ReporterCampaign{ID: CampaignID(binary.BigEndian.Uint64(s)), Kind: Kind(s[8])})
			return limit <= 0 || len(ids) < limit, nil
		})
		if err != nil {
			return err
		}
		for _, rc := range ids {
			if err := ctx.Err(); err != nil {
				return err
			}
			r, err := getRecord(txn, rc.ID)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			rc.State, rc.SpamReporters, rc.HamReporters = r.State, r.SpamReporters, r.HamReporters
			out = append(out, rc)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("campaigns of reporter %016x: %w", hash, err)
	}
	return out, nil
}

// migrateV5 upgrades a schema 4 store: the reporters' index by reporter,
// one 'u' entry per 'r' entry. Writing an entry twice is harmless, so an
// interrupted upgrade is simply run again.
func migrateV5(db *badger.DB, log *slog.Logger) error {
	t0 := time.Now()
	log.Info("store: upgrading to schema 5: the reporters' index by reporter")
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	n := 0
	err := db.View(func(txn *badger.Txn) error {
		_, err := scanPrefix(txn, []byte{pfxReporter}, false, 0, func(s, _ []byte) error {
			if len(s) != 17 {
				return nil // verify reports it
			}
			n++
			return wb.Set(reporterCampKey(binary.BigEndian.Uint64(s[9:]), CampaignID(binary.BigEndian.Uint64(s)), Kind(s[8])), nil)
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("index the reporters: %w", err)
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("write the reporters' index: %w", err)
	}
	log.Info("store: upgraded to schema 5", "reporters", n, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}
