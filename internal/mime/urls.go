package mime

import (
	"bytes"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// urlSet collects distinct URLs and hosts in order of first appearance.
// A message holds a few URLs: up to urlSetSmall of each kind are found
// again by a linear search, and only a set that grows beyond that is
// indexed by a map (built then from the list), so that most messages
// neither hash their URLs nor clear a map.
type urlSet struct {
	urls  []string
	hosts []string
	seenU map[string]struct{} // the members of urls, once past urlSetSmall
	seenH map[string]struct{} // the members of hosts, once past urlSetSmall
	max   int
	work  int // bytes searched by scanText, for the tests of linearity
	// bufU and bufH hold urls and hosts while the set is filled; the
	// caller's copies are made by take.
	bufU, bufH []string
}

// urlSetSmall is the size of a URL or host list searched linearly.
const urlSetSmall = 16

// urlSetMapKeep is the size of an index map that reset clears for the
// next message; a larger one is dropped (clearing costs its capacity).
const urlSetMapKeep = 256

func (u *urlSet) reset(max int) {
	clear(u.bufU) // do not retain the previous message
	clear(u.bufH)
	u.urls, u.hosts = u.bufU[:0], u.bufH[:0]
	u.work = 0
	u.seenU = resetIndex(u.seenU)
	u.seenH = resetIndex(u.seenH)
	u.max = max
}

func resetIndex(m map[string]struct{}) map[string]struct{} {
	if len(m) > urlSetMapKeep {
		return nil
	}
	clear(m)
	return m
}

// take returns the URLs and hosts collected (nil when there are none) in
// slices of their own, and empties the set.
func (u *urlSet) take() (urls, hosts []string) {
	if len(u.urls) > 0 {
		urls = slices.Clone(u.urls)
	}
	if len(u.hosts) > 0 {
		hosts = slices.Clone(u.hosts)
	}
	u.bufU, u.bufH = u.urls, u.hosts
	u.reset(u.max)
	return urls, hosts
}

// member reports whether s is in list, whose index is m.
func member(list []string, m map[string]struct{}, s string) bool {
	if len(list) > urlSetSmall {
		_, ok := m[s]
		return ok
	}
	for _, t := range list {
		if t == s {
			return true
		}
	}
	return false
}

// insert appends s to list and to its index m, creating the index when
// the list grows past urlSetSmall.
func insert(list []string, m *map[string]struct{}, s string) []string {
	list = append(list, s)
	switch n := len(list); {
	case n == urlSetSmall+1:
		if *m == nil {
			*m = make(map[string]struct{}, 2*n)
		}
		for _, t := range list {
			(*m)[t] = struct{}{}
		}
	case n > urlSetSmall+1:
		(*m)[s] = struct{}{}
	}
	return list
}

// hasURL reports whether s was recorded as a URL.
func (u *urlSet) hasURL(s string) bool {
	return member(u.urls, u.seenU, s)
}

// addBytes is add for an attribute value still holding character
// references.
func (u *urlSet) addBytes(v []byte) {
	if len(v) < 4 || len(u.urls) >= u.max {
		return
	}
	v = bytes.TrimSpace(v)
	if bytes.IndexByte(v, '&') >= 0 {
		u.add(html.UnescapeString(string(v)))
		return
	}
	if len(v) < 4 || !hasWebPrefix(v) || member(u.urls, u.seenU, string(v)) {
		return // add would ignore it: no copy
	}
	u.add(string(v))
}

// hasWebPrefix reports whether v starts as urlHost requires of a web URL.
func hasWebPrefix(v []byte) bool {
	if len(v) < 2 {
		return false
	}
	switch v[0] | 0x20 {
	case '/': // v[0] is '/' or 0x0f
		return v[0] == '/' && v[1] == '/'
	case 'w':
		return len(v) >= 4 && equalFoldASCII(v[:4], "www.")
	case 'f':
		return len(v) >= 6 && equalFoldASCII(v[:6], "ftp://")
	case 'h':
		return len(v) >= 7 && equalFoldASCII(v[:7], "http://") ||
			len(v) >= 8 && equalFoldASCII(v[:8], "https://")
	}
	return false
}

// add records raw (an href/src value or a URL found in text; the caller
// owns its memory) when it is a
// web URL: http, https, ftp, protocol-relative, or starting with "www.".
// Other schemes (mailto, cid, data, javascript, …) are ignored.
func (u *urlSet) add(raw string) {
	s := strings.TrimSpace(raw)
	if len(s) < 4 || len(u.urls) >= u.max {
		return
	}
	host, ok := urlHost(s)
	if !ok {
		return
	}
	if !member(u.urls, u.seenU, s) {
		u.urls = insert(u.urls, &u.seenU, s)
	}
	if host == "" {
		return
	}
	if !member(u.hosts, u.seenH, host) {
		u.hosts = insert(u.hosts, &u.seenH, host)
	}
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// urlHost returns the lower-cased host of a web URL and true, or false
// when s is not a web URL.
func urlHost(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	// Only ASCII bytes fold to the ASCII prefixes: the first byte tells
	// which prefixes to try.
	var rest string
	switch c := s[0] | 0x20; {
	case c == 'h' && hasPrefixFold(s, "http://"):
		rest = s[7:]
	case c == 'h' && hasPrefixFold(s, "https://"):
		rest = s[8:]
	case c == 'f' && hasPrefixFold(s, "ftp://"):
		rest = s[6:]
	case strings.HasPrefix(s, "//"):
		rest = s[2:]
	case c == 'w' && hasPrefixFold(s, "www."):
		rest = s
	default:
		return "", false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; c == '/' || c == '?' || c == '#' || c == '\\' {
			rest = rest[:i]
			break
		}
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if strings.HasPrefix(rest, "[") { // IPv6 literal
		if i := strings.IndexByte(rest, ']'); i > 0 {
			return strings.ToLower(rest[:i+1]), true
		}
		return "", true
	}
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		rest = rest[:i]
	}
	rest = strings.TrimRight(rest, ".")
	for i := 0; i < len(rest); {
		if c := rest[i]; c < utf8.RuneSelf {
			if !hostByte[c] {
				return "", true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(rest[i:])
		if !isWordRune(r) {
			return "", true
		}
		i += size
	}
	return strings.ToLower(rest), true
}

// hostByte marks the ASCII bytes allowed in a host name: letters, digits,
// '.', '-' and '_'.
var hostByte = func() (t [utf8.RuneSelf]bool) {
	for c := 0; c < utf8.RuneSelf; c++ {
		t[c] = isWordRune(rune(c)) || c == '.' || c == '-' || c == '_'
	}
	return t
}()

// urlEnd returns the end of the URL starting at s[i] (after trailing
// punctuation is removed), or -1 when no URL starts there. A URL starts
// with http://, https:// or www. (ASCII case-insensitive).
func urlEnd(s string, i int) int {
	t := s[i:]
	var n int
	switch {
	case len(t) > 7 && (t[0]|0x20) == 'h' && hasPrefixFold(t, "http://"):
		n = 7
	case len(t) > 8 && (t[0]|0x20) == 'h' && hasPrefixFold(t, "https://"):
		n = 8
	case len(t) > 5 && (t[0]|0x20) == 'w' && hasPrefixFold(t, "www.") && isWordRune(rune(t[4])):
		n = 4
	default:
		return -1
	}
	j := n
	for j < len(t) {
		c := t[j]
		if c < utf8.RuneSelf {
			if urlStop[c] {
				break
			}
			j++
			continue
		}
		r, size := utf8.DecodeRuneInString(t[j:])
		if !isWordRune(r) {
			break
		}
		j += size
	}
	// Trailing punctuation belongs to the sentence, not the URL; a closing
	// bracket only when it has no opening partner inside the URL.
	open := strings.Count(t[:j], "(") - strings.Count(t[:j], ")")
	openSq := strings.Count(t[:j], "[") - strings.Count(t[:j], "]")
	for j > n {
		c := t[j-1]
		switch {
		case c == '.' || c == ',' || c == ';' || c == ':' || c == '!' || c == '?' || c == '*':
		case c == ')' && open < 0:
			open++
		case c == ']' && openSq < 0:
			openSq++
		default:
			goto trimmed
		}
		j--
	}
trimmed:
	if j == n {
		return -1
	}
	return i + j
}

// urlStop marks the ASCII bytes that end a URL in text: control
// characters, space, DEL and <>"'`{}|^.
var urlStop = func() (t [utf8.RuneSelf]bool) {
	for c := 0; c <= ' '; c++ {
		t[c] = true
	}
	for _, c := range "<>\"'`{}|^\x7f" {
		t[c] = true
	}
	return t
}()

// scanText adds the URLs found in text to u. A URL must start a word.
func (u *urlSet) scanText(text string) {
	sc := urlScanner{scheme: cachedSearch{pos: -1}, www: cachedSearch{pos: -1}}
	for i := 0; i < len(text); {
		j := sc.indexURLStart(text, i)
		if j < 0 {
			return
		}
		if j > 0 && isWordByteBefore(text, j) {
			i = j + 1
			continue
		}
		end := urlEnd(text, j)
		if end < 0 {
			i = j + 1
			continue
		}
		u.work += end - j
		if !u.hasURL(text[j:end]) {
			u.add(strings.Clone(text[j:end]))
		}
		i = end
	}
	u.work += sc.scheme.work + sc.www.work
}

// urlScanner remembers, across the calls of one scan of a text, where the
// next "://" and the next "www." are, so that text full of near misses
// (a "www." inside a word, "http" without "://") is searched once, not
// once per near miss.
type urlScanner struct {
	scheme, www cachedSearch
}

// cachedSearch finds the next occurrence of something in one text for
// positions that grow, searching each stretch of the text at most once.
type cachedSearch struct {
	pos  int // index of the occurrence found last, -1 for none
	from int // 1 + where that search started; 0 before the first search
	work int // bytes searched, for the tests of linearity
}

// next returns search(s[i:]) as an index of s (or -1), reusing the
// previous answer when it is still valid: when that search started at or
// before i and found nothing before i.
func (c *cachedSearch) next(s string, i int, search func(string) int) int {
	if c.from == 0 || c.from-1 > i || c.pos >= 0 && c.pos < i {
		k := search(s[i:])
		c.from = i + 1
		if k < 0 {
			c.pos = -1
			c.work += len(s) - i
		} else {
			c.pos = i + k
			c.work += k + 1
		}
	}
	return c.pos
}

// indexURLStart returns the index at or after i of the next "http" or
// "www." (ASCII case-insensitive) that is followed by what could make a
// URL, or -1. It looks for "://" and "ww." with the fast substring search
// and checks what precedes them.
func (sc *urlScanner) indexURLStart(s string, i int) int {
	for i < len(s) {
		best := -1
		// "http://" or "https://"
		if p := sc.scheme.next(s, i, func(t string) int { return strings.Index(t, "://") }); p >= 0 {
			switch {
			case p-5 >= i && hasPrefixFold(s[p-5:], "https"):
				best = p - 5
			case p-4 >= i && hasPrefixFold(s[p-4:], "http"):
				best = p - 4
			}
			if best < 0 {
				// Not a web scheme: look again after it, unless a www.
				// comes first.
				if w := sc.www.next(s, i, indexWWW); w >= 0 && w < p {
					return w
				}
				i = p + 3
				continue
			}
		}
		w := sc.www.next(s, i, indexWWW)
		if w >= 0 && (best < 0 || w < best) {
			return w
		}
		return best
	}
	return -1
}

// indexWWW returns the index of the first "www." in s (ASCII
// case-insensitive), or -1.
func indexWWW(s string) int {
	for i := 0; i+4 <= len(s); {
		k := strings.IndexByte(s[i:], '.')
		if k < 0 {
			return -1
		}
		p := i + k
		if p-3 >= i && (s[p-1]|0x20) == 'w' && (s[p-2]|0x20) == 'w' && (s[p-3]|0x20) == 'w' {
			return p - 3
		}
		i = p + 1
	}
	return -1
}

func isWordByteBefore(s string, j int) bool {
	r, _ := utf8.DecodeLastRuneInString(s[:j])
	return isWordRune(r) || r == '.' || r == '/' || r == '@'
}
