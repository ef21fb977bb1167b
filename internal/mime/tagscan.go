package mime

import "bytes"

// tagScanner reads the name and attributes of a tag from the raw bytes of
// a tokenizer token, following the same rules as
// golang.org/x/net/html.Tokenizer (readTagName, readTagAttrKey,
// readTagAttrVal) but without copying: the tokenizer's TagName and TagAttr
// allocate on every call, which dominated HTML extraction.
type tagScanner struct {
	raw []byte
	i   int
}

func isTagSpace(c byte) bool {
	return tagByte[c]&tbSpace != 0
}

// tagByte classifies the bytes that end a tag name, an attribute key or
// an unquoted value.
var tagByte = [256]uint8{
	' ': tbSpace, '\n': tbSpace, '\r': tbSpace, '\t': tbSpace, '\f': tbSpace,
	'/': tbSlash, '>': tbGT, '=': tbEq,
}

const (
	tbSpace = 1 << iota
	tbSlash
	tbGT
	tbEq
)

// name returns the tag name (not lower-cased) of raw, which starts with
// "<" or "</".
func (s *tagScanner) name(raw []byte) []byte {
	s.raw, s.i = raw, 1
	if s.i < len(raw) && raw[s.i] == '/' {
		s.i++
	}
	start := s.i
	for s.i < len(raw) && tagByte[raw[s.i]]&(tbSpace|tbSlash|tbGT) == 0 {
		s.i++
	}
	return raw[start:s.i]
}

func (s *tagScanner) skipSpace() {
	for s.i < len(s.raw) && isTagSpace(s.raw[s.i]) {
		s.i++
	}
}

// next returns the next attribute. ok is false at the end of the tag.
// Attributes with an empty key are skipped.
func (s *tagScanner) next() (key, val []byte, ok bool) {
	for {
		s.skipSpace()
		if s.i >= len(s.raw) || s.raw[s.i] == '>' {
			return nil, nil, false
		}
		// key
		ks := s.i
		if s.raw[s.i] == '=' { // a leading '=' belongs to the key
			s.i++
		}
		for s.i < len(s.raw) && tagByte[s.raw[s.i]] == 0 {
			s.i++
		}
		key = s.raw[ks:s.i]
		// value
		val = nil
		s.skipSpace()
		if s.i < len(s.raw) {
			c := s.raw[s.i]
			switch {
			case c == '/':
				s.i++
			case c == '=':
				s.i++
				s.skipSpace()
				if s.i < len(s.raw) {
					q := s.raw[s.i]
					switch q {
					case '>':
					case '\'', '"':
						s.i++
						vs := s.i
						if k := bytes.IndexByte(s.raw[vs:], q); k >= 0 {
							s.i = vs + k
							val = s.raw[vs:s.i]
							s.i++
						} else {
							s.i = len(s.raw)
							val = s.raw[vs:]
						}
					default:
						vs := s.i
						for s.i < len(s.raw) && tagByte[s.raw[s.i]]&(tbSpace|tbGT) == 0 {
							s.i++
						}
						val = s.raw[vs:s.i]
					}
				}
			}
		}
		if len(key) > 0 {
			return key, val, true
		}
	}
}
