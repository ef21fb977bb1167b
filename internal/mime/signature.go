package mime

import "strings"

// IsSignatureDelimiter reports whether line is a signature delimiter:
// RFC 3676's "-- " (section 4.3), or "--", as mail that strips trailing
// spaces leaves it. The visible text's personal signature starts there;
// every message of one author shares it.
func IsSignatureDelimiter(line string) bool {
	return strings.TrimRight(line, " \t\r") == "--"
}

// SignatureAt returns the offset in text of its signature block, the line
// of its last signature delimiter (IsSignatureDelimiter) and what follows,
// or len(text) when it has none.
func SignatureAt(text string) int {
	at := len(text)
	for i := 0; i < len(text); {
		end := strings.IndexByte(text[i:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += i
		}
		if IsSignatureDelimiter(text[i:end]) {
			at = i
		}
		i = end + 1
	}
	return at
}
