package mime

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

func (o TokenOptions) withDefaults() TokenOptions {
	if o.MinLen <= 0 {
		o.MinLen = 4
	}
	if o.MaxDigits <= 0 {
		o.MaxDigits = 1
	}
	if o.MaxLen <= 0 {
		o.MaxLen = 40
	}
	return o
}

// tokenizer builds the tokens of one document. Lower-cased terms that
// differ from their source are written to one arena that becomes a single
// string at the end; terms already in lower case share the document's
// memory.
type tokenizer struct {
	opts  TokenOptions
	toks  []Token
	arena []byte
	fix   []arenaRef
}

type arenaRef struct {
	tok        int
	start, end int
}

func tokenize(doc *Document, opts TokenOptions) []Token {
	t := tokenizer{opts: opts.withDefaults()}
	t.toks = make([]Token, 0, (len(doc.Subject)+len(doc.Text))/7+4)
	t.words(doc.Subject, true)
	t.words(doc.Text, false)
	if len(t.fix) > 0 {
		s := string(t.arena)
		for _, f := range t.fix {
			t.toks[f.tok].Term = s[f.start:f.end]
		}
	}
	return t.toks
}

// words appends the tokens of s.
func (t *tokenizer) words(s string, inSubject bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !isWordRune(rune(c)) {
				i++
				continue
			}
			if (c|0x20 == 'h' || c|0x20 == 'w') && (i == 0 || !isWordByteBefore(s, i)) {
				if end := urlEnd(s, i); end >= 0 {
					i = end
					continue
				}
			}
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			if cl := runeInfo(r) & rcClass; cl == rcNone || cl == rcMark {
				i += size
				continue
			}
		}
		i = t.word(s, i, inSubject)
	}
}

// word scans the word starting at s[i], appends it as a token when it
// passes the filters, and returns the index after it.
func (t *tokenizer) word(s string, i int, inSubject bool) int {
	j := i
	runes, digits, letters, upper := 0, 0, 0, 0
	first := true
	capitalized := false
	for j < len(s) {
		c := s[j]
		if c < utf8.RuneSelf {
			switch {
			case 'a' <= c && c <= 'z':
				letters++
			case 'A' <= c && c <= 'Z':
				letters++
				upper++
				if first {
					capitalized = true
				}
			case '0' <= c && c <= '9':
				digits++
			default:
				goto done
			}
			j++
			runes++
			first = false
			continue
		}
		r, size := utf8.DecodeRuneInString(s[j:])
		cl := runeInfo(r) & rcClass
		if cl == rcNone {
			break
		}
		switch cl {
		case rcDigit:
			digits++
		case rcLetter:
			letters++
		case rcUpper:
			letters++
			upper++
			if first {
				capitalized = true
			}
		}
		j += size
		runes++
		first = false
	}
done:
	if runes < t.opts.MinLen || runes > t.opts.MaxLen || digits > t.opts.MaxDigits {
		return j
	}
	tok := Token{
		Pos:         len(t.toks),
		InSubject:   inSubject,
		Capitalized: capitalized,
		AllCaps:     letters > 1 && upper == letters,
	}
	if upper == 0 {
		tok.Term = s[i:j] // already lower case: share the document's memory
	} else {
		start := len(t.arena)
		for k := i; k < j; {
			c := s[k]
			if c < utf8.RuneSelf {
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				t.arena = append(t.arena, c)
				k++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[k:])
			if runeInfo(r)&rcClass == rcUpper {
				r = unicode.ToLower(r)
			}
			t.arena = utf8.AppendRune(t.arena, r)
			k += size
		}
		t.fix = append(t.fix, arenaRef{tok: len(t.toks), start: start, end: len(t.arena)})
	}
	t.toks = append(t.toks, tok)
	return j
}

func uniqueTerms(toks []Token) []string {
	terms := make([]string, len(toks))
	for i := range toks {
		terms[i] = toks[i].Term
	}
	slices.Sort(terms)
	return slices.Compact(terms)
}
