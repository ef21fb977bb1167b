// Package mime turns a raw RFC 5322 / MIME message into a normalized
// document: its subject, its visible text, the URLs it links to and their
// hosts. All MIME, charset and HTML handling of nddmilter lives here, and so
// does tokenization, so that every signature family sees the same words.
//
// Parsing never fails on malformed content: every fallback (a broken
// boundary, bad base64, an unknown charset, a truncated message, a nesting
// limit) is recorded in Document.Warnings and the best text that could be
// recovered is kept.
//
// Design choices, each tested beside the code:
//
//   - Headers and multipart bodies are split in place over the raw bytes
//     (no copies), leniently: a declared boundary that never occurs is
//     replaced by the first delimiter-looking line of the body, a missing
//     closing delimiter keeps the last part, a malformed header line is
//     skipped. Charsets are those of github.com/emersion/go-message/charset
//     (golang.org/x/text), looked up WHATWG-first as mail clients do; RFC
//     2047 encoded-words in the same charset are joined before decoding, so
//     CJK characters split across words survive. Undeclared 8-bit text that
//     is not UTF-8 is read as windows-1252, or as windows-1251 / KOI8-R
//     when it looks Russian; an 8-bit Subject uses the body's charset.
//   - In multipart/alternative only what a mail client shows is read: the
//     HTML alternative (or the last, richest one), falling back to the next
//     when it has no text. Text hidden in an unseen alternative, in
//     attachments or in non-text parts does not reach the signatures.
//   - HTML is reduced to its visible text with the golang.org/x/net/html
//     tokenizer: script, style, title, template, noscript and elements
//     hidden by style (display:none, visibility:hidden, opacity:0, font-size
//     0 or below 2px, zero height/width with overflow:hidden) or by the
//     hidden attribute are dropped; inline tags and comments never split a
//     word, block tags do. CSS classes are not resolved.
//   - Text is normalized against obfuscation (see normalizer): invisible
//     characters removed, NFKC, and Cyrillic/Greek/Armenian look-alikes
//     folded to Latin only inside words that contain a Latin letter, so that
//     genuine Russian or Greek text is unchanged.
//   - Work is linear in the bytes scanned and bounded by budgets (see
//     Options and TokenOptions): a hostile message (NFKC expansion,
//     encoded-word floods, huge headers, deep nesting) is read on its
//     bounded prefix with a warning, never an error or a timeout.
//   - URLs are web URLs (http, https, ftp, protocol-relative, www.) from
//     href/src/background/action attributes (hidden elements included: a
//     hidden link still names the spammer's host) and from the text; a
//     part's attribute URLs come before its text URLs.
package mime

// Options bound the work done on one message. The zero value selects the
// documented defaults, which are far above what real mail needs (the
// largest message of the SpamAssassin public corpus has 195 KB of text, a
// 14 KB header field, 53 encoded-words in one header and 29 parts).
//
// A message over a budget is never an error: it is parsed on its bounded
// prefix (what came before the budget ran out), a warning says which
// budget cut it, and Document.OverBudget is set. Every budget bounds the
// work too: whatever the content, Parse is linear in the bytes it scans.
type Options struct {
	// MaxBytes is the number of bytes of the raw message that are scanned;
	// the rest is ignored and a warning is recorded. Default 4 MiB.
	MaxBytes int64
	// MaxDepth bounds multipart nesting. Default 16.
	MaxDepth int
	// MaxParts bounds the number of MIME parts visited. Default 256.
	MaxParts int
	// MaxTextBytes bounds Document.Text, the normalized visible text: the
	// text past it is dropped (NFKC expands a character up to 18-fold, so
	// the bound is on the normalized text, and normalization stops there
	// rather than after expanding everything). Default 1 MiB.
	MaxTextBytes int
	// MaxHeaderBytes bounds the bytes of a header value that are decoded
	// (RFC 2047, charsets) and normalized, and the normalized value kept
	// (Document.Subject). Default 64 KiB.
	MaxHeaderBytes int
	// MaxEncodedWords bounds the RFC 2047 encoded-words decoded in the
	// message's header (all fields together); the rest of a field past
	// the last one decoded is dropped. Default 1024.
	MaxEncodedWords int
	// MaxComposeBytes bounds the bytes of text that go through full
	// Unicode normalization (golang.org/x/text/unicode/norm: combining
	// marks to compose, compatibility characters not met before in the
	// message); the text from the first segment over it is dropped.
	// Default 256 KiB.
	MaxComposeBytes int

	// testPanic makes Parse panic mid-message (tests of the recover path).
	testPanic bool
}

// Bounds of Document.AuthResults.
const (
	MaxAuthResults   = 8
	MaxAuthResultLen = 2048
)

// Bounds of Document.Recipients: the addresses read, and the length of a
// To or Cc field read (a longer one is skipped).
const (
	MaxRecipients     = 16
	MaxRecipientField = 4096
)

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
	// List names the mailing list the message came through, lower case:
	// the first label of List-Id (RFC 2919), else the local part of the
	// address in List-Post, Mailing-List or X-Mailing-List; "" when the
	// message has none of them. The footer detection and the short keys
	// read it.
	List string
	// ListID is the mailing list's whole identifier: the List-Id's
	// <list.example.org>, else the List-Post (Mailing-List,
	// X-Mailing-List) address; "" when none. It does not enter any
	// signature.
	ListID string
	// ListPost is the list's posting address: the address of List-Post
	// (Mailing-List, X-Mailing-List), lower case; "" when none. A reply
	// sent straight to a list's members names it in To or Cc. It does not
	// enter any signature.
	ListPost string
	// Recipients are the addresses of the To and Cc fields, lower case,
	// at most MaxRecipients of them: a graymail sign when one is a list's
	// posting address. They do not enter any signature.
	Recipients []string
	// AuthResults are the values of the message's Authentication-Results
	// header fields (RFC 8601), topmost first, at most MaxAuthResults of
	// at most MaxAuthResultLen bytes each: who vouches for them is the
	// reader's question. They do not enter any signature.
	AuthResults []string
	// Bulk is set when the message carries a bulk-mail header: a
	// List-Unsubscribe header, or Precedence bulk, list or junk. It does
	// not enter any signature.
	Bulk bool
	// Precedence is the Precedence field's value, lower case ("bulk",
	// "list", "junk"; "" when none). It does not enter any signature.
	Precedence string
	// Reply is set when the message answers another: an In-Reply-To or
	// References field names a message identifier. It does not enter any
	// signature.
	Reply bool
	// Parts are the parts not read as text (images, attachments), in
	// order, at most 64 of them; see Part.
	Parts []Part
	// Warnings lists every fallback taken while parsing, in order.
	Warnings []string
	// Truncated is true when the message was longer than Options.MaxBytes.
	Truncated bool
	// OverBudget is true when any budget of Options (MaxBytes included)
	// cut the content: the document is that of the message's bounded
	// prefix, and Warnings say which budget.
	OverBudget bool

	// work is what the scans that could repeat and the normalizer
	// examined, in bytes: the tests of linearity bound it per input byte.
	work int
}
