package pipeline

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
)

// Mailing-list footers.
//
// A mailing list appends the same footer to every message it relays
// (Mailman's "_______________________________________________ / X mailing
// list / listinfo URL", SourceForge's sponsor block, a "-- " signature).
// A short legitimate post and a short spam relayed by the same list share
// little else, and the footer's words and hosts can then carry most of
// the ANDD weight of both: the ANDD cosine says "near-duplicate" when only
// the footer is common, and an I-Match signature can hash the footer's
// words alone (docs/design/footer.md).
// The signatures are left as they are (they are a wire format): Sign
// locates the footer (messageFooter), leaves out the I-Match signatures
// that are the footer's alone (dropFooterIMatch), and computes on demand
// the ANDD sketch of the body without its footer (Message.Body), with
// which the campaign engine checks that an ANDD match that no I-Match
// signature confirms still holds once the footer is cut off.

// Footer limits: a separator line starts a footer only when what follows
// it is short, so that a separator in the middle of a long text does not
// cut it.
const (
	// footerMaxLines is the largest number of non-blank lines after the
	// separator.
	footerMaxLines = 15
	// footerMaxBytes is the largest footer, separator included, in bytes.
	footerMaxBytes = 1500
	// footerRuleMin is the length of a line of '-', '_' or '=' that counts
	// as a separator (Mailman's is 47 underscores).
	footerRuleMin = 10
)

// footerStart returns the byte offset in text where its trailing footer
// begins (the start of the separator line), or -1 when it has none. The
// footer is the longest tail that starts at a separator line — a
// signature delimiter ("-- " or "--") or a rule of at least footerRuleMin
// '-', '_' or '=' (text may follow the rule, as in "----- Yahoo! Groups
// Sponsor -----") — and stays within footerMaxLines non-blank lines and
// footerMaxBytes bytes. At least one non-blank line must come before it:
// a message that is all footer has no footer.
func footerStart(text string) int {
	end := len(strings.TrimRightFunc(text, unicode.IsSpace))
	if end == 0 {
		return -1
	}
	// Walk the lines backwards from the end, counting non-blank lines,
	// and remember the earliest separator within the limits.
	best := -1
	lines := 0
	pos := end
	for pos > 0 {
		start := strings.LastIndexByte(text[:pos], '\n') + 1
		line := text[start:pos]
		if end-start > footerMaxBytes {
			break
		}
		if strings.TrimSpace(line) != "" {
			lines++
			if lines > footerMaxLines+1 { // the separator itself is not counted
				break
			}
		}
		if isSeparator(line) {
			best = start
		}
		if start == 0 {
			break
		}
		pos = start - 1
	}
	if best < 0 || strings.TrimSpace(text[:best]) == "" {
		return -1
	}
	return best
}

// isSeparator reports whether line is a signature delimiter or a rule.
func isSeparator(line string) bool {
	if mime.IsSignatureDelimiter(line) {
		return true
	}
	line = strings.TrimRight(line, " \t\r")
	line = strings.TrimLeft(line, " \t")
	if line == "" {
		return false
	}
	c, _ := utf8.DecodeRuneInString(line)
	if c != '-' && c != '_' && c != '=' {
		return false
	}
	n := 0
	for _, r := range line {
		if r != c {
			break
		}
		n++
	}
	return n >= footerRuleMin
}

// messageFooter returns where the footer of doc's text starts (see
// footerStart), or -1 when it has none or when the tail cannot be trusted
// to be boilerplate. Anyone can put a separator line above a spam, so the
// tail counts as a footer only when
//   - the message came through a mailing list (List-Id, List-Post, …:
//     mime.Document.List) and the tail names that list, as list footers
//     do ("Users mailing list", its address, its listinfo URL); or
//   - the tail is a personal signature ("-- " or "--") shorter than the
//     text above it.
//
// Otherwise "Hi\n--\n<the spam>" would make the whole spam a footer,
// whose signatures are not used.
func messageFooter(doc *mime.Document) int {
	if doc == nil {
		return -1
	}
	at := footerStart(doc.Text)
	if at < 0 {
		return -1
	}
	foot := doc.Text[at:]
	if doc.List != "" && containsLower(foot, doc.List) {
		return at
	}
	first, _, _ := strings.Cut(foot, "\n")
	if mime.IsSignatureDelimiter(first) && len(foot) < at {
		return at
	}
	return -1
}

// containsLower reports whether strings.ToLower(s) contains sub, without
// lower-casing an ASCII s into a copy.
func containsLower(s, sub string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.Contains(strings.ToLower(s), sub)
		}
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for j < len(sub) && lowerASCII(s[i+j]) == sub[j] {
			j++
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// withoutFooter returns a copy of doc without its footer (see
// footerStart) and true, or doc and false when it has none. URLs that
// occur in the footer and not before it are dropped, and with them the
// hosts no remaining URL names.
func withoutFooter(doc *mime.Document) (*mime.Document, bool) {
	if doc == nil {
		return doc, false
	}
	i := footerStart(doc.Text)
	if i < 0 {
		return doc, false
	}
	return withoutFooterAt(doc, i), true
}

// withoutFooterAt is withoutFooter for a footer found at offset i of
// doc.Text.
func withoutFooterAt(doc *mime.Document, i int) *mime.Document {
	body, footer := doc.Text[:i], doc.Text[i:]
	out := &mime.Document{Subject: doc.Subject, Text: body, From: doc.From, MessageID: doc.MessageID}
	for _, u := range doc.URLs {
		if strings.Contains(footer, u) && !strings.Contains(body, u) {
			continue
		}
		out.URLs = append(out.URLs, u)
	}
	if len(doc.Hosts) == 0 || len(out.URLs) == 0 {
		return out
	}
	lower := make([]string, len(out.URLs)) // each URL lower-cased once, not once per host
	for i, u := range out.URLs {
		lower[i] = strings.ToLower(u)
	}
	for _, h := range doc.Hosts {
		for _, u := range lower {
			if strings.Contains(u, h) {
				out.Hosts = append(out.Hosts, h)
				break
			}
		}
	}
	return out
}

// dropFooterIMatch returns the I-Match signatures of a message (sigs, of
// its sorted terms) that are not those of its mailing-list footer alone
// (the text from footerAt), and how many were dropped. When no word
// outside the footer is in a lexicon, the signature of that lexicon
// hashes the footer's words only and is shared by every post to the list.
// A signature is dropped when every word it hashes is a word of the
// footer (imatchbag.Signer.BagsWithin): it is then the signature the
// footer's words make alone among as many words, the others replaced by
// words of no lexicon (the same number of words, so the same minimum of
// lexicon words per signature). The message's other signatures, every
// signature of a message all of whose words are the footer's, and every
// signature of a message without a footer, are kept. Signatures are a
// wire format: they are not changed, only not used.
func (p *Pipeline) dropFooterIMatch(doc *mime.Document, footerAt int, terms []string, sigs []imatchbag.Signature) ([]imatchbag.Signature, int) {
	foot := mime.UniqueTermsOf(&mime.Document{Text: doc.Text[footerAt:]}, p.opts.Tokens)
	// Both lists are sorted: one merge marks the footer's words among
	// terms.
	in := make([]bool, len(terms))
	k := 0
	for i, j := 0, 0; i < len(terms) && j < len(foot); {
		switch {
		case foot[j] < terms[i]:
			j++
		case foot[j] > terms[i]:
			i++
		default:
			in[i] = true
			k++
			i++
			j++
		}
	}
	if k == len(terms) {
		return sigs, 0 // every word is the footer's: the signatures are the message's too
	}
	bags := p.imatch.BagsWithin(terms, func(i int) bool { return in[i] })
	if bags == 0 {
		return sigs, 0
	}
	kept := sigs[:0:0]
	for _, sig := range sigs {
		if bags&(1<<sig.Bag) == 0 {
			kept = append(kept, sig)
		}
	}
	return kept, len(sigs) - len(kept)
}
