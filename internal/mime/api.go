package mime

// This file is the package's contract with the rest of nddmilter.

// Parse parses a raw message (header and body) into a normalized Document.
// It never fails and never panics: malformed input produces warnings.
func Parse(raw []byte, opts Options) *Document {
	return parse(raw, opts)
}

// Tokenize splits the subject and text of doc into tokens, applying opts.
// Subject tokens come first. URLs are not tokenized (see Document.Hosts).
//
// A word is a maximal run of letters and digits (combining marks continue
// a word); it is lower-cased with unicode.ToLower after the NFKC
// normalization done by Parse.
func Tokenize(doc *Document, opts TokenOptions) []Token {
	return tokenize(doc, opts)
}

// UniqueTerms returns the sorted distinct terms of toks.
func UniqueTerms(toks []Token) []string {
	return uniqueTerms(toks)
}

// UnwrapARF returns the original message attached to an ARF feedback report
// (RFC 5965, multipart/report; report-type=feedback-report) and true, or
// raw and false when raw is not such a report. When the report carries
// only the original header (text/rfc822-headers), that header is returned.
func UnwrapARF(raw []byte) ([]byte, bool) {
	return unwrapARF(raw)
}
