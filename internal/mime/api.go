package mime

import "context"

// This file is the package's contract with the rest of nddmilter.

// Parse parses a raw message (header and body) into a normalized Document.
// It never fails and never panics: malformed input produces warnings.
//
// Parse is bounded by opts (see Options): its work is linear in the bytes
// it scans, whatever the content, and a message over a budget is parsed
// on its bounded prefix with a warning and Document.OverBudget set.
func Parse(raw []byte, opts Options) *Document {
	doc, _ := parse(nil, raw, opts)
	return doc
}

// ParseContext is Parse that also stops when ctx is done: it checks ctx
// between MIME parts and every 64 KiB of text normalized, and then
// returns the document of what was read so far (with a warning) and an
// error wrapping ctx.Err(). The document is never nil.
func ParseContext(ctx context.Context, raw []byte, opts Options) (*Document, error) {
	return parse(ctx, raw, opts)
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
