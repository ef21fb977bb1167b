// Package campaign is nddmilter's judgment: it signs messages (I-Match bags
// and ANDD sketches), matches them against the store's campaigns, applies
// junk and not-junk reports, and decides with a cost-weighted policy whether
// to accept, tag, quarantine or reject. The milter, the CLI and the HTTP API
// all call the same Engine.
package campaign

import (
	"context"
	"log/slog"
	"time"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
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

// Policy holds the costs and benefits of the decision model (see
// docs/POLICY.md). Zero values select the documented defaults.
type Policy struct{}

// Options configure an Engine. Zero values select the documented defaults.
type Options struct {
	Mime   mime.Options
	Tokens mime.TokenOptions
	IMatch imatchbag.Options
	// DisableANDD turns the ANDD family off (I-Match only).
	DisableANDD bool
	Policy      Policy
	// Expiry is how long a campaign lives without hits or reports. Default 30 days.
	Expiry time.Duration
}

// Evidence is one matched signature.
type Evidence struct {
	Family     string  // "imatch" or "andd"
	Bag        int     // I-Match lexicon index (0 = original)
	Key        string  // the signature key, hex
	Similarity float64 // ANDD estimated cosine (1 for I-Match)
}

// Verdict is the decision on one message, with its explanation.
type Verdict struct {
	Action   Action
	Campaign store.CampaignID // 0 if none matched
	Score    float64          // estimated probability of campaign spam
	Rule     string           // the policy rule that chose Action
	Evidence []Evidence
	Warnings []string // parse warnings
}

// ReportOutcome tells what a report did.
type ReportOutcome struct {
	store.ReportResult
	ARF     bool   // the report was an ARF wrapper, its attachment was used
	Skipped string // non-empty: why the message could not be used
}

// Engine matches and decides. It is safe for concurrent use.
type Engine struct{}

// New returns an Engine over st with the given lexicon and model (model may
// be nil when ANDD is disabled).
func New(st store.Store, lex *imatchbag.Lexicon, model *andd.Model, opts Options, log *slog.Logger) (*Engine, error) {
	panic("not implemented")
}

// Check decides what to do with a raw message.
func (e *Engine) Check(ctx context.Context, raw []byte) (Verdict, error) { panic("not implemented") }

// Report applies a junk (store.KindSpam) or not-junk (store.KindHam) report.
func (e *Engine) Report(ctx context.Context, raw []byte, kind store.Kind, reporter string) (ReportOutcome, error) {
	panic("not implemented")
}
