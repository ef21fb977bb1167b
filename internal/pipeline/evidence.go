package pipeline

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/qgram"
)

// Evidence: a Message as bytes, so that a report signed on one host is
// ingested on others without signing it again (internal/fleet). A decoded
// Message gives the campaign engine exactly what the original gave it:
// the keys, sketches, footer evidence, samples and skip reason, and the
// term hashes when they were encoded. It is a wire format between the
// hosts of a fleet: the version byte changes with the layout, and golden
// vectors pin it.
//
// Layout, version 1 (uvarint: encoding/binary's unsigned varint; bytes:
// a uvarint length then the bytes; a list: a uvarint count then that many
// bytes):
//
//	byte     EvidenceVersion
//	byte     flags: 1 ARF, 2 body (Body().HasFooter), 4 terms
//	byte     Skip
//	uvarint  Unique, FooterIMatch, FooterAt+1
//	bytes    Subject, From, MessageID, Excerpt, SignerReason
//	list     Warnings
//	list     IMatchKeys, ShortKeys, ShortLookup, BandKeys, QKeys
//	bytes    SketchBytes, QSketchBytes
//	if body:  bytes the body's sketch, list its band keys
//	if terms: uvarint n, then n term hashes, 32 bits big-endian, ascending
const EvidenceVersion = 1

// Evidence flags.
const (
	evARF   = 1
	evBody  = 2
	evTerms = 4
	evAll   = evARF | evBody | evTerms
)

// Bounds of a decoded evidence: larger values are an error, never an
// allocation.
const (
	// MaxEvidence bounds an evidence's encoding, in bytes.
	MaxEvidence = 1 << 20
	maxEvString = 256 << 10 // one string or key
	maxEvList   = 1 << 14   // entries of one list
)

// ErrEvidence is wrapped by UnmarshalEvidence's errors.
var ErrEvidence = errors.New("evidence: undecodable")

// EvidenceOptions select what MarshalEvidence encodes beyond the keys,
// sketches and samples.
type EvidenceOptions struct {
	// Terms encodes the message's term hashes (TermHashes) when it has an
	// ANDD sketch: the exact check of ANDD matches
	// (campaign.Options.ANDDExactCosine) needs them. Default false.
	Terms bool
}

// MarshalEvidence encodes m for UnmarshalEvidence. It computes Body when
// m has a mailing-list footer.
func (m *Message) MarshalEvidence(o EvidenceOptions) ([]byte, error) {
	var flags byte
	if m.ARF {
		flags |= evARF
	}
	var body *Body
	if m.FooterAt >= 0 {
		if b := m.Body(); b.HasFooter {
			flags |= evBody
			body = b
		}
	}
	var terms []uint32
	if o.Terms && m.HasSketch() {
		if terms = m.TermHashes(); len(terms) > 0 {
			flags |= evTerms
		}
	}
	e := evWriter{b: make([]byte, 0, 512)}
	e.b = append(e.b, EvidenceVersion, flags, byte(m.Skip))
	e.uint(uint64(max(m.Unique, 0)))
	e.uint(uint64(max(m.FooterIMatch, 0)))
	e.uint(uint64(max(m.FooterAt+1, 0)))
	for _, s := range []string{m.Subject, m.From, m.MessageID, m.Excerpt, m.SignerReason} {
		e.bytes([]byte(s))
	}
	e.uint(uint64(len(m.Warnings)))
	for _, w := range m.Warnings {
		e.bytes([]byte(w))
	}
	for _, l := range [][][]byte{m.IMatchKeys, m.ShortKeys, m.ShortLookup, m.BandKeys, m.QKeys} {
		e.list(l)
	}
	e.bytes(m.SketchBytes)
	e.bytes(m.QSketchBytes)
	if body != nil {
		var sk []byte
		if body.HasSketch() {
			b, err := body.Sketch.MarshalBinary()
			if err != nil {
				return nil, fmt.Errorf("evidence: body sketch: %w", err)
			}
			sk = b
		}
		e.bytes(sk)
		e.list(body.BandKeys)
	}
	if flags&evTerms != 0 {
		e.uint(uint64(len(terms)))
		for _, h := range terms {
			e.b = binary.BigEndian.AppendUint32(e.b, h)
		}
	}
	if e.err != nil {
		return nil, e.err
	}
	if len(e.b) > MaxEvidence {
		return nil, fmt.Errorf("evidence: %d bytes, more than %d", len(e.b), MaxEvidence)
	}
	return e.b, nil
}

// UnmarshalEvidence decodes MarshalEvidence's output into a Message that
// the campaign engine matches and ingests as it does the original. It
// never panics and allocates no more than the input's size allows; an
// input of another version, truncated, with trailing bytes or with a
// malformed key or sketch is an error wrapping ErrEvidence. The Message
// refers to b, which must not change afterwards.
func UnmarshalEvidence(b []byte) (*Message, error) {
	if len(b) > MaxEvidence {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrEvidence, len(b), MaxEvidence)
	}
	if len(b) < 3 {
		return nil, fmt.Errorf("%w: %d bytes", ErrEvidence, len(b))
	}
	if b[0] != EvidenceVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrEvidence, b[0], EvidenceVersion)
	}
	flags := b[1]
	if flags&^evAll != 0 {
		return nil, fmt.Errorf("%w: unknown flags %#x", ErrEvidence, flags)
	}
	m := &Message{ARF: flags&evARF != 0, Skip: Skip(b[2])}
	if m.Skip > FooterSketch {
		return nil, fmt.Errorf("%w: skip reason %d", ErrEvidence, b[2])
	}
	d := evReader{b: b[3:]}
	m.Unique = d.int()
	m.FooterIMatch = d.int()
	m.FooterAt = d.int() - 1
	for _, s := range []*string{&m.Subject, &m.From, &m.MessageID, &m.Excerpt, &m.SignerReason} {
		*s = string(d.bytes())
	}
	if n := d.count(); n > 0 {
		m.Warnings = make([]string, n)
		for i := range m.Warnings {
			m.Warnings[i] = string(d.bytes())
		}
	}
	// One backing array for the keys, in the order Keys returns them.
	lists := make([][][]byte, 5) // IMatch, Short, ShortLookup, Band, Q
	for i := range lists {
		lists[i] = d.list()
	}
	m.SketchBytes = d.bytes()
	m.QSketchBytes = d.bytes()
	var bodySketch []byte
	var bodyKeys [][]byte
	if flags&evBody != 0 {
		bodySketch = d.bytes()
		bodyKeys = d.list()
	}
	var terms []uint32
	if flags&evTerms != 0 {
		n := d.count()
		if n == 0 || n > MaxTerms || n*4 > len(d.b) || len(m.SketchBytes) == 0 {
			d.fail("term count")
		} else {
			terms = make([]uint32, n)
			for i := range terms {
				terms[i] = binary.BigEndian.Uint32(d.b[4*i:])
				if i > 0 && terms[i] <= terms[i-1] {
					d.fail("terms not ascending")
					break
				}
			}
			d.b = d.b[4*n:]
		}
	}
	if flags&evBody != 0 && m.FooterAt < 0 {
		d.fail("body without a footer")
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return nil, d.err
	}
	if err := m.decodeParts(lists, bodySketch, bodyKeys, flags&evBody != 0); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEvidence, err)
	}
	m.bodyOnce.Do(func() {}) // body set by decodeParts: there is no document
	m.terms = terms
	m.termsOnce.Do(func() {})
	return m, nil
}

// decodeParts sets m's keys, signatures and sketches from their decoded
// bytes.
func (m *Message) decodeParts(lists [][][]byte, bodySketch []byte, bodyKeys [][]byte, body bool) error {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	m.keys = make([][]byte, 0, n)
	m.IMatch = make([]imatchbag.Signature, 0, len(lists[0]))
	for _, k := range lists[0] {
		sig, err := imatchbag.ParseKey(k)
		if err != nil {
			return err
		}
		m.IMatch = append(m.IMatch, sig)
	}
	if len(m.IMatch) == 0 {
		m.IMatch = nil
	}
	// The order of Sign: I-Match, short, band, q-gram, short lookup.
	m.keys = append(m.keys, lists[0]...)
	m.IMatchKeys = m.keys[:len(m.keys):len(m.keys)]
	m.ShortKeys = appendPart(&m.keys, lists[1])
	m.ShortLookup = appendPart(&m.keys, lists[2])
	m.exact = len(m.keys)
	m.BandKeys = appendPart(&m.keys, lists[3])
	m.QKeys = appendPart(&m.keys, lists[4])
	if len(m.SketchBytes) > 0 {
		sk, err := andd.UnmarshalSketch(m.SketchBytes)
		if err != nil {
			return err
		}
		m.Sketch = sk
	} else {
		m.SketchBytes = nil
	}
	if len(m.QSketchBytes) > 0 {
		sk, err := qgram.UnmarshalSketch(m.QSketchBytes)
		if err != nil {
			return err
		}
		m.QSketch = sk
	} else {
		m.QSketchBytes = nil
	}
	if body {
		m.body.HasFooter = true
		if len(bodySketch) > 0 {
			sk, err := andd.UnmarshalSketch(bodySketch)
			if err != nil {
				return fmt.Errorf("body: %w", err)
			}
			m.body.Sketch = sk
		}
		if len(bodyKeys) > 0 {
			m.body.BandKeys = bodyKeys
		}
	}
	return nil
}

// appendPart appends part to *keys and returns it as a slice of *keys
// (nil when empty, as Sign leaves an empty family).
func appendPart(keys *[][]byte, part [][]byte) [][]byte {
	if len(part) == 0 {
		return nil
	}
	i := len(*keys)
	*keys = append(*keys, part...)
	return (*keys)[i:len(*keys):len(*keys)]
}

type evWriter struct {
	b   []byte
	err error
}

func (w *evWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *evWriter) bytes(p []byte) {
	if len(p) > maxEvString && w.err == nil {
		w.err = fmt.Errorf("evidence: a field of %d bytes, more than %d", len(p), maxEvString)
	}
	w.uint(uint64(len(p)))
	w.b = append(w.b, p...)
}

func (w *evWriter) list(l [][]byte) {
	if len(l) > maxEvList && w.err == nil {
		w.err = fmt.Errorf("evidence: a list of %d entries, more than %d", len(l), maxEvList)
	}
	w.uint(uint64(len(l)))
	for _, p := range l {
		w.bytes(p)
	}
}

// evReader reads an evidence; after the first error every read returns
// a zero value.
type evReader struct {
	b   []byte
	err error
}

func (r *evReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrEvidence, what)
	}
	r.b = nil
}

func (r *evReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	// One encoding per evidence: varints in their shortest form.
	if n <= 0 || n != varintLen(v) {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int reads a uvarint that must fit a non-negative int below MaxEvidence.
func (r *evReader) int() int {
	v := r.uint()
	if v > MaxEvidence {
		r.fail("value out of range")
		return 0
	}
	return int(v)
}

// count reads a list's length: every entry takes at least one byte, so a
// count beyond the bytes left is an error, not an allocation.
func (r *evReader) count() int {
	v := r.uint()
	if v > maxEvList || v > uint64(len(r.b)) {
		r.fail("list count")
		return 0
	}
	return int(v)
}

func varintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func (r *evReader) bytes() []byte {
	v := r.uint()
	if r.err != nil {
		return nil
	}
	if v > maxEvString || v > uint64(len(r.b)) {
		r.fail("field length")
		return nil
	}
	p := r.b[:v:v]
	r.b = r.b[v:]
	return p
}

func (r *evReader) list() [][]byte {
	n := r.count()
	if n == 0 {
		return nil
	}
	l := make([][]byte, n)
	for i := range l {
		l[i] = r.bytes()
	}
	if r.err != nil {
		return nil
	}
	return l
}
