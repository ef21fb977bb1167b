package mime

import "strings"

// unwrapARF implements UnwrapARF.
func unwrapARF(raw []byte) (out []byte, ok bool) {
	defer func() {
		if recover() != nil {
			out, ok = raw, false
		}
	}()
	h, body := parseHeader(raw, func(string) {}, nil)
	v, _ := h.get("Content-Type")
	mt := parseMediaType(v)
	if mt.typ != "multipart/report" || mt.reportType != "feedback-report" {
		return raw, false
	}
	cte, _ := h.get("Content-Transfer-Encoding")
	body = (*parser)(nil).transferDecodeQuiet(body, strings.ToLower(cte))
	parts, _, found := splitMultipart(body, mt.boundary, defaultMaxParts)
	if !found {
		if g := guessBoundary(body); g != "" {
			parts, _, found = splitMultipart(body, g, defaultMaxParts)
		}
		if !found {
			return raw, false
		}
	}
	for _, part := range parts {
		ph, pb := parseHeader(part, func(string) {}, nil)
		pv, _ := ph.get("Content-Type")
		pt := parseMediaType(pv).typ
		switch pt {
		case "message/rfc822", "message/global", "text/rfc822-headers", "message/rfc822-headers":
			pcte, _ := ph.get("Content-Transfer-Encoding")
			return (*parser)(nil).transferDecodeQuiet(pb, strings.ToLower(pcte)), true
		}
	}
	return raw, false
}

// transferDecodeQuiet is transferDecode without warnings; p may be nil.
func (p *parser) transferDecodeQuiet(body []byte, cte string) []byte {
	switch cte {
	case "base64":
		return p.decodeBase64Append(nil, body, "")
	case "quoted-printable":
		return decodeQPAppend(nil, body)
	}
	return body
}
