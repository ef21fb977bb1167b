package imatchbag

import "github.com/nddmilter/nddmilter/internal/mime"

// TextTerms returns the sorted unique terms of a plain-text document,
// tokenized exactly as message bodies are (mime.Tokenize with opts).
func TextTerms(text string, opts mime.TokenOptions) []string {
	return mime.UniqueTermsOf(&mime.Document{Text: text}, opts)
}

// MessageTerms parses a raw message and returns its sorted unique terms
// (subject and visible body text).
func MessageTerms(raw []byte, mopts mime.Options, topts mime.TokenOptions) []string {
	return mime.UniqueTermsOf(mime.Parse(raw, mopts), topts)
}
