package campaign

import (
	"fmt"
	"strings"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Verdict is the decision on one message, with what it rests on. Rule is
// its one-line explanation, rendered from the structured fields (Explain)
// when the engine decided; callers read the fields, not the text.
type Verdict struct {
	Action   action.Action    `json:"action"`
	Campaign store.CampaignID `json:"campaign"` // 0 if none matched
	Score    float64          `json:"score"`    // estimated probability of campaign spam
	Rule     string           `json:"rule"`     // Explain(): the one-line explanation
	Evidence []Evidence       `json:"evidence"`
	Warnings []string         `json:"warnings,omitempty"` // parse warnings

	// Skip is set when the message has no usable signature (and was
	// accepted for that).
	Skip *Skip `json:"skip,omitempty"`
	// Failed names the stage that failed ("sign", "store"); the verdict is
	// then accept and the engine returned the error.
	Failed string `json:"failed,omitempty"`
	// Decision is the policy's decision for Campaign: probability and
	// factors, the rule and threshold that chose the action, and the
	// policy's own cap (max_action, reject_min_reporters).
	Decision *Decision `json:"decision,omitempty"`
	// FooterNote tells how an ANDD-only match was confirmed despite the
	// message's mailing-list footer.
	FooterNote string `json:"footer_note,omitempty"`
	// FooterOnly lists the campaigns matched through the message's
	// mailing-list footer only: their evidence was not counted.
	FooterOnly []FooterOnly `json:"footer_only,omitempty"`
	// SignedNoteOnly lists the campaigns matched through a signed note's
	// body key only, with too few spam reporters for that: not counted.
	SignedNoteOnly []SignedNoteOnly `json:"signed_note_only,omitempty"`
	// OtherCampaigns are the other campaigns the message matched (the
	// verdict is the one with the highest probability).
	OtherCampaigns []store.CampaignID `json:"other_campaigns,omitempty"`
	// Exempt is set when the message matched both an allowed or revoked
	// campaign and an active campaign that acts on it: which one the
	// verdict follows and why (exempt.go).
	Exempt *Exempt `json:"exempt,omitempty"`
	// Cap is set when CheckOptions.MaxAction lowered the policy's action.
	Cap *Cap `json:"cap,omitempty"`
	// Deferred is set when the MTA defers (4xx) what the verdict rejects
	// (CheckOptions.DeferRejects); Action stays Reject.
	Deferred bool `json:"deferred,omitempty"`
	// Provisional: the verdict comes from reports this host took while
	// its fleet's stream was unreachable, not yet in the store (no
	// campaign is named; SetProvisional).
	Provisional bool `json:"provisional,omitempty"`
}

// Cap is a lowering of a verdict's action by the caller's limit.
type Cap struct {
	From action.Action `json:"from"` // the policy's action
	To   action.Action `json:"to"`   // the limit applied
	By   string        `json:"by"`   // what set the limit, e.g. "milter.overrides example.org"
}

// Taken is what was done with the message: Action, or Tempfail for a
// deferred reject (the campaign's statistics count it so).
func (v *Verdict) Taken() action.Action {
	if v.Deferred && v.Action == action.Reject {
		return action.Tempfail
	}
	return v.Action
}

// Explain renders the verdict in one line: the policy's rule, then the
// footer note, other matches, ignored footer-only matches, the cap and
// the deferral; or why the message was accepted without a decision.
func (v *Verdict) Explain() string {
	switch {
	case v.Failed == "store":
		return "accept: store error"
	case v.Failed != "":
		return "accept: " + v.Failed + " failed"
	case v.Skip != nil:
		return "accept: no signature, " + v.Skip.String()
	case v.Decision == nil && len(v.FooterOnly)+len(v.SignedNoteOnly) > 0:
		return "accept: " + ignoredSummary(v.FooterOnly, v.SignedNoteOnly)
	case v.Decision == nil:
		return "accept: no campaign matched"
	}
	var b strings.Builder
	b.WriteString(v.Decision.Rule)
	if v.FooterNote != "" {
		b.WriteString("; " + v.FooterNote)
	}
	if v.Exempt != nil {
		b.WriteString("; " + v.Exempt.String())
	}
	if len(v.OtherCampaigns) > 0 {
		fmt.Fprintf(&b, "; %d campaigns matched", len(v.OtherCampaigns)+1)
	}
	if len(v.FooterOnly)+len(v.SignedNoteOnly) > 0 {
		b.WriteString("; ignored: " + ignoredSummary(v.FooterOnly, v.SignedNoteOnly))
	}
	if v.Cap != nil {
		fmt.Fprintf(&b, "; %s capped to %s by %s", v.Cap.From, v.Cap.To, v.Cap.By)
	}
	if v.Deferred {
		b.WriteString("; deferred with a 4xx reply (milter.reject_with: tempfail)")
	}
	return b.String()
}

// SkipReason says why a message has no usable signature: it can be
// neither checked nor reported.
type SkipReason uint8

// Skip reasons.
const (
	NotSkipped SkipReason = iota
	// SkipTooShort: too few words for an I-Match signature and an ANDD
	// sketch.
	SkipTooShort
	// SkipFooterIMatch: its only I-Match signatures hash its mailing-list
	// footer alone, and it has no ANDD sketch.
	SkipFooterIMatch
	// SkipFooterSketch: no I-Match signature, and every word its ANDD
	// sketch weighs is in its mailing-list footer.
	SkipFooterSketch
	// SkipBandsTaken (reports): no I-Match signature, and its ANDD band
	// keys belong to other, dissimilar campaigns.
	SkipBandsTaken
	// SkipBandsInBatch (reports): no I-Match signature, and its ANDD band
	// keys belong to other, dissimilar reports of the same batch.
	SkipBandsInBatch
)

var skipNames = [...]string{
	NotSkipped:       "",
	SkipTooShort:     "too short for a signature",
	SkipFooterIMatch: "no usable signature (I-Match of the mailing-list footer only)",
	SkipFooterSketch: "no usable signature (ANDD of the mailing-list footer only)",
	SkipBandsTaken:   "no usable signature (band keys of dissimilar campaigns)",
	SkipBandsInBatch: "no usable signature (band keys of dissimilar reports of the batch)",
}

// String is a short name of the reason, the same for every message it
// applies to (a summary groups by it); Skip.String has the details.
func (r SkipReason) String() string {
	if int(r) < len(skipNames) {
		return skipNames[r]
	}
	return fmt.Sprintf("skip(%d)", int(r))
}

// MarshalText encodes the reason as its String.
func (r SkipReason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText decodes a String (unknown text gives an error).
func (r *SkipReason) UnmarshalText(b []byte) error {
	for i, n := range skipNames {
		if n == string(b) {
			*r = SkipReason(i)
			return nil
		}
	}
	return fmt.Errorf("unknown skip reason %q", b)
}

// Skip is why one message has no usable signature, with its details.
type Skip struct {
	Reason SkipReason `json:"reason"`
	// Unique is the message's number of distinct words.
	Unique int `json:"unique"`
	// Signer is the I-Match signer's own reason, when it gave one.
	Signer string `json:"signer,omitempty"`
}

// String explains the skip in words, e.g. "too short for a signature (3
// unique words)".
func (s Skip) String() string {
	switch s.Reason {
	case SkipTooShort:
		if s.Signer == "" || strings.HasPrefix(s.Signer, "too short for a signature") {
			return fmt.Sprintf("too short for a signature (%d unique words)", s.Unique)
		}
		return fmt.Sprintf("too short for a signature (%d unique words; %s)", s.Unique, s.Signer)
	case SkipFooterIMatch:
		return "no usable signature (its only I-Match signatures are those of its mailing-list footer alone)"
	case SkipFooterSketch:
		return "no usable signature (no I-Match signature, and every word its ANDD sketch weighs is in its mailing-list footer)"
	case SkipBandsTaken:
		return "no usable signature (no I-Match signature; its ANDD band keys belong to other, dissimilar campaigns)"
	case SkipBandsInBatch:
		return "no usable signature (no I-Match signature; its ANDD band keys belong to other, dissimilar reports of the batch)"
	}
	return s.Reason.String()
}

// FooterOnly is a campaign an ANDD match found only through the message's
// mailing-list footer: the evidence was not counted.
type FooterOnly struct {
	Campaign store.CampaignID `json:"campaign"`
	Full     float64          `json:"full"` // best estimated cosine of the whole message
	Body     float64          `json:"body"` // the same without the footer, unless Why is set
	Why      string           `json:"why,omitempty"`
	// Threshold is the ANDD model's threshold the match missed.
	Threshold float64 `json:"threshold"`
}

// String explains an ignored footer-only match.
func (f FooterOnly) String() string {
	without := f.Why
	if without == "" {
		without = fmt.Sprintf("%.3f without it", f.Body)
	}
	return fmt.Sprintf("campaign %d matched through the mailing-list footer only (ANDD %.3f with the footer, %s; %.3f needed)",
		f.Campaign, f.Full, without, f.Threshold)
}

// ignoredSummary names the campaigns a verdict did not count, and why.
func ignoredSummary(fs []FooterOnly, ss []SignedNoteOnly) string {
	parts := make([]string, 0, len(fs)+len(ss))
	for _, f := range fs {
		parts = append(parts, f.String())
	}
	for _, s := range ss {
		parts = append(parts, s.String())
	}
	return strings.Join(parts, "; ")
}

// SignedNoteOnly is a campaign a signed note matched through its body key
// only: the text after its first line is mostly its signature, which all
// of its author's notes share. It counts once the campaign has Needed
// spam reporters.
type SignedNoteOnly struct {
	Campaign      store.CampaignID `json:"campaign"`
	SpamReporters int64            `json:"spam_reporters"`
	Needed        int              `json:"needed"`
}

// String says it in words.
func (s SignedNoteOnly) String() string {
	return fmt.Sprintf("campaign %d matched through the body key of a signed note only (its text after the first line is mostly the signature its author's notes share): that needs %d spam reporters, it has %d",
		s.Campaign, s.Needed, s.SpamReporters)
}

// ReportOutcome tells what a report did.
type ReportOutcome struct {
	store.ReportResult
	ARF bool // the report was an ARF wrapper, its attachment was used
	// Skip is set when the message could not be used (nothing stored);
	// Skipped then says why in words (Skip.String()).
	Skip    SkipReason
	Skipped string
	// Joined lists the existing campaigns the message matched (before any
	// merge); empty when the report created a campaign or matched nothing.
	Joined []store.CampaignID
	// VoteOnly, when set, says why the report only counted on the
	// campaign (it added no signature, merged nothing): the merge rule of
	// docs/SECURITY.md.
	VoteOnly string
	// Apart is true when the report matched campaigns through ANDD only
	// and started a campaign of its own (Created) under the merge rule.
	Apart bool
	// Replication, in a fleet, says whether the report is in the
	// replicated stream (Replicated) or waits in this node's outbox
	// (Queued); "" standalone.
	Replication string
}
