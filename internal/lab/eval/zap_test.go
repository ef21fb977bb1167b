package eval

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The scenario with the real engine, ledger and purger: with the purge,
// at most a tenth of the unread copies are left in INBOX, moved after the
// escalation; without it, nothing moves. Copies that matched the campaign
// below the trigger when it escalated are taken when it grows (they
// stayed before).
func TestRunZap(t *testing.T) {
	r, err := RunZap(context.Background(), ZapOptions{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	off, on := r.Off, r.On
	t.Logf("off %+v\non %+v\nbytes/msg %.0f, record %.1f µs, write %.1f µs", off, on, r.LedgerBytesPerMessage, r.RecordMicros, r.WriteMicros)
	if off.Escalated < 0 || on.Escalated < 0 || off.Delivered == 0 || off.Delivered+off.Blocked != 1000 || on.Delivered+on.Blocked != 1000 {
		t.Fatalf("the campaign did not escalate or copies were lost: off %+v, on %+v", off, on)
	}
	if off.Moved != 0 || on.Moved == 0 || on.LeftUnread > off.LeftUnread/10 {
		t.Errorf("unread copies left: %d off, %d on (moved %d)", off.LeftUnread, on.LeftUnread, on.Moved)
	}
	if on.ToMovedP50 < 0 || on.ToMovedP50 > on.ToMovedP99 || on.ToMovedP99 > on.ToMovedLast {
		t.Errorf("escalation → moved: %v / %v / %v", on.ToMovedP50, on.ToMovedP99, on.ToMovedLast)
	}
	if r.LedgerBytesPerMessage <= 0 || r.RecordMicros <= 0 {
		t.Errorf("recording cost: %.0f bytes, %.1f µs", r.LedgerBytesPerMessage, r.RecordMicros)
	}
	var b bytes.Buffer
	(&Results{Zap: r}).WriteMarkdown(&b, "docs")
	for _, want := range []string{"## Zero-hour purge", "| | purge off | purge on |", "left in INBOX unread at the end", "bytes per message"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}
