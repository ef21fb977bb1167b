// Package mime turns a raw RFC 5322 / MIME message into a normalized
// document: its subject, its visible text, the URLs it links to and their
// hosts. All MIME, charset and HTML handling of nddmilter lives here, and so
// does tokenization, so that every signature family sees the same words.
//
// Parsing never fails on malformed content: every fallback (a broken
// boundary, bad base64, an unknown charset, a truncated message, a nesting
// limit) is recorded in Document.Warnings and the best text that could be
// recovered is kept.
package mime

// Options bound the work done on one message. The zero value selects the
// documented defaults.
type Options struct {
	// MaxBytes is the number of bytes of the raw message that are scanned;
	// the rest is ignored and a warning is recorded. Default 4 MiB.
	MaxBytes int64
	// MaxDepth bounds multipart nesting. Default 16.
	MaxDepth int
	// MaxParts bounds the number of MIME parts visited. Default 256.
	MaxParts int
}

// Document is the normalized content of one message.
//
// Subject and Text are NFKC-normalized, stripped of zero-width characters
// and soft hyphens, with Cyrillic/Greek look-alike letters folded to Latin,
// but they keep their letter case (tokenization lower-cases; some ANDD
// features look at capitalization).
type Document struct {
	Subject string
	// Text is the visible body text: text/plain parts and the visible text
	// of text/html parts, separated by newlines.
	Text string
	// URLs are the distinct URLs found in href/src attributes and in the
	// text, in order of first appearance.
	URLs []string
	// Hosts are the distinct lower-cased host names of URLs, in order of
	// first appearance.
	Hosts []string
	// From is the address of the From header ("" if absent or unparsable).
	From string
	// MessageID is the Message-ID header without angle brackets.
	MessageID string
	// Warnings lists every fallback taken while parsing, in order.
	Warnings []string
	// Truncated is true when the message was longer than Options.MaxBytes.
	Truncated bool
}
