package mime

// TokenOptions select which words of a document become terms. The zero
// value selects the preprocessing of Kolcz & Chowdhury (sect. 6.3), which is
// the default everywhere in nddmilter.
type TokenOptions struct {
	// MinLen drops words with fewer runes. Default 4.
	MinLen int
	// MaxDigits drops words with more digits than this. Default 1.
	MaxDigits int
	// MaxLen drops words with more runes (garbage, base64 runs). Default 40.
	MaxLen int
	// MaxTokens bounds the tokens of a document: the words after the
	// first MaxTokens tokens (subject first) are not analyzed. It is a
	// work budget, far above real mail (the SpamAssassin public corpus has
	// at most 9,013 tokens in a message). Default 32768.
	MaxTokens int
}

// Token is one word of a document, lower-cased.
type Token struct {
	Term string
	// Pos is the index of the token among the document's kept tokens;
	// subject tokens come first.
	Pos int
	// InSubject is true for tokens of the subject line.
	InSubject bool
	// Capitalized is true when the word began with an upper-case letter in
	// the source; AllCaps when every letter was upper-case (and len > 1).
	Capitalized bool
	AllCaps     bool
}
