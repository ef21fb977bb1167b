package imatchbag

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// FormatVersion is the version of the lexicon file format.
const FormatVersion = 1

// lexiconMagic starts every lexicon file, followed by a space and the format
// version.
const lexiconMagic = "nddmilter-lexicon"

// Term classes of a lexicon file.
const (
	classPrimary   = 'L'
	classSecondary = 'B'
	classDFOnly    = '-'
)

// Lexicon holds the document-frequency table of a corpus and the primary
// and secondary lexicons derived from it. A Lexicon is immutable and safe for
// concurrent use.
type Lexicon struct {
	n            int
	seed         uint64
	idfMin       float64
	idfMax       float64
	secondaryMax int
	minDF        int
	description  string

	df        map[string]int32
	primary   []string // L, sorted by term
	secondary []string // B, by increasing idf (decreasing df, then term)
	// ranked holds every recorded term by decreasing df, then term: the
	// order of the file.
	ranked []rankedTerm
	id     uint32
}

type rankedTerm struct {
	term  string
	df    int32
	class byte
}

// ID identifies the lexicon (a hash of its content); it is part of every
// signature so that signatures of different lexicons never collide. It is
// the first four bytes (big-endian) of the SHA-256 of the lexicon file up to
// its final "id" line.
func (l *Lexicon) ID() uint32 { return l.id }

// N is the number of documents of the corpus the lexicon was built from.
func (l *Lexicon) N() int { return l.n }

// DF is the document frequency of term in that corpus (0 if unseen, or if
// rarer than the lexicon's minimum recorded document frequency, 2 by
// default).
func (l *Lexicon) DF(term string) int { return int(l.df[term]) }

// RangeDF calls fn with every term of positive document frequency and that
// frequency (DF is 0 for every other term), in no particular order, until
// fn returns false. andd.NewSigner uses it to index the vocabulary once.
func (l *Lexicon) RangeDF(fn func(term string, df int) bool) {
	for t, d := range l.df {
		if d > 0 && !fn(t, int(d)) {
			return
		}
	}
}

// Seed is the bagging seed from which the K bagged lexicons are derived.
func (l *Lexicon) Seed() uint64 { return l.seed }

// Window returns the normalized-idf window [idfMin, idfMax] of the primary
// lexicon.
func (l *Lexicon) Window() (idfMin, idfMax float64) { return l.idfMin, l.idfMax }

// Primary returns the primary lexicon L, sorted. The caller must not modify it.
func (l *Lexicon) Primary() []string { return l.primary }

// Secondary returns the secondary lexicon B ranked by increasing idf. The
// caller must not modify it.
func (l *Lexicon) Secondary() []string { return l.secondary }

// Description is the free-text provenance note recorded at build time.
func (l *Lexicon) Description() string { return l.description }

// NIDF returns the normalized idf of a document frequency in this lexicon's
// corpus: log(N/df) / log(N), so 0 for a term in every document and 1 for a
// term in a single one.
func (l *Lexicon) NIDF(df int) float64 { return nidf(l.n, df) }

func nidf(n, df int) float64 {
	if n <= 1 || df <= 0 {
		return 1
	}
	return math.Log(float64(n)/float64(df)) / math.Log(float64(n))
}

// Stats summarizes a lexicon (nddlab lexicon show).
type Stats struct {
	Version      int
	ID           uint32
	N            int
	Seed         uint64
	IdfMin       float64
	IdfMax       float64
	Primary      int // |L|
	Secondary    int // |B|
	SecondaryMax int
	Terms        int // terms with a recorded document frequency
	MinDF        int
	// PrimaryDF is the document-frequency range [lo, hi] of L.
	PrimaryDF   [2]int
	Description string
}

// Stats returns the lexicon's statistics.
func (l *Lexicon) Stats() Stats {
	st := Stats{
		Version: FormatVersion, ID: l.id, N: l.n, Seed: l.seed,
		IdfMin: l.idfMin, IdfMax: l.idfMax,
		Primary: len(l.primary), Secondary: len(l.secondary), SecondaryMax: l.secondaryMax,
		Terms: len(l.ranked), MinDF: l.minDF, Description: l.description,
	}
	for _, t := range l.ranked {
		if t.class != classPrimary {
			continue
		}
		d := int(t.df)
		if st.PrimaryDF[0] == 0 || d < st.PrimaryDF[0] {
			st.PrimaryDF[0] = d
		}
		if d > st.PrimaryDF[1] {
			st.PrimaryDF[1] = d
		}
	}
	return st
}

// BuildOptions configure Builder.Build. Zero values select the defaults.
type BuildOptions struct {
	// IdfMin and IdfMax bound the normalized idf of the primary lexicon.
	// Defaults DefaultIdfMin and DefaultIdfMax (chosen by measurement on the
	// Brown corpus, see docs/design/imatch.md). Both zero selects both defaults.
	IdfMin, IdfMax float64
	// SecondaryMax caps |B|. B takes whole document-frequency tiers (all
	// terms of equal df, most frequent tiers first) while they fit. Default
	// 20000; negative means no secondary lexicon.
	SecondaryMax int
	// MinDF is the smallest document frequency recorded. Default 2.
	MinDF int
	// MaxTerms caps the number of recorded terms (the most frequent are
	// kept; L and B are always recorded). Default 0: no cap.
	MaxTerms int
	// Seed is the bagging seed. Default 0 is a valid seed.
	Seed uint64
	// Description is a one-line provenance note stored in the file.
	Description string
}

// Default lexicon parameters.
const (
	DefaultIdfMin       = 0.3
	DefaultIdfMax       = 0.4
	DefaultSecondaryMax = 20000
	DefaultMinDF        = 2
)

func (o BuildOptions) withDefaults() BuildOptions {
	if o.IdfMin == 0 && o.IdfMax == 0 {
		o.IdfMin, o.IdfMax = DefaultIdfMin, DefaultIdfMax
	}
	if o.SecondaryMax == 0 {
		o.SecondaryMax = DefaultSecondaryMax
	} else if o.SecondaryMax < 0 {
		o.SecondaryMax = 0
	}
	if o.MinDF <= 0 {
		o.MinDF = DefaultMinDF
	}
	return o
}

// Builder accumulates the document frequencies of a corpus. It is not safe
// for concurrent use.
type Builder struct {
	n  int
	df map[string]int32
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder { return &Builder{df: make(map[string]int32)} }

// Add counts one document given its unique terms (duplicates are counted
// once). Terms that cannot appear in a lexicon file (empty, or containing
// white space or control characters) are ignored.
func (b *Builder) Add(terms []string) {
	b.n++
	seen := !slices.IsSorted(terms)
	var set map[string]struct{}
	if seen {
		set = make(map[string]struct{}, len(terms))
	}
	for i, t := range terms {
		if seen {
			if _, dup := set[t]; dup {
				continue
			}
			set[t] = struct{}{}
		} else if i > 0 && terms[i-1] == t {
			continue
		}
		if !validTerm(t) {
			continue
		}
		if _, ok := b.df[t]; !ok {
			t = strings.Clone(t) // do not pin the caller's buffer
		}
		b.df[t]++
	}
}

// N is the number of documents added.
func (b *Builder) N() int { return b.n }

// Build derives the lexicon from the document frequencies counted so far.
func (b *Builder) Build(opts BuildOptions) (*Lexicon, error) {
	o := opts.withDefaults()
	if b.n < 2 {
		return nil, fmt.Errorf("build lexicon: need at least 2 documents, have %d", b.n)
	}
	if o.IdfMin < 0 || o.IdfMax > 1 || o.IdfMin > o.IdfMax || math.IsNaN(o.IdfMin) || math.IsNaN(o.IdfMax) {
		return nil, fmt.Errorf("build lexicon: invalid idf window [%g, %g] (want 0 <= idf-min <= idf-max <= 1)", o.IdfMin, o.IdfMax)
	}
	if strings.ContainsAny(o.Description, "\r\n") {
		return nil, errors.New("build lexicon: description must be one line")
	}
	ranked := make([]rankedTerm, 0, len(b.df))
	for t, d := range b.df {
		if int(d) >= o.MinDF {
			ranked = append(ranked, rankedTerm{term: t, df: d, class: classDFOnly})
		}
	}
	sortRanked(ranked)
	// B takes whole document-frequency tiers, most frequent first, while
	// they fit under the cap: cutting inside a tier would favour terms by
	// their spelling.
	nB := 0
	full := false
	for i := 0; i < len(ranked); {
		j := i
		for j < len(ranked) && ranked[j].df == ranked[i].df {
			j++
		}
		v := nidf(b.n, int(ranked[i].df))
		switch {
		case v >= o.IdfMin && v <= o.IdfMax:
			for k := i; k < j; k++ {
				ranked[k].class = classPrimary
			}
		case v > o.IdfMax && !full:
			if nB+(j-i) > o.SecondaryMax {
				full = true
				break
			}
			for k := i; k < j; k++ {
				ranked[k].class = classSecondary
			}
			nB += j - i
		}
		i = j
	}
	if o.MaxTerms > 0 && len(ranked) > o.MaxTerms {
		kept := ranked[:0]
		for i, t := range ranked {
			if i < o.MaxTerms || t.class != classDFOnly {
				kept = append(kept, t)
			}
		}
		ranked = kept
	}
	l := &Lexicon{
		n: b.n, seed: o.Seed, idfMin: o.IdfMin, idfMax: o.IdfMax,
		secondaryMax: o.SecondaryMax, minDF: o.MinDF, description: o.Description,
		ranked: ranked,
	}
	// Serialize once to compute the ID exactly as a reader will.
	var buf bytes.Buffer
	if _, err := l.WriteTo(&buf); err != nil {
		return nil, err
	}
	return ReadLexicon(&buf)
}

func sortRanked(r []rankedTerm) {
	slices.SortFunc(r, func(a, b rankedTerm) int {
		if a.df != b.df {
			if a.df > b.df {
				return -1
			}
			return 1
		}
		return strings.Compare(a.term, b.term)
	})
}

// validTerm reports whether t can be stored in a lexicon file and hashed
// unambiguously: non-empty valid UTF-8 without spaces or control characters.
func validTerm(t string) bool {
	if t == "" || !utf8.ValidString(t) {
		return false
	}
	for _, r := range t {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// WriteTo writes the lexicon in its text file format (version 1):
//
//	nddmilter-lexicon 1
//	description <free text>
//	documents <N>
//	seed <uint64>
//	idf-min <float>
//	idf-max <float>
//	secondary-max <int>
//	min-df <int>
//	terms <count>
//	<df> <class> <term>     (count lines; class L, B or -; by df desc, term)
//	id <8 hex digits>       (first 4 bytes of SHA-256 of everything above)
//
// The output is a pure function of the lexicon's content.
func (l *Lexicon) WriteTo(w io.Writer) (int64, error) {
	var buf bytes.Buffer
	buf.Grow(64 + 20*len(l.ranked))
	fmt.Fprintf(&buf, "%s %d\n", lexiconMagic, FormatVersion)
	fmt.Fprintf(&buf, "description %s\n", l.description)
	fmt.Fprintf(&buf, "documents %d\n", l.n)
	fmt.Fprintf(&buf, "seed %d\n", l.seed)
	fmt.Fprintf(&buf, "idf-min %s\n", formatFloat(l.idfMin))
	fmt.Fprintf(&buf, "idf-max %s\n", formatFloat(l.idfMax))
	fmt.Fprintf(&buf, "secondary-max %d\n", l.secondaryMax)
	fmt.Fprintf(&buf, "min-df %d\n", l.minDF)
	fmt.Fprintf(&buf, "terms %d\n", len(l.ranked))
	for _, t := range l.ranked {
		buf.WriteString(strconv.Itoa(int(t.df)))
		buf.WriteByte(' ')
		buf.WriteByte(t.class)
		buf.WriteByte(' ')
		buf.WriteString(t.term)
		buf.WriteByte('\n')
	}
	sum := sha256.Sum256(buf.Bytes())
	fmt.Fprintf(&buf, "id %08x\n", binary.BigEndian.Uint32(sum[:4]))
	n, err := w.Write(buf.Bytes())
	if err != nil {
		return int64(n), fmt.Errorf("write lexicon: %w", err)
	}
	return int64(n), nil
}

// maxLexiconBytes bounds what ReadLexicon accepts.
const maxLexiconBytes = 256 << 20

// ReadLexicon reads a lexicon file (see WriteTo for the format). It checks
// the id line against the content, so a truncated or edited file is
// rejected.
func ReadLexicon(r io.Reader) (*Lexicon, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxLexiconBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read lexicon: %w", err)
	}
	if len(data) > maxLexiconBytes {
		return nil, fmt.Errorf("read lexicon: larger than %d bytes", maxLexiconBytes)
	}
	l, err := parseLexicon(data)
	if err != nil {
		return nil, fmt.Errorf("read lexicon: %w", err)
	}
	return l, nil
}

func parseLexicon(data []byte) (*Lexicon, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	line := 0
	offset := 0 // bytes consumed before the current line
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		s := sc.Text()
		offset += len(s) + 1
		return s, true
	}
	field := func(key string) (string, error) {
		s, ok := next()
		if !ok {
			return "", fmt.Errorf("line %d: missing %q (truncated file?)", line+1, key)
		}
		v, found := strings.CutPrefix(s, key+" ")
		if !found && s != key {
			return "", fmt.Errorf("line %d: want %q, got %q", line, key, truncate(s))
		}
		return v, nil
	}
	intField := func(key string, min int64) (int64, error) {
		v, err := field(key)
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min {
			return 0, fmt.Errorf("line %d: bad %s %q", line, key, truncate(v))
		}
		return n, nil
	}
	floatField := func(key string) (float64, error) {
		v, err := field(key)
		if err != nil {
			return 0, err
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			return 0, fmt.Errorf("line %d: bad %s %q", line, key, truncate(v))
		}
		return f, nil
	}

	magic, err := field(lexiconMagic)
	if err != nil {
		return nil, fmt.Errorf("not a lexicon file: %w", err)
	}
	if last := bytes.LastIndexByte(bytes.TrimSuffix(data, []byte("\n")), '\n'); !bytes.HasSuffix(data, []byte("\n")) ||
		last < 0 || !bytes.HasPrefix(data[last+1:], []byte("id ")) {
		return nil, errors.New("no id line at the end (truncated file, or content after the id line?)")
	}
	if magic != strconv.Itoa(FormatVersion) {
		return nil, fmt.Errorf("unsupported lexicon format version %q (this build reads %d)", truncate(magic), FormatVersion)
	}
	l := &Lexicon{}
	if l.description, err = field("description"); err != nil {
		return nil, err
	}
	n, err := intField("documents", 2)
	if err != nil {
		return nil, err
	}
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("line %d: documents %d out of range", line, n)
	}
	l.n = int(n)
	sv, err := field("seed")
	if err != nil {
		return nil, err
	}
	if l.seed, err = strconv.ParseUint(sv, 10, 64); err != nil {
		return nil, fmt.Errorf("line %d: bad seed %q", line, truncate(sv))
	}
	if l.idfMin, err = floatField("idf-min"); err != nil {
		return nil, err
	}
	if l.idfMax, err = floatField("idf-max"); err != nil {
		return nil, err
	}
	if l.idfMin > l.idfMax {
		return nil, fmt.Errorf("idf-min %g > idf-max %g", l.idfMin, l.idfMax)
	}
	sm, err := intField("secondary-max", 0)
	if err != nil {
		return nil, err
	}
	l.secondaryMax = int(min(sm, math.MaxInt32))
	md, err := intField("min-df", 1)
	if err != nil {
		return nil, err
	}
	l.minDF = int(min(md, math.MaxInt32))
	count, err := intField("terms", 0)
	if err != nil {
		return nil, err
	}
	if count > int64(len(data)/6) { // each term line takes at least 6 bytes
		return nil, fmt.Errorf("line %d: term count %d larger than the file allows", line, count)
	}
	l.ranked = make([]rankedTerm, 0, count)
	l.df = make(map[string]int32, count)
	var prev rankedTerm
	for i := int64(0); i < count; i++ {
		s, ok := next()
		if !ok {
			return nil, fmt.Errorf("line %d: file ends after %d of %d terms (truncated file?)", line+1, i, count)
		}
		dfs, rest, ok1 := strings.Cut(s, " ")
		cls, term, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || len(cls) != 1 {
			return nil, fmt.Errorf("line %d: want \"<df> <class> <term>\", got %q", line, truncate(s))
		}
		d, err := strconv.ParseInt(dfs, 10, 32)
		if err != nil || d < 1 || d > n {
			return nil, fmt.Errorf("line %d: bad document frequency %q", line, truncate(dfs))
		}
		if !validTerm(term) {
			return nil, fmt.Errorf("line %d: invalid term %q", line, truncate(term))
		}
		t := rankedTerm{term: term, df: int32(d), class: cls[0]}
		if i > 0 && (prev.df < t.df || (prev.df == t.df && prev.term >= t.term)) {
			return nil, fmt.Errorf("line %d: terms out of order (want decreasing df, then increasing term)", line)
		}
		prev = t
		switch t.class {
		case classPrimary:
			l.primary = append(l.primary, term)
		case classSecondary:
			l.secondary = append(l.secondary, term)
		case classDFOnly:
		default:
			return nil, fmt.Errorf("line %d: unknown term class %q (want L, B or -)", line, cls)
		}
		l.ranked = append(l.ranked, t)
		l.df[term] = t.df
	}
	body := offset
	idv, err := field("id")
	if err != nil {
		return nil, err
	}
	id, err := strconv.ParseUint(idv, 16, 32)
	if err != nil || len(idv) != 8 {
		return nil, fmt.Errorf("line %d: bad id %q", line, truncate(idv))
	}
	if body > len(data) {
		return nil, errors.New("internal error: offset beyond data")
	}
	sum := sha256.Sum256(data[:body])
	if want := binary.BigEndian.Uint32(sum[:4]); uint32(id) != want {
		return nil, fmt.Errorf("id %s does not match the content (%08x): file edited or corrupted", idv, want)
	}
	l.id = uint32(id)
	if s, ok := next(); ok {
		return nil, fmt.Errorf("line %d: unexpected content after the id line: %q", line, truncate(s))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	if len(l.secondary) > l.secondaryMax {
		return nil, fmt.Errorf("secondary lexicon has %d terms, more than secondary-max %d", len(l.secondary), l.secondaryMax)
	}
	slices.Sort(l.primary)
	return l, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
