// Package campaign is nddmilter's judgment: it matches signed messages
// (internal/pipeline makes raw bytes evidence) against the store's
// campaigns, decides with a cost-weighted policy whether to accept, tag,
// quarantine or reject (a Verdict with its factors), and ingests junk and
// not-junk reports into campaigns, one report, a batch or a stream on the
// same path. An Engine is three parts by job over one store: the
// Checker (the milter's, and the checks of the CLI and the HTTP API), the
// Ingester (reports and administrative changes) and the Reader (the read
// model of the API, the dashboard and the CLI).
//
// A checked message goes Checker.CheckWith → check (pipeline.Sign, then
// decide: match looks its keys up in the store, Policy.decide picks the
// action, store.RecordHit counts it, or store.RecordCheck a message that
// matched nothing); a report goes Ingester.Report → ReportBatch → apply
// (pipeline.SignReport, prepare, store.ReportBatch), or, in a fleet, to
// the Ingester's Writer, and back through Ingester.ApplyReports when the
// fleet's stream orders it. Campaign statistics (Reader: List, Get,
// Timeline, Series, Now, FalsePositiveWatch, Stats) are read from the
// store's indexes and counters, the one code path of the API, the command
// line and the dashboard.
package campaign

import (
	"time"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/qgram"
	"github.com/nddmilter/nddmilter/internal/shortsig"
)

// Options configure an Engine. Zero values select the documented defaults.
type Options struct {
	Mime   pipeline.MimeOptions
	Tokens pipeline.TokenOptions
	IMatch imatchbag.Options
	// DisableANDD turns the ANDD family off (I-Match only).
	DisableANDD bool
	// ANDDMinTerms is the number of unique terms a message needs for an
	// ANDD sketch: the cosine of very short texts says little. Default 10.
	ANDDMinTerms int
	// ANDDExactCosine is the exact cosine over distinct terms that an
	// ANDD match no I-Match signature supports must reach with one of the
	// term sets the campaign keeps (PPJoin's verification, internal/ppjoin):
	// the estimated cosine of a sketch can be far off for a message that
	// merely shares a few heavy words. Reports keep their term set only
	// when it is set, and campaigns that keep none are not held to it.
	// Default 0: off. On the SpamAssassin corpus it flags no less ham than
	// the default engine (none) and misses misspelled copies, whose words
	// are other terms (docs/design/methods.md).
	ANDDExactCosine float64
	// ANDDVerifiedThreshold is the estimated cosine from which a candidate
	// found through band keys is a match when its exact cosine reaches
	// ANDDExactCosine, even below the model's threshold (its evidence then
	// counts as at the threshold). Default 0: the model's threshold.
	ANDDVerifiedThreshold float64
	// Short configures the short-message keys (shortsig.Options defaults):
	// digests of images and attachments, links and text units of messages
	// too short for I-Match and ANDD, and the leading text of any message
	// (docs/design/shortkeys.md).
	Short shortsig.Options
	// DisableShort turns the short-message family off.
	DisableShort bool
	// QGram configures the q-gram family (qgram.SketchOptions defaults):
	// min-hash sketches of a message's character q-grams, which copies
	// with misspelled words keep (docs/design/qgram.md).
	QGram qgram.SketchOptions
	// DisableQGram turns the q-gram family off.
	DisableQGram bool
	// Policy is the decision model (see Policy and docs/POLICY.md).
	Policy Policy
	// Expiry is how long a campaign lives without hits or reports. Default 30 days.
	Expiry time.Duration
	// CacheTTL is how long a decoded campaign record is reused by Check
	// before it is read again from the store (reports and administrative
	// changes made through the Ingester invalidate it at once). Default 2s;
	// negative disables the cache.
	CacheTTL time.Duration
	// CacheSize bounds the number of cached campaign records. Default 4096.
	CacheSize int
	// Clock returns the current time. Default time.Now.
	Clock func() time.Time
	// ReporterRealm is the default domain of reporter ids: an id ending
	// in "@" + ReporterRealm is the same reporter as the id without it
	// (NormalizeReporter). Default "": none.
	ReporterRealm string
}

// Evidence families.
const (
	FamilyIMatch = "imatch"
	FamilyANDD   = "andd"
	// FamilyShort is a short-message key (internal/shortsig): its Kind
	// says which ("all", "media", "links", "body" or "lead").
	FamilyShort = "short"
	// FamilyQGram is a q-gram match (internal/qgram): its Similarity is
	// the estimated docq with the campaign's closest q-gram sketch.
	FamilyQGram = "qgram"
)

// Evidence is one matched signature.
type Evidence struct {
	Family     string  `json:"family"`         // "imatch", "andd", "short" or "qgram"
	Bag        int     `json:"bag"`            // I-Match lexicon index (0 = original)
	Kind       string  `json:"kind,omitempty"` // short-message key kind (see shortsig.Kind)
	Key        string  `json:"key"`            // the signature key, hex
	Similarity float64 `json:"similarity"`     // ANDD estimated cosine, q-gram estimated docq (1 for I-Match)
	// Threshold is the similarity a q-gram match was held to (0 for the
	// other families: ANDD's is the model's).
	Threshold float64 `json:"threshold,omitempty"`
	// Exact is the exact cosine over distinct terms with the campaign's
	// closest kept term set, when an ANDD-only match was verified so.
	Exact float64 `json:"exact,omitempty"`
}
