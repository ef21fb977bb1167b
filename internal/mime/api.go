package mime

// This file is the package's contract with the rest of nddmilter. The
// bodies are filled in by the parser implementation.

// Parse parses a raw message (header and body) into a normalized Document.
// It never fails and never panics: malformed input produces warnings.
func Parse(raw []byte, opts Options) *Document {
	panic("mime.Parse: not implemented yet")
}

// Tokenize splits the subject and text of doc into tokens, applying opts.
// Subject tokens come first. URLs are not tokenized (see Document.Hosts).
func Tokenize(doc *Document, opts TokenOptions) []Token {
	panic("mime.Tokenize: not implemented yet")
}

// UniqueTerms returns the sorted distinct terms of toks.
func UniqueTerms(toks []Token) []string {
	panic("mime.UniqueTerms: not implemented yet")
}

// UnwrapARF returns the original message attached to an ARF feedback report
// (RFC 5965, multipart/report; report-type=feedback-report) and true, or
// raw and false when raw is not such a report.
func UnwrapARF(raw []byte) ([]byte, bool) {
	panic("mime.UnwrapARF: not implemented yet")
}
