// Package shortsig computes the short-message signatures of nddmilter: the
// evidence of messages too short for I-Match and ANDD (an image alone, an
// attachment with a line of text, a few words of Chinese or Japanese,
// a link) and of copies padded with appended text.
//
// A message is described by three components:
//
//   - media: the SHA-256 digests of its non-text parts (mime.Part) that
//     are large enough to be content: at least Options.MinPartBytes
//     decoded bytes and, for a GIF, PNG or JPEG image, at least
//     Options.MinImageSide pixels on each side (tracking pixels, spacers
//     and icons are left out);
//   - links: its URLs reduced to registrable domain (public suffix list)
//     and path, without scheme, query or fragment;
//   - text: the distinct units of its subject and visible text: lower-cased
//     words of at least two letters with at most one digit, and character
//     bigrams of scripts written without spaces (Han, Hiragana, Katakana,
//     Thai, Lao, Khmer, Myanmar), so that a short Chinese text has units.
//
// Each key is a hash of some components, prefixed by a version byte, the
// family byte 'S' and a kind byte (see Kind). No key is made from content
// that every message may share (the Pyzor empty-digest failure):
//
//   - a component counts only when it is usable: media with at least one
//     part, links with at least one link outside Options.CommonDomains,
//     text with at least Options.MinTextUnits units; no key is made when
//     no component is usable;
//   - a message is short when its text has at most Options.MaxTextUnits
//     units, or when it has no other signature (SignUnsigned); only short
//     messages get the content keys (all, media, links, body), so a
//     company logo in a long message never makes a key of its own;
//   - the media and links keys, which leave the text out, are made only
//     when the text is not usable: an image or attachment with a greeting
//     is matched on its image, but a short message with text is matched
//     on its text and parts together;
//   - the lead keys (subject and leading text, for padded copies) need
//     at least 16 distinct units of text (Options.LeadLevels) and are not
//     made for mailing-list messages (their leading template is shared by
//     every post).
//
// The work is linear in the text read and bounded: a long message's units
// are read only until it is known to be long and its lead is complete,
// links and media are reduced only for short messages, and at most
// Options.MaxUnits distinct units are read from any text.
//
// Keys are a wire format: a change of what is hashed bumps Version, and
// the golden vectors of testdata/golden.json pin them.
package shortsig

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"
	"sync"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// Version is the version of the key wire format. Any change of what is
// hashed, or how, increments it.
const Version = 1

// Family is the family byte of short-message keys (byte 1 of a key).
const Family = 'S'

// KeyLen is the length of a key: version, family, kind, 16 bytes of hash.
const KeyLen = 3 + hashLen

const hashLen = 16

// Kind says which components a key hashes (byte 2 of a key).
type Kind byte

// The kinds of keys.
const (
	// KindAll hashes media, links and text: the whole content of a short
	// message. Made when some component is usable.
	KindAll Kind = 'a'
	// KindMedia hashes the media and the links' registrable domains. Made
	// when media are usable and the text is not (an image or an
	// attachment, perhaps with a greeting).
	KindMedia Kind = 'm'
	// KindLinks hashes the links. Made when links are usable, the message
	// has no media part at all and its text is not usable.
	KindLinks Kind = 'l'
	// KindBody hashes the media, the links' registrable domains and the
	// text units of the body without its first non-empty line (a greeting
	// changed from copy to copy). Made when the body has two non-empty
	// lines or more and the rest is usable text (see Result.SignedNote).
	KindBody Kind = 'b'
	// KindLead hashes the subject's units and the first n distinct units
	// of the body, in order, n one of Options.LeadLevels: copies with text
	// appended keep them. Made for messages of any length (see the package
	// doc): a message's key at the largest level its body reaches is in
	// Result.Keys, its keys at the smaller levels are in Result.Lookup, so
	// that a padded copy of a shorter message finds it.
	KindLead Kind = 'p'
)

// String names the kind: "all", "media", "links", "body" or "lead".
func (k Kind) String() string {
	switch k {
	case KindAll:
		return "all"
	case KindMedia:
		return "media"
	case KindLinks:
		return "links"
	case KindBody:
		return "body"
	case KindLead:
		return "lead"
	}
	return "kind(" + string(rune(k)) + ")"
}

// Options configure a Signer. The zero value selects the documented
// defaults.
type Options struct {
	// MinPartBytes is the size a non-text part needs, decoded, to count
	// as media. Default 1024.
	MinPartBytes int
	// MinImageSide is the number of pixels a GIF, PNG or JPEG image needs
	// on each side to count as media. Default 32.
	MinImageSide int
	// MinTextUnits is the number of distinct text units the text needs to
	// be usable. Default 5.
	MinTextUnits int
	// MaxTextUnits is the largest number of distinct text units of a short
	// message. Default 64.
	MaxTextUnits int
	// MaxUnits bounds the distinct units read from the subject, from the
	// text and from the body without its first line: the first MaxUnits
	// in order of appearance are kept, so that the work and memory of a
	// long message signed by SignUnsigned stay bounded (and no more than
	// the first 8,192 units of a text are read, repeats included). Default 4096 (at
	// least MaxTextUnits + 1 and the largest lead level).
	MaxUnits int
	// LeadLevels are the numbers of distinct leading units of the body
	// lead keys hash, increasing; a body with fewer than the first has no
	// lead key. Default 16, 24, 32.
	LeadLevels []int
	// CommonDomains are registrable domains whose links do not make the
	// links usable on their own. Default DefaultCommonDomains.
	CommonDomains []string
}

// DefaultCommonDomains are hosts linked from all kinds of mail (standards
// bodies, search engines, social networks, large mail and software
// providers): a link to them says nothing of a campaign by itself.
var DefaultCommonDomains = []string{
	"amazon.com", "apple.com", "facebook.com", "github.com", "gmail.com",
	"google.com", "instagram.com", "linkedin.com", "live.com",
	"microsoft.com", "mozilla.org", "outlook.com", "pinterest.com",
	"tiktok.com", "twitter.com", "w3.org", "whatsapp.com", "wikipedia.org",
	"x.com", "yahoo.com", "youtube.com",
}

func (o Options) withDefaults() Options {
	if o.MinPartBytes <= 0 {
		o.MinPartBytes = 1024
	}
	if o.MinImageSide <= 0 {
		o.MinImageSide = 32
	}
	if o.MinTextUnits <= 0 {
		o.MinTextUnits = 5
	}
	if o.MaxTextUnits <= 0 {
		o.MaxTextUnits = 64
	}
	if len(o.LeadLevels) == 0 {
		o.LeadLevels = []int{16, 24, 32}
	}
	if o.MaxUnits <= 0 {
		o.MaxUnits = 4096
	}
	o.MaxUnits = max(o.MaxUnits, o.MaxTextUnits+1, o.LeadLevels[len(o.LeadLevels)-1])
	if o.CommonDomains == nil {
		o.CommonDomains = DefaultCommonDomains
	}
	return o
}

// Signer computes short-message keys. It is safe for concurrent use.
type Signer struct {
	opts   Options
	common map[string]bool
	pool   sync.Pool // *scratch
}

// New returns a Signer with the given options.
func New(opts Options) *Signer {
	o := opts.withDefaults()
	s := &Signer{opts: o, common: make(map[string]bool, len(o.CommonDomains))}
	for _, d := range o.CommonDomains {
		s.common[strings.ToLower(strings.TrimSpace(d))] = true
	}
	return s
}

// Result is the short-message signature of one message.
type Result struct {
	// Short is true when the message's text has at most
	// Options.MaxTextUnits units, or it was signed by SignUnsigned.
	Short bool
	// Keys are the message's keys, in the order all, media, links, body,
	// lead (only those made; see Kind): a reported message is indexed
	// under them.
	Keys [][]byte
	// Lookup are lead keys at levels below the message's largest (see
	// KindLead): a message is looked up under them too, never indexed.
	Lookup [][]byte
	// Media, Links and Units are the sizes of the components: usable
	// media parts, normalized links, and distinct text units (for a long
	// message signed by Sign, counted only until it is known to be long
	// and its lead is complete).
	Media, Links, Units int
	// SignedNote is set when the body key was made from a rest that is
	// mostly a signature block: fewer than Options.MinTextUnits distinct
	// units above its last "--" line. Every note of one person ends with
	// the same signature, so such a body key is weak evidence. It is not
	// part of the keys.
	SignedNote bool
}

// Sign computes the keys of doc. A nil doc has none.
func (s *Signer) Sign(doc *mime.Document) Result {
	return s.sign(doc, false)
}

// SignUnsigned computes the keys of doc, a message that has no other
// signature (no I-Match signature, no usable ANDD sketch: a long text in
// a script the tokenizer does not split, for instance): it is signed as a
// short message whatever its length. The media and links keys still need
// the text to be unusable, so a long text never makes a key of a logo.
func (s *Signer) SignUnsigned(doc *mime.Document) Result {
	return s.sign(doc, true)
}

func (s *Signer) sign(doc *mime.Document, unsigned bool) Result {
	var r Result
	if doc == nil {
		return r
	}
	o := &s.opts
	sc := s.getScratch()
	defer s.putScratch(sc)
	kb := &sc.kb
	// set holds the units of the subject (the first MaxUnits distinct
	// ones, its first nsubj units) and of the body: all of them for a
	// short message; for a long one (known once it has more than
	// MaxTextUnits), only until the lead is complete, so that a long text
	// costs little. Their flags say which are in the text, in the lead,
	// and in the body without its first line (rest, from restAt).
	const inText, inLead, inRest, inNote = 1, 2, 4, 8
	leadMax := o.LeadLevels[len(o.LeadLevels)-1]
	set := &sc.set
	set.reset()
	eachUnit(doc.Subject, func(u string, _ int, fl fold) bool {
		set.flags[set.add(u, fl)] = inText
		return set.len() < o.MaxUnits
	})
	nsubj := set.len()
	rest, hasRest := afterFirstLine(doc.Text)
	restAt := len(doc.Text) - len(rest)
	sigAt := restAt + mime.SignatureAt(rest) // the rest above it is the note (inNote)
	lead := sc.lead[:0]
	read := eachUnit(doc.Text, func(u string, at int, fl fold) bool {
		i := set.add(u, fl)
		f := set.flags[i]
		g := f | inText
		if len(lead) < leadMax && f&inLead == 0 {
			g |= inLead
			lead = append(lead, set.units[i])
		}
		if at >= restAt {
			g |= inRest
			if at < sigAt {
				g |= inNote
			}
		}
		set.flags[i] = g
		n := set.len()
		return n < o.MaxUnits && (unsigned || n <= o.MaxTextUnits || len(lead) < leadMax)
	})
	sc.lead = lead
	r.Units = set.len()
	r.Short = unsigned || set.len() <= o.MaxTextUnits
	keys := sc.keys[:0] // index keys, then lookup keys
	if r.Short {
		// Media and links matter to short messages only.
		media := s.media(doc.Parts)
		links, domains, linksUsable := s.links(sc, doc.URLs)
		r.Media, r.Links = len(media), len(links)
		text := append(sc.text[:0], set.units...)
		slices.Sort(text)
		sc.text = text
		mediaUsable := len(media) > 0
		textUsable := len(text) >= o.MinTextUnits
		if mediaUsable || linksUsable || textUsable {
			keys = kb.key(keys, KindAll, media, links, text)
		}
		if mediaUsable && !textUsable {
			keys = kb.key(keys, KindMedia, media, domains)
		}
		if linksUsable && len(doc.Parts) == 0 && !textUsable {
			keys = kb.key(keys, KindLinks, links)
		}
		if hasRest {
			var bu []string
			note := 0 // the rest's distinct units above its signature
			if read {
				// The whole text was read, so rest's units are those
				// met from restAt on (a unit never spans a line break).
				// text is sorted: its units in rest are too.
				bu = sc.rest[:0]
				for _, u := range text {
					i, _ := find(set, u)
					if f := set.flags[i]; f&inRest != 0 {
						bu = append(bu, u)
						if f&inNote != 0 {
							note++
						}
					}
				}
				sc.rest = bu
			} else {
				bu = sortedSet(firstUnits(rest, o.MaxUnits))
				note = len(sortedSet(firstUnits(doc.Text[restAt:sigAt], o.MaxUnits)))
			}
			if len(bu) >= o.MinTextUnits {
				keys = kb.key(keys, KindBody, media, domains, bu)
				r.SignedNote = note < o.MinTextUnits
			}
		}
	}
	nkeys := len(keys) // the index keys
	if doc.List == "" {
		subjSet := append(sc.subj[:0], set.units[:nsubj]...)
		slices.Sort(subjSet) // distinct already
		sc.subj = subjSet
		for i := len(o.LeadLevels) - 1; i >= 0; i-- {
			n := o.LeadLevels[i]
			if len(lead) < n {
				continue
			}
			keys = kb.key(keys, KindLead, subjSet, lead[:n])
			if nkeys == 0 || keys[nkeys-1][2] != byte(KindLead) {
				nkeys++ // the first lead key is indexed unless another is
			}
		}
	}
	sc.keys = keys
	r.Keys, r.Lookup = kb.result(keys, nkeys)
	return r
}

// IsKey reports whether k is a short-message key of this Version.
func IsKey(k []byte) bool {
	return len(k) == KeyLen && k[0] == Version && k[1] == Family
}

// KindOf returns the kind of a short-message key, and false when k is not
// one (see IsKey).
func KindOf(k []byte) (Kind, bool) {
	if !IsKey(k) {
		return 0, false
	}
	return Kind(k[2]), true
}

// media returns the sorted distinct digests of the parts that count as
// media (see Options.MinPartBytes and MinImageSide).
func (s *Signer) media(parts []mime.Part) []string {
	var out []string
	for i := range parts {
		p := &parts[i]
		if p.Size < s.opts.MinPartBytes {
			continue
		}
		if (p.Width > 0 || p.Height > 0) && (p.Width < s.opts.MinImageSide || p.Height < s.opts.MinImageSide) {
			continue
		}
		out = append(out, string(p.Digest[:]))
	}
	return sortedSet(out)
}

// keyBuilder makes the keys of one message: its scratch buffers are
// reused from key to key and from message to message.
type keyBuilder struct {
	buf  []byte
	sums []byte // the keys made, KeyLen bytes each
}

// key appends to keys the hash of the kind and the components (each a
// list of byte strings): SHA-256 over the version, family and kind bytes
// and the number of components, then for each component its number of
// elements and each element's length (uvarints) and bytes; the first
// hashLen bytes of the hash are kept. The key is in kb's memory until
// result copies it.
func (kb *keyBuilder) key(keys [][]byte, kind Kind, comps ...[]string) [][]byte {
	b := append(kb.buf[:0], Version, Family, byte(kind), byte(len(comps)))
	for _, c := range comps {
		b = binary.AppendUvarint(b, uint64(len(c)))
		for _, e := range c {
			b = binary.AppendUvarint(b, uint64(len(e)))
			b = append(b, e...)
		}
	}
	kb.buf = b
	sum := sha256.Sum256(b)
	if len(keys) == 0 {
		kb.sums = kb.sums[:0]
	}
	start := len(kb.sums)
	kb.sums = append(kb.sums, Version, Family, byte(kind))
	kb.sums = append(kb.sums, sum[:hashLen]...)
	return append(keys, kb.sums[start:len(kb.sums):len(kb.sums)])
}

// result returns copies of keys, made by key, in one allocation: the
// first n are the index keys, the others the lookup keys (nil when none).
func (kb *keyBuilder) result(keys [][]byte, n int) (index, lookup [][]byte) {
	if len(keys) == 0 {
		return nil, nil
	}
	var out [][]byte
	var mem []byte
	if len(keys) <= blockKeys {
		b := new(keyBlock)
		out, mem = b.keys[:len(keys):len(keys)], b.mem[:len(keys)*KeyLen]
	} else {
		out = make([][]byte, len(keys))
		mem = make([]byte, len(keys)*KeyLen)
	}
	for i, k := range keys {
		out[i] = mem[i*KeyLen : (i+1)*KeyLen : (i+1)*KeyLen]
		copy(out[i], k)
	}
	index, lookup = out[:n:n], out[n:]
	if len(lookup) == 0 {
		lookup = nil
	}
	if n == 0 {
		index = nil
	}
	return index, lookup
}

// blockKeys is the most keys a message makes with the default three
// lead levels: all, media, links, body and three lead keys.
const blockKeys = 7

// keyBlock holds the keys of a message and their bytes, allocated
// together.
type keyBlock struct {
	keys [blockKeys][]byte
	mem  [blockKeys * KeyLen]byte
}

// key is keyBuilder.key of one key with a fresh builder.
func key(kind Kind, comps ...[]string) []byte {
	var kb keyBuilder
	return kb.key(nil, kind, comps...)[0]
}

// sortedSet sorts ss and removes duplicates, in place.
func sortedSet(ss []string) []string {
	slices.Sort(ss)
	return slices.Compact(ss)
}

// firstUnits returns the first max distinct units of s, in order.
func firstUnits(s string, max int) []string {
	var seen map[string]bool
	var out []string
	eachUnit(s, func(u string, _ int, fl fold) bool {
		u = lower(u, fl)
		if len(out) < 8 { // a subject's few units: no map
			if slices.Contains(out, u) {
				return true
			}
		} else {
			if seen == nil {
				seen = make(map[string]bool, 2*len(out))
				for _, v := range out {
					seen[v] = true
				}
			}
			if seen[u] {
				return true
			}
			seen[u] = true
		}
		out = append(out, u)
		return len(out) < max
	})
	return out
}

// scratch holds the buffers of one signing, reused between messages.
type scratch struct {
	set              unitSet
	lead             []string
	text, rest, subj []string // sorted units of the components
	links, domains   []string
	keys             [][]byte
	kb               keyBuilder
}

// maxPooledUnits bounds the units a pooled scratch keeps room for: one
// long text signed by SignUnsigned would leave it large.
const maxPooledUnits = 1 << 14

func (s *Signer) getScratch() *scratch {
	if sc, ok := s.pool.Get().(*scratch); ok {
		return sc
	}
	return new(scratch)
}

// putScratch returns sc to the pool without the message's strings.
func (s *Signer) putScratch(sc *scratch) {
	if cap(sc.set.units) > maxPooledUnits || cap(sc.links) > maxPooledUnits {
		return
	}
	clear(sc.set.units)
	clear(sc.lead)
	clear(sc.text)
	clear(sc.rest)
	clear(sc.subj)
	clear(sc.links)
	clear(sc.domains)
	s.pool.Put(sc)
}

// afterFirstLine returns text after its first non-empty line, and false
// when text has fewer than two non-empty lines.
func afterFirstLine(text string) (string, bool) {
	rest := text
	for rest != "" {
		line, after, _ := strings.Cut(rest, "\n")
		rest = after
		if strings.TrimSpace(line) != "" {
			break
		}
	}
	if strings.TrimSpace(rest) == "" {
		return "", false
	}
	return rest, true
}
