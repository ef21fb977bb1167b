package store

import (
	"context"
	"encoding/binary"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// ReporterSet is the distinct reporters of one campaign, as the hashes
// the store keeps of them (a reporter's name is never stored).
type ReporterSet struct {
	Spam, Ham []uint64
	// Truncated is set when the campaign has more reporters than the
	// limit asked for: Spam and Ham then hold only some of them.
	Truncated bool
}

// Reporters returns the distinct reporters of campaign id, at most limit
// of them (0 for all). It lets a caller count the reporters of several
// campaigns without counting one reporter twice.
func (b *Badger) Reporters(ctx context.Context, id CampaignID, limit int) (ReporterSet, error) {
	var out ReporterSet
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("reporters of campaign %d: %w", id, err)
	}
	lim := limit
	if lim > 0 {
		lim++ // one more tells whether there are more
	}
	err := b.view(func(txn *badger.Txn) error {
		n, err := scanPrefix(txn, idKey(pfxReporter, id), false, lim, func(s, _ []byte) error {
			if len(s) != 9 {
				return nil
			}
			h := binary.BigEndian.Uint64(s[1:])
			switch Kind(s[0]) {
			case KindSpam:
				out.Spam = append(out.Spam, h)
			case KindHam:
				out.Ham = append(out.Ham, h)
			}
			return nil
		})
		out.Truncated = limit > 0 && n > limit
		return err
	})
	if err != nil {
		return ReporterSet{}, fmt.Errorf("reporters of campaign %d: %w", id, err)
	}
	return out, nil
}
