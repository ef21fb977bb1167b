// Package spamgen generates randomized copies of a spam campaign the way
// spammers produce them: hash-buster strings, inserted and deleted words,
// typos, shuffled paragraphs, appended legitimate text, transfer and charset
// re-encoding, plain↔HTML conversion and HTML obfuscation tricks.
//
// Generation is deterministic: the same input and Options (including Seed)
// always produce the same bytes. Every output is a complete RFC 5322 message
// with a fresh Message-ID, Date and recipient. Malformed input never panics:
// whatever text can be recovered from it is used.
//
// spamgen is used to train the ANDD model (internal/andd), to measure
// robustness (internal/eval) and to synthesize campaigns from plain text
// corpora (NewMessage).
package spamgen

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Kind is one randomization technique.
type Kind string

// The randomization techniques.
const (
	// HashBuster inserts random strings into the subject and the body.
	HashBuster Kind = "hashbuster"
	// Insert inserts dictionary words (Options.Words, or words of the
	// message itself when Words is empty) at random positions.
	Insert Kind = "insert"
	// Delete deletes random words.
	Delete Kind = "delete"
	// Typos swaps, replaces, drops or doubles characters inside words.
	Typos Kind = "typos"
	// Shuffle permutes the paragraphs (sentences when there is only one).
	Shuffle Kind = "shuffle"
	// Append appends paragraphs of legitimate text (Options.Paragraphs, or a
	// built-in pool) amounting to about Strength times the message length.
	Append Kind = "append"
	// Reencode changes the transfer encoding (base64 or quoted-printable),
	// the charset (UTF-8, ISO-8859-1 when representable, UTF-16) and
	// encodes the subject as an RFC 2047 encoded word.
	Reencode Kind = "reencode"
	// HTMLify turns a plain text message into HTML and an HTML message into
	// plain text.
	HTMLify Kind = "htmlify"
	// HTMLTricks renders the message as HTML and obfuscates words with
	// empty tags and comments inside them, zero-width characters, soft
	// hyphens and Cyrillic/Greek look-alike letters.
	HTMLTricks Kind = "htmltricks"
	// Combo applies three distinct randomly chosen kinds among the others.
	Combo Kind = "combo"
)

// AllKinds lists every Kind, Combo last.
func AllKinds() []Kind {
	return []Kind{HashBuster, Insert, Delete, Typos, Shuffle, Append, Reencode, HTMLify, HTMLTricks, Combo}
}

// ParseKind returns the Kind named s (case-insensitive).
func ParseKind(s string) (Kind, error) {
	k := Kind(strings.ToLower(strings.TrimSpace(s)))
	if slices.Contains(AllKinds(), k) {
		return k, nil
	}
	return "", fmt.Errorf("unknown randomization kind %q", s)
}

// DefaultStrength is the Strength used when Options.Strength is 0.
const DefaultStrength = 0.1

// Options configure Mutate. The zero value applies Combo at DefaultStrength
// with seed 0.
type Options struct {
	// Kinds are applied in order. Default: {Combo}.
	Kinds []Kind
	// Strength in (0,1] is the share of words affected (HashBuster,
	// Insert, Delete, Typos, HTMLTricks), the share of paragraphs moved
	// (Shuffle) or the length of appended text relative to the message
	// (Append). At least one word or paragraph is always affected.
	// Default DefaultStrength; values above 1 are clamped to 1.
	Strength float64
	// Seed selects the random choices; equal seeds give equal outputs.
	Seed uint64
	// Words is the vocabulary for Insert. Default: the message's own words.
	Words []string
	// Paragraphs is the pool of legitimate text for Append. Default: a small
	// built-in pool.
	Paragraphs []string
}

// ErrEmpty is returned by Mutate when no text at all could be recovered
// from the input.
var ErrEmpty = errors.New("spamgen: message has no text")

// Mutate returns a randomized copy of the raw message.
func Mutate(raw []byte, opts Options) ([]byte, error) {
	m := parseMessage(raw)
	if m.empty() {
		return nil, ErrEmpty
	}
	strength := opts.Strength
	switch {
	case strength <= 0:
		strength = DefaultStrength
	case strength > 1:
		strength = 1
	}
	kinds := opts.Kinds
	if len(kinds) == 0 {
		kinds = []Kind{Combo}
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	g := &gen{rng: rng, strength: strength, words: opts.Words, pool: opts.Paragraphs, m: m}
	for _, k := range kinds {
		if err := g.apply(k, true); err != nil {
			return nil, err
		}
	}
	return g.render(), nil
}

// NewMessage builds a base message from plain text: the subject and the
// body, whose paragraphs are separated by blank lines. With html the body
// is rendered as text/html. The result is deterministic: its Message-ID is
// derived from the content.
func NewMessage(subject, body string, html bool) []byte {
	m := &message{subject: cleanLine(subject), html: html, from: "Campaign Sender <sender@campaign.example>"}
	m.paras = splitParagraphs(body)
	return renderBase(m)
}

// gen holds the state of one Mutate call.
type gen struct {
	rng      *rand.Rand
	strength float64
	words    []string
	pool     []string
	m        *message
	// encoding choices made by Reencode
	reencode bool
	// tricks makes render emit the HTML markers
	tricks bool
}

func (g *gen) apply(k Kind, allowCombo bool) error {
	switch k {
	case HashBuster:
		g.hashBuster()
	case Insert:
		g.insert()
	case Delete:
		g.delete()
	case Typos:
		g.typos()
	case Shuffle:
		g.shuffle()
	case Append:
		g.appendText()
	case Reencode:
		g.reencode = true
	case HTMLify:
		g.m.html = !g.m.html
	case HTMLTricks:
		g.htmlTricks()
	case Combo:
		if !allowCombo {
			return nil
		}
		base := AllKinds()
		base = base[:len(base)-1]
		g.rng.Shuffle(len(base), func(i, j int) { base[i], base[j] = base[j], base[i] })
		pick := base[:3]
		// keep a natural order: content edits before encodings
		slices.SortFunc(pick, func(a, b Kind) int { return kindOrder(a) - kindOrder(b) })
		for _, p := range pick {
			if err := g.apply(p, false); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("spamgen: unknown kind %q", k)
	}
	return nil
}

func kindOrder(k Kind) int {
	return slices.Index(AllKinds(), k)
}
