package spamgen

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// affected is the number of words a word-level edit touches: Strength
// times the body's word count, at least 1.
func (g *gen) affected() int {
	n := int(math.Round(g.strength * float64(g.m.wordCount())))
	return max(n, 1)
}

// insertAt inserts w at a uniformly random position of the body (a new
// paragraph when the body is empty).
func (g *gen) insertAt(w string) {
	total := g.m.wordCount()
	if total == 0 {
		g.m.paras = append(g.m.paras, []string{w})
		return
	}
	pos := g.rng.IntN(total + 1)
	for i, p := range g.m.paras {
		if pos <= len(p) {
			g.m.paras[i] = insertString(p, pos, w)
			return
		}
		pos -= len(p)
	}
	last := len(g.m.paras) - 1
	g.m.paras[last] = append(g.m.paras[last], w)
}

func insertString(s []string, i int, w string) []string {
	s = append(s, "")
	copy(s[i+1:], s[i:])
	s[i] = w
	return s
}

// wordRef addresses one body word.
type wordRef struct{ p, w int }

// pickWords returns n distinct random body words, preferring those for
// which ok returns true (ok may be nil).
func (g *gen) pickWords(n int, ok func(string) bool) []wordRef {
	var good, rest []wordRef
	for i, p := range g.m.paras {
		for j, w := range p {
			if ok == nil || ok(w) {
				good = append(good, wordRef{i, j})
			} else {
				rest = append(rest, wordRef{i, j})
			}
		}
	}
	g.rng.Shuffle(len(good), func(i, j int) { good[i], good[j] = good[j], good[i] })
	if len(good) >= n {
		return good[:n]
	}
	g.rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	out := append(good, rest...)
	return out[:min(n, len(out))]
}

const letters = "abcdefghijklmnopqrstuvwxyz"

// randomString returns a hash-buster string: letters only (they survive
// token filters and look like rare words) or letters and digits.
func (g *gen) randomString() string {
	n := 4 + g.rng.IntN(9)
	var b strings.Builder
	alnum := g.rng.IntN(10) < 4
	for i := 0; i < n; i++ {
		if alnum && g.rng.IntN(3) == 0 {
			b.WriteByte(byte('0' + g.rng.IntN(10)))
		} else {
			b.WriteByte(letters[g.rng.IntN(len(letters))])
		}
	}
	return b.String()
}

func (g *gen) hashBuster() {
	// subject: one random string before or after, or inside
	sw := strings.Fields(g.m.subject)
	sw = insertString(sw, g.rng.IntN(len(sw)+1), g.randomString())
	g.m.subject = strings.Join(sw, " ")
	for n := g.affected(); n > 0; n-- {
		g.insertAt(g.randomString())
	}
}

func (g *gen) insert() {
	vocab := g.words
	if len(vocab) == 0 {
		for _, p := range g.m.paras {
			for _, w := range p {
				if c := trimPunct(w); c != "" {
					vocab = append(vocab, c)
				}
			}
		}
	}
	if len(vocab) == 0 {
		return
	}
	for n := g.affected(); n > 0; n-- {
		g.insertAt(vocab[g.rng.IntN(len(vocab))])
	}
}

func trimPunct(w string) string {
	return strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func (g *gen) delete() {
	total := g.m.wordCount()
	n := min(g.affected(), total-1)
	if n <= 0 {
		return
	}
	del := map[wordRef]bool{}
	for _, r := range g.pickWords(n, nil) {
		del[r] = true
	}
	var paras [][]string
	for i, p := range g.m.paras {
		var kept []string
		for j, w := range p {
			if !del[wordRef{i, j}] {
				kept = append(kept, w)
			}
		}
		if len(kept) > 0 {
			paras = append(paras, kept)
		}
	}
	g.m.paras = paras
}

func letterCount(w string) int {
	n := 0
	for _, r := range w {
		if unicode.IsLetter(r) {
			n++
		}
	}
	return n
}

func (g *gen) typos() {
	for _, ref := range g.pickWords(g.affected(), func(w string) bool { return letterCount(w) >= 4 }) {
		g.m.paras[ref.p][ref.w] = g.typo(g.m.paras[ref.p][ref.w])
	}
}

// typo applies one character-level error to the letters of w.
func (g *gen) typo(w string) string {
	r := []rune(w)
	var idx []int
	for i, c := range r {
		if unicode.IsLetter(c) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return w + string(letters[g.rng.IntN(len(letters))])
	}
	i := idx[g.rng.IntN(len(idx))]
	switch g.rng.IntN(4) {
	case 0: // swap with the next letter
		if i+1 < len(r) && unicode.IsLetter(r[i+1]) && r[i] != r[i+1] {
			r[i], r[i+1] = r[i+1], r[i]
			return string(r)
		}
		fallthrough
	case 1: // replace
		c := rune(letters[g.rng.IntN(len(letters))])
		for c == unicode.ToLower(r[i]) {
			c = rune(letters[g.rng.IntN(len(letters))])
		}
		if unicode.IsUpper(r[i]) {
			c = unicode.ToUpper(c)
		}
		r[i] = c
		return string(r)
	case 2: // drop
		if len(idx) > 1 {
			return string(append(r[:i:i], r[i+1:]...))
		}
		fallthrough
	default: // double
		out := append(r[:i+1:i+1], r[i])
		return string(append(out, r[i+1:]...))
	}
}

func (g *gen) shuffle() {
	units := g.m.paras
	single := len(units) < 2
	if single {
		if len(units) == 0 {
			return
		}
		units = sentences(units[0])
		if len(units) < 2 {
			return
		}
	}
	orig := make([][]string, len(units))
	copy(orig, units)
	moves := max(1, int(math.Round(g.strength*float64(len(units)))))
	for i := 0; i < moves; i++ {
		from := g.rng.IntN(len(units))
		u := units[from]
		units = append(units[:from], units[from+1:]...)
		to := g.rng.IntN(len(units) + 1)
		if to == from { // a no-op move: put it elsewhere
			to = (from + 1) % (len(units) + 1)
		}
		units = append(units, nil)
		copy(units[to+1:], units[to:])
		units[to] = u
	}
	if sameOrder(orig, units) {
		units[0], units[1] = units[1], units[0]
	}
	if single {
		var joined []string
		for _, u := range units {
			joined = append(joined, u...)
		}
		g.m.paras = [][]string{joined}
		return
	}
	g.m.paras = units
}

func sameOrder(a, b [][]string) bool {
	for i := range a {
		if len(a[i]) != len(b[i]) || (len(a[i]) > 0 && &a[i][0] != &b[i][0]) {
			return false
		}
	}
	return true
}

// sentences splits a paragraph after words that end a sentence.
func sentences(words []string) [][]string {
	var out [][]string
	start := 0
	for i, w := range words {
		if strings.HasSuffix(w, ".") || strings.HasSuffix(w, "!") || strings.HasSuffix(w, "?") {
			out = append(out, words[start:i+1:i+1])
			start = i + 1
		}
	}
	if start < len(words) {
		out = append(out, words[start:len(words):len(words)])
	}
	return out
}

func (g *gen) appendText() {
	pool := g.pool
	if len(pool) == 0 {
		pool = builtinParagraphs
	}
	target := int(math.Round(g.strength * float64(g.m.wordCount())))
	added := 0
	for tries := 0; tries < 1000; tries++ {
		words := strings.Fields(cleanLine(pool[g.rng.IntN(len(pool))]))
		if len(words) == 0 {
			continue
		}
		g.m.paras = append(g.m.paras, words)
		added += len(words)
		if added >= target {
			return
		}
	}
}

// The trick markers stand for markup inserted inside a word; render turns
// them into tags or comments in HTML and drops them in plain text.
const (
	markTag     = '\uE000'
	markComment = '\uE001'
)

var zeroWidth = []rune{'\u200B', '\u200C', '\u200D', '\u2060', '\uFEFF', '\u00AD'}

// lookAlike maps Latin letters to Cyrillic or Greek letters that look the same.
var lookAlike = map[rune][]rune{
	'a': {'а'}, 'c': {'с'}, 'e': {'е'}, 'i': {'і'}, 'j': {'ј'}, 'o': {'о', 'ο'},
	'p': {'р'}, 's': {'ѕ'}, 'x': {'х'}, 'y': {'у'}, 'v': {'ν'},
	'A': {'А', 'Α'}, 'B': {'В', 'Β'}, 'C': {'С'}, 'E': {'Е', 'Ε'}, 'H': {'Н', 'Η'},
	'I': {'І', 'Ι'}, 'K': {'К', 'Κ'}, 'M': {'М', 'Μ'}, 'N': {'Ν'}, 'O': {'О', 'Ο'},
	'P': {'Р', 'Ρ'}, 'T': {'Т', 'Τ'}, 'X': {'Х', 'Χ'}, 'Y': {'Υ'}, 'Z': {'Ζ'},
}

func (g *gen) htmlTricks() {
	g.m.html = true
	g.tricks = true
	for _, ref := range g.pickWords(g.affected(), func(w string) bool { return letterCount(w) >= 2 }) {
		g.m.paras[ref.p][ref.w] = g.trick(g.m.paras[ref.p][ref.w])
	}
}

// trick obfuscates one word.
func (g *gen) trick(w string) string {
	r := []rune(w)
	if len(r) < 2 {
		return w
	}
	switch g.rng.IntN(4) {
	case 0: // look-alike letters
		var idx []int
		for i, c := range r {
			if _, ok := lookAlike[c]; ok {
				idx = append(idx, i)
			}
		}
		if len(idx) > 0 {
			for k := 0; k < 1+g.rng.IntN(2); k++ {
				i := idx[g.rng.IntN(len(idx))]
				if alts, ok := lookAlike[r[i]]; ok {
					r[i] = alts[g.rng.IntN(len(alts))]
				}
			}
			return string(r)
		}
		fallthrough
	case 1: // zero-width character
		return insertRune(r, 1+g.rng.IntN(len(r)-1), zeroWidth[g.rng.IntN(len(zeroWidth))])
	case 2:
		return insertRune(r, 1+g.rng.IntN(len(r)-1), markTag)
	default:
		return insertRune(r, 1+g.rng.IntN(len(r)-1), markComment)
	}
}

func insertRune(r []rune, i int, c rune) string {
	out := make([]rune, 0, len(r)+1)
	out = append(out, r[:i]...)
	out = append(out, c)
	return string(append(out, r[i:]...))
}

// isASCII reports whether s is 7-bit.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
