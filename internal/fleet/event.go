package fleet

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// Event types.
const (
	evReport = "report" // reports (junk or not-junk), applied as one batch
	evState  = "state"  // a campaign's administrative state (allow/undo)
	evDelete = "delete" // a campaign deleted
	evExpire = "expire" // campaigns last seen before Cutoff expire
	evHits   = "hits"   // aggregated hit counts
)

// eventVersion is the version of the events this node publishes, and
// the newest it applies. Version 2 carries a report's evidence (the
// publishing node signed it) in place of the raw message that version 1
// carried and every node signed; version 1 events are still applied.
const eventVersion = 2

// event is one message of the stream. Its effect on a node's store
// depends on the store and the event only: Time (the publisher's clock
// when it took the event) is what applying stores as "now".
type event struct {
	// ID is unique per event (the stream's Nats-Msg-Id, for dedup).
	ID string `json:"id"`
	// V is the event's version (0: version 1).
	V        int              `json:"v,omitempty"`
	Type     string           `json:"t"`
	Node     string           `json:"n"`
	Time     time.Time        `json:"at"`
	Reports  []eventReport    `json:"r,omitempty"`
	Campaign store.CampaignID `json:"c,omitempty"`
	State    store.State      `json:"s,omitempty"`
	Cutoff   time.Time        `json:"cut,omitzero"`
	Hits     []store.HitDelta `json:"h,omitempty"`
}

// eventReport is one report of a report event: its evidence as the
// publishing node signed it (pipeline.MarshalEvidence, a versioned wire
// format pinned by golden vectors), which every node ingests without
// signing; in version 1 events, the raw message, which every node signed.
type eventReport struct {
	Evidence []byte     `json:"e,omitempty"`
	Raw      []byte     `json:"m,omitempty"`
	Kind     store.Kind `json:"k"`
	Reporter string     `json:"u,omitempty"`
}

// idempotent reports whether applying e twice has the effect of applying
// it once: such an event, if it was the last applied before a crash, is
// applied again (its effect may span several transactions).
func (e *event) idempotent() bool {
	switch e.Type {
	case evState, evDelete, evExpire:
		return true
	}
	return false
}

func newEventID(node string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return node + "-" + hex.EncodeToString(b[:])
}

func (e *event) encode() ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("fleet: encode %s event: %w", e.Type, err)
	}
	return b, nil
}

func decodeEvent(b []byte) (*event, error) {
	var e event
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("fleet: decode event: %w", err)
	}
	return &e, nil
}
