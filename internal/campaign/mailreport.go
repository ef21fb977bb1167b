package campaign

import (
	"context"
	"errors"
	"fmt"

	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/store"
)

// ErrNoAttached is returned by ReportAttached for a report message that
// carries no attached message (a spam forwarded inline, not as an
// attachment): nothing was reported.
var ErrNoAttached = errors.New("no attached message (forward the message as an attachment)")

// MailReport is what a report sent by mail did.
type MailReport struct {
	// Outcomes are those of the attached messages, in order.
	Outcomes []ReportOutcome
	// Dropped counts the attached messages beyond the limit, not reported.
	Dropped int
	// ARF is set when the report message was itself an ARF feedback report.
	ARF bool
}

// ReportAttached takes each message attached to raw, a report sent by
// mail (pipeline.AttachedMessages: message/rfc822 parts or the original
// of an ARF feedback report), as a report of kind by reporter, in one
// batch (ReportBatch; its errors are its). Messages beyond maxMessages
// (0: mime.DefaultMaxAttached)
// are counted in Dropped, not reported. A raw message carrying none gives
// ErrNoAttached.
func (e *Ingester) ReportAttached(ctx context.Context, raw []byte, kind store.Kind, reporter string, maxMessages int) (MailReport, error) {
	att := pipeline.AttachedMessages(raw, pipeline.AttachedOptions{MaxMessages: maxMessages})
	mr := MailReport{Dropped: att.Dropped, ARF: att.ARF}
	if len(att.Messages) == 0 {
		return mr, ErrNoAttached
	}
	reqs := make([]ReportRequest, len(att.Messages))
	for i, m := range att.Messages {
		reqs[i] = ReportRequest{Raw: m, Kind: kind, Reporter: reporter}
	}
	outs, err := e.ReportBatch(ctx, reqs)
	mr.Outcomes = outs
	if err != nil {
		return mr, fmt.Errorf("report by mail: %w", err)
	}
	return mr, nil
}
