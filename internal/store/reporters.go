package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Reporter is one distinct reporter of a campaign as the store keeps it:
// not the reporter's id, only its hash (ReporterHash), with its kind and
// when it first and last reported.
type Reporter struct {
	Kind        Kind
	Hash        uint64
	First, Last time.Time
}

// ReporterHash is what the store keeps of a reporter id: the first 8
// bytes of its SHA-256 (`printf %s ID | sha256sum | cut -c1-16` in hex).
func ReporterHash(reporter string) uint64 { return reporterHash(reporter) }

// ReporterHashHex is ReporterHash in 16 hex digits: a reporter as a
// fleet's events name it (ReportInput.ReporterHashed).
func ReporterHashHex(reporter string) string { return fmt.Sprintf("%016x", reporterHash(reporter)) }

// reporterKey is the hash the store keeps of the report's reporter. A
// malformed hash (validateReport refuses it) counts as its own id.
func (in *ReportInput) reporterKey() uint64 {
	if in.ReporterHashed {
		if h, err := strconv.ParseUint(in.Reporter, 16, 64); err == nil && len(in.Reporter) == 16 {
			return h
		}
	}
	return reporterHash(in.Reporter)
}

// Reporters lists the distinct reporters of campaign id, spam ones first,
// at most limit of them (0: all).
func (b *Badger) Reporters(ctx context.Context, id CampaignID, limit int) ([]Reporter, error) {
	var out []Reporter
	err := b.view(func(txn *badger.Txn) error {
		_, err := scanPrefix(txn, idKey(pfxReporter, id), true, limit, func(s, v []byte) error {
			if len(s) != 9 {
				return nil // verify reports it
			}
			r := Reporter{Kind: Kind(s[0]), Hash: binary.BigEndian.Uint64(s[1:])}
			r.First, r.Last, _ = decodeReporter(v)
			out = append(out, r)
			return ctx.Err()
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reporters of campaign %d: %w", id, err)
	}
	return out, nil
}
