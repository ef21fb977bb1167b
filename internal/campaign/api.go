// Package campaign is nddmilter's judgment: it signs messages (I-Match bags
// and ANDD sketches), matches them against the store's campaigns, applies
// junk and not-junk reports, and decides with a cost-weighted policy whether
// to accept, tag, quarantine or reject. The milter, the CLI and the HTTP API
// all call the same Engine.
package campaign

import (
	"time"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/shortsig"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Action is what to do with a message.
type Action int

const (
	Accept Action = iota
	Tag
	Quarantine
	Reject
)

// Options configure an Engine. Zero values select the documented defaults.
type Options struct {
	Mime   mime.Options
	Tokens mime.TokenOptions
	IMatch imatchbag.Options
	// DisableANDD turns the ANDD family off (I-Match only).
	DisableANDD bool
	// ANDDMinTerms is the number of unique terms a message needs for an
	// ANDD sketch: the cosine of very short texts says little. Default 10.
	ANDDMinTerms int
	// Short configures the short-message keys (shortsig.Options defaults):
	// digests of images and attachments, links and text units of messages
	// too short for I-Match and ANDD, and the leading text of any message.
	Short shortsig.Options
	// DisableShort turns the short-message family off.
	DisableShort bool
	// Policy is the decision model (see Policy and docs/POLICY.md).
	Policy Policy
	// Expiry is how long a campaign lives without hits or reports. Default 30 days.
	Expiry time.Duration
	// CacheTTL is how long a decoded campaign record is reused by Check
	// before it is read again from the store (reports and administrative
	// changes made through the Engine invalidate it at once). Default 2s;
	// negative disables the cache.
	CacheTTL time.Duration
	// CacheSize bounds the number of cached campaign records. Default 4096.
	CacheSize int
	// Clock returns the current time. Default time.Now.
	Clock func() time.Time
}

// Evidence families.
const (
	FamilyIMatch = "imatch"
	FamilyANDD   = "andd"
	// FamilyShort is a short-message key (internal/shortsig): its Kind
	// says which ("all", "media", "links", "body" or "lead").
	FamilyShort = "short"
)

// Evidence is one matched signature.
type Evidence struct {
	Family     string  `json:"family"`         // "imatch", "andd" or "short"
	Bag        int     `json:"bag"`            // I-Match lexicon index (0 = original)
	Kind       string  `json:"kind,omitempty"` // short-message key kind (see shortsig.Kind)
	Key        string  `json:"key"`            // the signature key, hex
	Similarity float64 `json:"similarity"`     // ANDD estimated cosine (1 for I-Match)
}

// Verdict is the decision on one message, with its explanation.
type Verdict struct {
	Action   Action           `json:"action"`
	Campaign store.CampaignID `json:"campaign"` // 0 if none matched
	Score    float64          `json:"score"`    // estimated probability of campaign spam
	Rule     string           `json:"rule"`     // the policy rule that chose Action
	Evidence []Evidence       `json:"evidence"`
	Warnings []string         `json:"warnings,omitempty"` // parse warnings
}

// ReportOutcome tells what a report did.
type ReportOutcome struct {
	store.ReportResult
	ARF     bool   // the report was an ARF wrapper, its attachment was used
	Skipped string // non-empty: why the message could not be used
	// Joined lists the existing campaigns the message matched (before any
	// merge); empty when the report created a campaign or matched nothing.
	Joined []store.CampaignID
	// Revoked is true when this not-spam report revoked the campaign.
	Revoked bool
}
