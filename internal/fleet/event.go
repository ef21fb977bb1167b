package fleet

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
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

// Event versions. Version 2 carries a report's evidence (the publishing
// node signed it) in place of the raw message that version 1 carried and
// every node signed. Version 3 is a version 2 report event in a binary
// envelope (encodeBinary): the evidence as bytes instead of base64 in
// the JSON, a quarter fewer bytes in the stream and less to decode.
// Version 4 is version 3 with each report's reporter as the hash the
// store keeps of it (store.ReporterHashHex), never the id: reporter ids
// stay on the node that took the report. Every version is still applied.
const (
	// eventVersion is the newest version this node applies, and the one
	// it publishes report events in once every live node of the fleet
	// applies it (Node.reportVersion): during an upgrade, the nodes of
	// the new build publish an older version until the last node is
	// upgraded.
	eventVersion = 4
	// hashedVersion is the first version whose reports carry reporter
	// hashes instead of ids.
	hashedVersion = 4
	// jsonVersion is the version of the events published as JSON: the
	// other events, and report events before the whole fleet applies
	// eventVersion.
	jsonVersion = 2
)

// EventVersion is the newest event version this build applies, and
// publishes report events in once every live node applies it.
const EventVersion = eventVersion

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
	// Reporter is the reporter's id (versions up to 3), ReporterHash
	// the hash the store keeps of it (version 4 on).
	Reporter     string `json:"u,omitempty"`
	ReporterHash string `json:"uh,omitempty"`
}

// hashReporters replaces the reports' reporter ids by their hashes
// (version 4 on).
func (e *event) hashReporters() {
	for i := range e.Reports {
		r := &e.Reports[i]
		if r.ReporterHash == "" {
			r.ReporterHash = store.ReporterHashHex(r.Reporter)
		}
		r.Reporter = ""
	}
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

// encode encodes the event as its version says: JSON up to version 2,
// the binary envelope from version 3.
func (e *event) encode() ([]byte, error) {
	if e.V >= 3 {
		return e.encodeBinary()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("fleet: encode %s event: %w", e.Type, err)
	}
	return b, nil
}

// The binary envelope (version 3 on) is
//
//	version (1 byte, not '{') | uvarint n | n bytes of the event as JSON,
//	its reports without their evidence | for each report: uvarint m | m
//	bytes of its evidence
//
// A JSON event starts with '{'; any other first byte is the version of
// an envelope, so a node meeting a version newer than its own knows it
// (and waits for its upgrade) without reading the rest. Every later
// version keeps the head (version byte, uvarint n, a JSON object whose
// "v" is that version): bytes without it are malformed, not newer.

// maxBinaryVersion is the largest version an envelope's first byte
// names: below '{', the first byte of a JSON event.
const maxBinaryVersion = '{' - 1

func (e *event) encodeBinary() ([]byte, error) {
	if e.V > maxBinaryVersion {
		return nil, fmt.Errorf("fleet: encode %s event: version %d has no binary envelope", e.Type, e.V)
	}
	head := *e
	head.Reports = make([]eventReport, len(e.Reports))
	size := 0
	for i, r := range e.Reports {
		r.Evidence = nil
		head.Reports[i] = r
		size += binary.MaxVarintLen64 + len(e.Reports[i].Evidence)
	}
	h, err := json.Marshal(&head)
	if err != nil {
		return nil, fmt.Errorf("fleet: encode %s event: %w", e.Type, err)
	}
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(h)+size)
	b = append(b, byte(e.V))
	b = binary.AppendUvarint(b, uint64(len(h)))
	b = append(b, h...)
	for _, r := range e.Reports {
		b = binary.AppendUvarint(b, uint64(len(r.Evidence)))
		b = append(b, r.Evidence...)
	}
	return b, nil
}

// errMalformed wraps what is wrong with an event that cannot be decoded.
var errMalformed = errors.New("fleet: malformed event")

// decodeEvent decodes a JSON event or a binary envelope. An envelope of
// a version newer than this node's decodes to an event with only its
// version set (applying stops there: ErrNewerEvent).
func decodeEvent(b []byte) (*event, error) {
	if len(b) > 0 && b[0] != '{' && !isJSONSpace(b[0]) {
		return decodeBinary(b)
	}
	var e event
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("fleet: decode event: %w", err)
	}
	return &e, nil
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func decodeBinary(b []byte) (*event, error) {
	v := int(b[0])
	if v < 3 {
		return nil, fmt.Errorf("%w: envelope of version %d", errMalformed, v)
	}
	rest := b[1:]
	next := func(what string) ([]byte, error) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, fmt.Errorf("%w: %s: length out of bounds", errMalformed, what)
		}
		field := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		return field, nil
	}
	h, err := next("header")
	if err != nil {
		return nil, err
	}
	if v > eventVersion {
		// A newer envelope keeps this one's head (the version byte, the
		// length and a JSON object naming the same version): anything
		// else is not an event, whatever its first byte.
		var head struct {
			V int `json:"v"`
		}
		if err := json.Unmarshal(h, &head); err != nil || head.V != v {
			return nil, fmt.Errorf("%w: first byte %d, but no envelope of that version", errMalformed, v)
		}
		return &event{V: v}, nil
	}
	var e event
	if err := json.Unmarshal(h, &e); err != nil {
		return nil, fmt.Errorf("fleet: decode event: %w", err)
	}
	if e.V != v {
		return nil, fmt.Errorf("%w: envelope of version %d holds an event of version %d", errMalformed, v, e.V)
	}
	for i := range e.Reports {
		ev, err := next("evidence")
		if err != nil {
			return nil, err
		}
		if len(ev) > 0 { // none: nil, as a JSON event without it
			e.Reports[i].Evidence = ev
		}
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last report", errMalformed, len(rest))
	}
	return &e, nil
}
