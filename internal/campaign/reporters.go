package campaign

import (
	"context"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/nddmilter/nddmilter/internal/store"
)

// reporterLister is the part of a store that lists a campaign's
// reporters (*store.Badger); stores without it list none.
type reporterLister interface {
	Reporters(ctx context.Context, id store.CampaignID, limit int) ([]store.Reporter, error)
}

// Reporters lists the distinct reporters of campaign id as the store keeps
// them (hashes of their ids, store.ReporterHash), at most limit (0: all).
func (e *Engine) Reporters(ctx context.Context, id CampaignID, limit int) ([]store.Reporter, error) {
	rl, ok := e.st.(reporterLister)
	if !ok {
		return nil, nil
	}
	rs, err := rl.Reporters(ctx, id, limit)
	if err != nil {
		return nil, fmt.Errorf("campaign %d: %w", id, err)
	}
	return rs, nil
}

// MaxReporterLen bounds a reporter id, in bytes.
const MaxReporterLen = 256

// ErrBadReporter is returned by CheckReporter.
var ErrBadReporter = errors.New("bad reporter id")

// CheckReporter checks a reporter id that a client names (HTTP API, a
// login): at most MaxReporterLen bytes of UTF-8 without control
// characters. The empty id is the anonymous reporter. Who may claim which
// id is the callers' rule (docs/SECURITY.md, "Reporter identities").
func CheckReporter(id string) error {
	if len(id) > MaxReporterLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrBadReporter, MaxReporterLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: not UTF-8", ErrBadReporter)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: control character %U", ErrBadReporter, r)
		}
	}
	return nil
}
