package campaign

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/nddmilter/nddmilter/internal/store"
)

// Reporters lists the distinct reporters of campaign id as the store keeps
// them (hashes of their ids, store.ReporterHash), at most limit (0: all).
func (r *Reader) Reporters(ctx context.Context, id store.CampaignID, limit int) ([]store.Reporter, error) {
	if r.reporters == nil {
		return nil, nil
	}
	rs, err := r.reporters.Reporters(ctx, id, limit)
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

// NormalizeReporter returns the canonical form of a reporter id, the one
// the store hashes, so that the spellings of one account count as one
// reporter (docs/SECURITY.md, "Reporter identities"):
//
//   - surrounding white space is trimmed;
//   - compatibility characters are folded (Unicode NFKC: fullwidth
//     letters, ligatures) and letters lower-cased;
//   - with a realm (the site's default domain, e.g. "example.org"), a
//     trailing "@" + realm is removed: "Mallory@Example.ORG" and
//     "mallory" are both "mallory".
//
// Every report passes through it once, in Ingester.ReportBatch or
// ReportStream.Add (the API, the report socket, reports by mail, the
// spool and the command line all end there); a replicated report is
// applied as its origin normalized it. It is idempotent. The empty id
// stays the anonymous reporter.
func NormalizeReporter(id, realm string) string {
	id = strings.ToLower(norm.NFKC.String(strings.TrimSpace(id)))
	if realm = normalizeRealm(realm); realm != "" {
		for {
			local, ok := strings.CutSuffix(id, "@"+realm)
			if !ok || local == "" {
				break
			}
			id = local
		}
	}
	return id
}

// ReporterID is NormalizeReporter with the engine's realm: the id under
// which a report by id is counted (and whose hash the store keeps).
func (e *Ingester) ReporterID(id string) string { return NormalizeReporter(id, e.opts.ReporterRealm) }

// normalizeRealm is a realm in the form NormalizeReporter compares: trimmed,
// lower case, without a leading "@".
func normalizeRealm(realm string) string {
	return strings.TrimPrefix(strings.ToLower(norm.NFKC.String(strings.TrimSpace(realm))), "@")
}

// normalizeReports returns reqs with their reporter ids normalized (a
// copy when one changes). A replicated event's reports are not
// (ApplyReports): their ids are the origin's, already normalized, and a
// node must store what the others store whatever its own realm.
func (e *Ingester) normalizeReports(reqs []ReportRequest) []ReportRequest {
	var out []ReportRequest
	for i, r := range reqs {
		n := NormalizeReporter(r.Reporter, e.opts.ReporterRealm)
		if n == r.Reporter {
			continue
		}
		if out == nil {
			out = slices.Clone(reqs)
		}
		out[i].Reporter = n
	}
	if out == nil {
		return reqs
	}
	return out
}
