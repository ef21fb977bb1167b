package milter

import (
	"context"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/pipeline"
)

// Recorder keeps what the milter lets through for zero-hour purge
// (*ledger.Ledger; internal/zap). Record must not wait.
type Recorder interface {
	Record(ledger.Delivery)
}

// EvidenceChecker is a Checker that also gives the signed message
// (*campaign.Engine), so that the ledger keeps its evidence without
// signing it twice. With Options.Ledger set and a checker that is not
// one, nothing is recorded.
type EvidenceChecker interface {
	CheckEvidence(ctx context.Context, raw []byte, o campaign.CheckOptions) (campaign.Verdict, *pipeline.Message, error)
}

// maxLedgerRcpts bounds the recipients a session keeps for the ledger.
const maxLedgerRcpts = ledger.DefaultMaxRcpts

// ledgerRcpt keeps a recipient for the ledger (Options.Ledger set).
func (s *session) ledgerRcpt(st *state, r []byte) {
	if st.opts.Ledger != nil && len(s.ledgerRcpts) < maxLedgerRcpts {
		s.ledgerRcpts = append(s.ledgerRcpts, strings.Trim(string(printable(r)), "<> "))
	}
}

// kept is the evidence of a checked message the ledger will keep if the
// message is let through.
type kept struct {
	evidence, signs []byte
	messageID       string
}

// keep makes the evidence and signs of m for the ledger when the message will be
// let through (its action, capped at limit, is at most tag) and can
// match a campaign (it has a signature). The copy leaves out the
// excerpt and the warnings, which no match reads (m is the checker's
// own, used by nothing else afterwards: they are cleared in place).
func keep(m *pipeline.Message, v campaign.Verdict, limit action.Action) (kept, bool) {
	if m == nil || m.Skip != pipeline.NoSkip || v.Action.Cap(limit) > action.Tag {
		return kept{}, false
	}
	m.Excerpt, m.Warnings = "", nil
	ev, err := m.MarshalEvidence(pipeline.EvidenceOptions{})
	if err != nil {
		return kept{}, false
	}
	// The graymail signs, which the evidence does not hold: a purge
	// matches the message as its check would.
	signs, err := pipeline.MarshalSigns(m.Signs())
	if err != nil {
		signs = nil
	}
	return kept{evidence: ev, signs: signs, messageID: m.MessageID}, true
}

// record hands a message let through to the ledger.
func (s *session) record(st *state, k kept) {
	if st.opts.Ledger == nil || k.evidence == nil {
		return
	}
	rcpts := make([]string, len(s.ledgerRcpts))
	copy(rcpts, s.ledgerRcpts)
	st.opts.Ledger.Record(ledger.Delivery{Time: time.Now(), QueueID: s.queueID, MessageID: k.messageID,
		Rcpts: rcpts, RcptCount: s.rcpts, Evidence: k.evidence, Signs: k.signs})
}
