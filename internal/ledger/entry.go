package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// Delivery is what the milter knows of a message it let through.
type Delivery struct {
	Time    time.Time
	QueueID string
	// MessageID is the Message-ID without angle brackets, as the pipeline
	// read it ("" when the message had none).
	MessageID string
	// Rcpts are the envelope recipients, angle brackets trimmed; at most
	// Options.MaxRcpts are kept.
	Rcpts []string
	// RcptCount counts every recipient (Rcpts may be fewer).
	RcptCount int
	// Evidence is the message's evidence (pipeline.MarshalEvidence) and
	// Signs its graymail signs (pipeline.MarshalSigns; nil for none),
	// which a purge's match reads too; the ledger owns both after Record.
	Evidence []byte
	Signs    []byte
}

// Entry is one recorded delivery.
type Entry struct {
	Key Key
	Delivery
	// Unpurgeable says why the message cannot be found again in a
	// mailbox ("" when it can): no usable Message-ID. Such an entry is
	// still matched, and its jobs end as skipped with this reason.
	Unpurgeable string
}

// Key identifies an entry: its time and a sequence number, in order.
type Key [16]byte

// Time is the entry's time.
func (k Key) Time() time.Time { return time.Unix(0, int64(binary.BigEndian.Uint64(k[:8]))) }

// String is the key in hex, for logs.
func (k Key) String() string { return fmt.Sprintf("%x", k[:]) }

func makeKey(t time.Time, seq uint64) Key {
	var k Key
	binary.BigEndian.PutUint64(k[:8], uint64(max(t.UnixNano(), 0)))
	binary.BigEndian.PutUint64(k[8:], seq)
	return k
}

// Bounds of an entry's fields.
const (
	// MaxMessageID bounds a Message-ID that can be searched for; a longer
	// one makes the entry unpurgeable.
	MaxMessageID = 250
	maxQueueID   = 64
	// MaxRcptLen bounds one recipient kept (RFC 5321 allows 256 octets
	// of path); a longer one is not kept.
	MaxRcptLen = 320
)

// Reasons an entry is unpurgeable.
const (
	NoMessageID  = "no Message-ID"
	BadMessageID = "malformed Message-ID"
)

// CheckMessageID says why id (without angle brackets) cannot be searched
// for exactly, or "" when it can: it must be printable ASCII without
// spaces, angle brackets, quotes or backslashes, at most MaxMessageID
// bytes. A mailbox server's header search matches substrings: with the
// brackets around it, such an id matches only itself.
func CheckMessageID(id string) string {
	if id == "" {
		return NoMessageID
	}
	if len(id) > MaxMessageID {
		return BadMessageID
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c <= ' ' || c > '~' || c == '<' || c == '>' || c == '"' || c == '\\' {
			return BadMessageID
		}
	}
	return ""
}

// entryVersion is the format written; version 1 entries (no signs)
// are still read.
const entryVersion = 2

// errEntry is wrapped by decodeEntry's errors.
var errEntry = errors.New("ledger: undecodable entry")

// encode appends the entry's value to dst.
func (e *Entry) encode(dst []byte, maxRcpts int) []byte {
	dst = append(dst, entryVersion, 0)
	dst = binary.AppendUvarint(dst, uint64(max(e.Time.UnixNano(), 0)))
	dst = appendBytes(dst, clip(e.QueueID, maxQueueID))
	dst = appendBytes(dst, e.MessageID)
	dst = appendBytes(dst, e.Unpurgeable)
	dst = binary.AppendUvarint(dst, uint64(max(e.RcptCount, len(e.Rcpts))))
	kept := 0
	for _, r := range e.Rcpts {
		if len(r) <= MaxRcptLen && kept < maxRcpts {
			kept++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(kept))
	n := 0
	for _, r := range e.Rcpts {
		if len(r) <= MaxRcptLen && n < kept {
			dst = appendBytes(dst, r)
			n++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.Evidence)))
	dst = append(dst, e.Evidence...)
	return appendBytes(dst, string(e.Signs))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func appendBytes(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decodeEntry decodes a value; the entry's Evidence refers to b.
func decodeEntry(k Key, b []byte) (Entry, error) {
	e := Entry{Key: k}
	if len(b) < 2 || b[0] != 1 && b[0] != entryVersion {
		return e, fmt.Errorf("%w: version", errEntry)
	}
	d := reader{b: b[2:]}
	e.Time = time.Unix(0, int64(d.uint()))
	e.QueueID = d.str()
	e.MessageID = d.str()
	e.Unpurgeable = d.str()
	e.RcptCount = int(d.uint())
	n := d.uint()
	if n > uint64(len(d.b)) {
		return e, fmt.Errorf("%w: recipient count", errEntry)
	}
	e.Rcpts = make([]string, 0, n)
	for range n {
		e.Rcpts = append(e.Rcpts, d.str())
	}
	e.Evidence = d.bytes()
	if b[0] >= 2 {
		e.Signs = d.bytes()
	}
	if d.bad || len(d.b) != 0 {
		return e, fmt.Errorf("%w: %s", errEntry, k)
	}
	return e, nil
}

type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.bad = true
		r.b = nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string { return string(r.bytes()) }

// idHash is the 8-byte hash of a Message-ID in the 'x' index (compared
// case-sensitively: the id's left part is case-sensitive).
func idHash(id string) [8]byte {
	h := fnv.New64a()
	h.Write([]byte(id))
	var out [8]byte
	binary.BigEndian.PutUint64(out[:], h.Sum64())
	return out
}

// userHash is the 8-byte hash of a mailbox user in a job's id.
func userHash(u string) [8]byte { return idHash(strings.ToLower(u)) }

// DefaultMaxRcpts is the default of Options.MaxRcpts: the recipients kept
// per entry.
const DefaultMaxRcpts = 100
