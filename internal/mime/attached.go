package mime

import "strings"

// DefaultMaxAttached is the default of AttachedOptions.MaxMessages.
const DefaultMaxAttached = 20

// AttachedOptions bound AttachedMessages. Zero values select the defaults.
type AttachedOptions struct {
	// MaxMessages is how many attached messages are returned; those
	// beyond are counted in Attached.Dropped. Default DefaultMaxAttached.
	MaxMessages int
	// MaxDepth bounds the multipart nesting walked. Default 16 (as Parse).
	MaxDepth int
	// MaxParts bounds the MIME parts visited. Default 256 (as Parse).
	MaxParts int
}

// Attached are the messages a report message carries.
type Attached struct {
	// Messages are the attached messages, decoded from their transfer
	// encoding, in the order they appear. They share no memory with the
	// input unless they were not transfer-encoded.
	Messages [][]byte
	// Dropped counts the attached messages beyond MaxMessages.
	Dropped int
	// ARF is set when the message itself is an ARF feedback report
	// (RFC 5965): Messages then holds the one message (or header) it
	// reports.
	ARF bool
	// Truncated is set when the walk stopped at MaxDepth or MaxParts.
	Truncated bool
}

// AttachedMessages returns the messages attached to raw, a report sent
// by mail: the message/rfc822 (and message/global) parts anywhere in its
// multipart tree, as "forward as attachment" produces, or, when raw is an
// ARF feedback report (multipart/report; report-type=feedback-report, as
// ISPs' feedback loops and Dovecot's vnd.dovecot.report send), the one
// message it reports. An ARF report attached to raw counts as one
// attached message (pipeline.SignReport unwraps it). Attached messages
// are not searched for attachments of their own: those belong to the
// reported message. Malformed input gives what could be found, never a
// panic; the work is bounded by opts.
func AttachedMessages(raw []byte, opts AttachedOptions) (out Attached) {
	if opts.MaxMessages <= 0 {
		opts.MaxMessages = DefaultMaxAttached
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = defaultMaxDepth
	}
	if opts.MaxParts <= 0 {
		opts.MaxParts = defaultMaxParts
	}
	defer func() {
		if recover() != nil {
			out = Attached{Truncated: true}
		}
	}()
	if orig, ok := unwrapARF(raw); ok {
		return Attached{Messages: [][]byte{orig}, ARF: true}
	}
	w := attachWalker{opts: opts}
	h, body := parseHeader(raw, func(string) {}, nil)
	w.entity(&h, body, 0, "text/plain")
	return w.out
}

type attachWalker struct {
	opts  AttachedOptions
	parts int
	out   Attached
}

func (w *attachWalker) entity(h *header, body []byte, depth int, defType string) {
	if w.parts++; w.parts > w.opts.MaxParts {
		w.out.Truncated = true
		return
	}
	typ := defType
	if v, ok := h.get("Content-Type"); ok {
		if t := parseMediaType(v).typ; strings.IndexByte(t, '/') > 0 {
			typ = t
		}
	}
	cte, _ := h.get("Content-Transfer-Encoding")
	cte = strings.ToLower(cte)
	switch {
	case typ == "message/rfc822" || typ == "message/global":
		if depth == 0 {
			// The report message itself is not a report of itself.
			return
		}
		w.add((*parser)(nil).transferDecodeQuiet(body, cte))
	case strings.HasPrefix(typ, "multipart/"):
		if depth >= w.opts.MaxDepth {
			w.out.Truncated = true
			return
		}
		v, _ := h.get("Content-Type")
		mt := parseMediaType(v)
		body = (*parser)(nil).transferDecodeQuiet(body, cte)
		if typ == "multipart/report" && mt.reportType == "feedback-report" {
			// An attached ARF report is one attached message
			// (pipeline.SignReport uses its original).
			w.add(rebuildEntity(h, body))
			return
		}
		parts, _, found := splitMultipart(body, mt.boundary, w.opts.MaxParts+1)
		if !found {
			if g := guessBoundary(body); g != "" {
				parts, _, _ = splitMultipart(body, g, w.opts.MaxParts+1)
			}
		}
		def := "text/plain"
		if typ == "multipart/digest" {
			def = "message/rfc822"
		}
		for _, part := range parts {
			ph, pb := parseHeader(part, func(string) {}, nil)
			w.entity(&ph, pb, depth+1, def)
			if w.parts > w.opts.MaxParts {
				return
			}
		}
	}
}

// add keeps an attached message, or counts it as dropped.
func (w *attachWalker) add(m []byte) {
	if len(w.out.Messages) >= w.opts.MaxMessages {
		w.out.Dropped++
		return
	}
	w.out.Messages = append(w.out.Messages, m)
}

// rebuildEntity writes a multipart entity back as a message: its
// Content-Type header and its (transfer-decoded) body, enough for
// UnwrapARF.
func rebuildEntity(h *header, body []byte) []byte {
	v, _ := h.get("Content-Type")
	out := make([]byte, 0, len(v)+len(body)+20)
	out = append(out, "Content-Type: "...)
	out = append(out, v...)
	out = append(out, "\r\n\r\n"...)
	return append(out, body...)
}
