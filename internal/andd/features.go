package andd

import (
	"hash/maphash"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nddmilter/nddmilter/internal/fmath"
	"github.com/nddmilter/nddmilter/internal/mime"
)

// The known term features (the paper's Table 1 adapted to email, plus a
// few more). Every value is scaled to be roughly in [0, 1] so that the
// learned λ are comparable.
const (
	fBias    = iota // 1 for every term
	fTF             // log(1+tf) / log(1+16), term frequency in the document
	fIDF            // log((N+1)/(df+1)) / log(N+1); 1 for unseen terms
	fIDF2           // idf², lets the weight peak at mid-range idf (I-Match's window)
	fUnseen         // 1 when the term is absent from the df table (hash-buster words, typos)
	fLoc            // first position / number of tokens (0 = first word)
	fLen            // log(1+number of tokens) / log(1+4096), document length
	fCap            // share of occurrences that began with a capital letter
	fAllCaps        // share of occurrences written in capitals
	fSubject        // 1 when the term occurs in the subject
	fInURL          // 1 when the term also occurs in a URL of the document (host or path)
	fHost           // 1 for the host pseudo-terms ("@example.com") of the document's links
	fTermLen        // min(runes, 20) / 20
	numFeatures
)

var featureNameList = [numFeatures]string{
	fBias:    "bias",
	fTF:      "tf",
	fIDF:     "idf",
	fIDF2:    "idf2",
	fUnseen:  "unseen",
	fLoc:     "loc",
	fLen:     "len",
	fCap:     "cap",
	fAllCaps: "allcaps",
	fSubject: "subject",
	fInURL:   "inurl",
	fHost:    "host",
	fTermLen: "termlen",
}

// FeatureNames returns the names of all known features, in canonical order.
func FeatureNames() []string {
	return append([]string(nil), featureNameList[:]...)
}

func featureIndex(name string) int {
	for i, n := range featureNameList {
		if n == name {
			return i
		}
	}
	return -1
}

// hostPrefix marks the pseudo-terms made from link hosts. Tokens never
// contain it.
const hostPrefix = "@"

// termStat accumulates the statistics of one term of one document.
type termStat struct {
	term    string
	tf      int32
	first   int32
	caps    int32
	allCaps int32
	subject bool
	host    bool
	// hasDF says df is the term's document frequency, given by the caller
	// (no look-up needed).
	hasDF bool
	df    int32
}

// extractor computes feature vectors; it is configured once per Signer.
type extractor struct {
	df    DocFreq
	ngram int
	hosts bool // add host pseudo-terms (only if the model uses the "host" feature)
	logN1 float64
	// idfTab[df] caches the normalized idf of small document frequencies.
	idfTab []float64
	// lam, if set, holds the weight of every feature: extract then passes
	// the linear combination z = Σ lam·φ to fn, and skips without a df
	// look-up every term whose z cannot be positive: the features that do
	// not depend on the df table sum to at most -idfMax.
	lam    *[numFeatures]float64
	idfMax float64
	// vocab, if set, indexes df's vocabulary with the sketch hash of each
	// term under seed: it replaces the DocFreq.DF calls of unigrams, and
	// features reports each term's hash in scratch.hash.
	vocab *vocab
	seed  uint64
	// zt holds the products λf·φf that depend only on a term's table
	// features, precomputed by setLambda (nil when lam is nil).
	zt *zTables
}

// zTables caches products of the linear combination z = Σ λf·φf whose
// factors take few values, so that features computes each with one load.
// Each entry is the very product (or, for df, the very sum of products)
// that the plain computation evaluates, and features adds them to z in
// the same order, so z is bit-identical to Σ λf·φf summed in feature
// order (TestWeighMatchesFeatures, the golden tests).
type zTables struct {
	tf      [64]float64 // λtf·tfTab[tf]
	termLen [21]float64 // λtermlen·termLenTab[r]
	// df[d] is the df-dependent part λidf·idf + λidf2·idf² + λunseen·unseen
	// for a unigram of document frequency d < len(df) (d = 0: unseen).
	df []float64
	// noDF is that part when there is no df table (idf 0.5, seen); host
	// when the term is a host pseudo-term (idf 1, seen).
	noDF, host float64
}

// dfPart is λidf·idf + λidf2·idf² + λunseen·unseen, evaluated exactly as
// features evaluates it.
func dfPart(lam *[numFeatures]float64, idf, unseen float64) float64 {
	idf2 := idf * idf
	return float64(float64(lam[fIDF]*idf)+float64(lam[fIDF2]*idf2)) + float64(lam[fUnseen]*unseen)
}

// setLambda sets the feature weights and precomputes the z tables.
func (e *extractor) setLambda(lam *[numFeatures]float64, idfMax float64) {
	e.lam, e.idfMax = lam, idfMax
	if lam == nil {
		e.zt = nil
		return
	}
	zt := &zTables{}
	for i := range zt.tf {
		zt.tf[i] = float64(lam[fTF] * tfTab[i])
	}
	for r := range zt.termLen {
		zt.termLen[r] = float64(lam[fTermLen] * termLenTab[r])
	}
	zt.df = make([]float64, max(len(e.idfTab), 1))
	for d := range zt.df {
		idf, unseen := e.idfDF(d)
		zt.df[d] = dfPart(lam, idf, b2f(unseen))
	}
	zt.noDF = dfPart(lam, 0.5, 0)
	zt.host = dfPart(lam, 1, 0)
	e.zt = zt
}

// tfTab[tf] = log(1+tf)/log(17) for small tf.
var tfTab = func() (t [64]float64) {
	for i := range t {
		t[i] = fmath.Log1p(float64(i)) / fmath.Log1p(16)
	}
	return t
}()

// termLenTab[r] = min(r, 20)/20, the termlen feature of a term of r runes.
var termLenTab = func() (t [21]float64) {
	for r := range t {
		t[r] = min(float64(r), 20) / 20
	}
	return t
}()

// termRunes is min(utf8.RuneCountInString(t), 20), without decoding ASCII
// terms.
func termRunes(t string) int {
	if len(t) >= 80 { // a rune has at most 4 bytes
		return 20
	}
	if len(t) <= 20 {
		var or byte // without a branch per byte
		for i := 0; i < len(t); i++ {
			or |= t[i]
		}
		if or < utf8.RuneSelf {
			return len(t)
		}
	}
	return min(utf8.RuneCountInString(t), 20)
}

func newExtractor(df DocFreq, ngram int, hosts bool) *extractor {
	e := &extractor{df: df, ngram: ngram, hosts: hosts}
	if df != nil && df.N() > 0 {
		n := df.N()
		e.logN1 = fmath.Log(float64(n) + 1)
		e.idfTab = make([]float64, min(n, 1<<16)+1)
		for d := range e.idfTab {
			e.idfTab[d] = e.idfOf(d)
		}
	}
	return e
}

func (e *extractor) idfOf(df int) float64 {
	v := fmath.Log((float64(e.df.N())+1)/(float64(df)+1)) / e.logN1
	return min(max(v, 0), 1)
}

// idf returns the normalized idf of term and whether the term is unseen.
func (e *extractor) idf(term string) (float64, bool) {
	if e.df == nil || e.logN1 == 0 {
		return 0.5, false
	}
	if e.ngram > 1 && strings.IndexByte(term, ' ') >= 0 {
		// k-gram: average idf of its words (the paper's DF-Avg).
		sum, n, unseen := 0.0, 0, false
		for w := range strings.SplitSeq(term, " ") {
			v, u := e.idf1(w)
			sum += v
			n++
			unseen = unseen || u
		}
		return sum / float64(n), unseen
	}
	return e.idf1(term)
}

func (e *extractor) idf1(term string) (float64, bool) {
	if e.vocab != nil {
		df, _ := e.vocab.lookup(term)
		return e.idfDF(int(df))
	}
	return e.idfDF(e.df.DF(term))
}

// idfDF is idf for a unigram of document frequency df.
func (e *extractor) idfDF(df int) (float64, bool) {
	if e.df == nil || e.logN1 == 0 {
		return 0.5, false
	}
	if df <= 0 {
		return 1, true
	}
	if df < len(e.idfTab) {
		return e.idfTab[df], false
	}
	return e.idfOf(df), false
}

// urlWords returns the lower-cased alphanumeric words of the document's
// URLs and hosts, and the host pseudo-terms. The set and the slice are
// sc's, valid until sc.clearURLWords; the terms' strings are not (a
// Vector keeps them).
func (sc *scratch) urlWords(doc *mime.Document) (words *wordSet, hosts []string) {
	if doc == nil || (len(doc.URLs) == 0 && len(doc.Hosts) == 0) {
		return nil, nil
	}
	words = &sc.inURL
	for _, u := range doc.URLs {
		if len(u) > 2048 {
			u = u[:2048]
		}
		words.addWords(u)
	}
	// The host terms are written one after the other into hostBuf, each
	// ending at hostEnd[i], and made strings with one allocation.
	buf := sc.hostBuf[:0]
	for _, h := range doc.Hosts {
		words.addWords(h)
		if rh := registeredHost(strings.ToLower(h)); rh != "" && !slices.Contains(sc.hostSeen, rh) {
			sc.hostSeen = append(sc.hostSeen, rh)
			buf = append(buf, hostPrefix...)
			buf = append(buf, rh...)
			sc.hostEnd = append(sc.hostEnd, len(buf))
		}
	}
	sc.hostBuf = buf
	if len(sc.hostEnd) == 0 {
		return words, nil
	}
	all := string(buf)
	hosts = sc.hosts[:0]
	start := 0
	for _, end := range sc.hostEnd {
		hosts = append(hosts, all[start:end])
		start = end
	}
	sc.hosts = hosts
	return words, hosts
}

// clearURLWords empties the sets of urlWords, not to keep the message's
// strings.
func (sc *scratch) clearURLWords() {
	sc.inURL.reset()
	clear(sc.hostSeen)
	sc.hostSeen = sc.hostSeen[:0]
	clear(sc.hosts)
	sc.hosts, sc.hostEnd = sc.hosts[:0], sc.hostEnd[:0]
	if cap(sc.hostBuf) > maxPooledWordBytes {
		sc.hostBuf = nil
	}
}

// eachAlnumWord calls fn with each maximal run of letters and digits of
// s: strings.FieldsFunc's fields with the separators !unicode.IsLetter
// && !unicode.IsDigit, ASCII read without decoding.
func eachAlnumWord(s string, fn func(w string)) {
	start := -1 // start of the current word, -1 between words
	for i := 0; i < len(s); {
		c := s[i]
		size := 1
		var word bool
		if c < utf8.RuneSelf {
			word = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			word = unicode.IsLetter(r) || unicode.IsDigit(r)
		}
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			fn(s[start:i])
			start = -1
		}
		i += size
	}
	if start >= 0 {
		fn(s[start:])
	}
}

// registeredHost approximates the registered domain of host: its last two
// labels, or three when the second-level label is short (co.uk, com.au).
func registeredHost(host string) string {
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > 253 {
		return ""
	}
	// The last three labels: host[d2+1:] is the last, host[d3+1:d2] the
	// second-level one (d = -1 when there are fewer dots).
	d2 := strings.LastIndexByte(host, '.')
	if d2 < 0 {
		return host // one label
	}
	d3 := strings.LastIndexByte(host[:d2], '.')
	if d3 < 0 {
		return host // two labels
	}
	if d2-d3-1 <= 3 && len(host)-d2-1 == 2 {
		// Three labels kept: the whole host when it has only three.
		return host[strings.LastIndexByte(host[:d3], '.')+1:]
	}
	return host[d3+1:]
}

// extract calls fn once per distinct term of the document, in order of
// first occurrence, with the term's full feature vector (len numFeatures).
// phi is reused between calls. When the extractor has feature weights
// (setLambda), fn gets only z and a nil phi, and terms whose z cannot be
// positive are skipped.
// scratch holds the buffers of one extraction, reused through a pool.
type scratch struct {
	slots []int32
	stats []termStat
	terms []string
	ws    []float64
	// sketch buffers: quantized weights, hashes, hash words and bit
	// totals of the weighted terms.
	qs, hq, xs []uint64
	totals     []uint32
	// hash is termHash(term, seed) of the term passed to the callback of
	// features when hashOK (set only with a vocab); hashes collects them.
	hash   uint64
	hashOK bool
	hashes []uint64
	// seed is the hash seed of extract's term index.
	seed maphash.Seed
	// inURL and hostSeen are the sets of urlWords; hosts, hostBuf and
	// hostEnd its host terms.
	inURL    wordSet
	hostSeen []string
	hosts    []string
	hostBuf  []byte
	hostEnd  []int
}

func (e *extractor) extract(doc *mime.Document, toks []mime.Token, sc *scratch, fn func(term string, phi *[numFeatures]float64, z float64)) {
	if sc == nil {
		sc = &scratch{}
	}
	n := len(toks)
	// Open-addressing index of the terms seen so far: slots hold
	// 1 + the index into stats, probed linearly from a seeded hash (a
	// crafted text cannot make its terms collide).
	if sc.seed == (maphash.Seed{}) {
		sc.seed = maphash.MakeSeed()
	}
	size := 16
	for size < 2*n {
		size *= 2
	}
	if cap(sc.slots) < size {
		sc.slots = make([]int32, size)
	}
	slots := sc.slots[:size]
	clear(slots)
	mask := uint64(size - 1)
	stats := sc.stats[:0]
	defer func() { clear(sc.stats); sc.stats = sc.stats[:0] }()
	var sb strings.Builder
	k := e.ngram
	for i := 0; i+k <= n; i++ {
		t := toks[i]
		term := t.Term
		if k > 1 {
			sb.Reset()
			for j := range k {
				if j > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(toks[i+j].Term)
			}
			term = sb.String()
		}
		h := maphash.String(sc.seed, term)
		slot := h & mask
		var idx int
		for {
			v := slots[slot]
			if v == 0 {
				idx = len(stats)
				slots[slot] = int32(idx + 1)
				stats = append(stats, termStat{term: term, first: int32(i)})
				break
			}
			if stats[v-1].term == term {
				idx = int(v - 1)
				break
			}
			slot = (slot + 1) & mask
		}
		s := &stats[idx]
		s.tf++
		if t.Capitalized {
			s.caps++
		}
		if t.AllCaps {
			s.allCaps++
		}
		if t.InSubject {
			s.subject = true
		}
	}
	sc.stats = stats
	e.features(doc, sc, n, fn)
}

// extractTerms is extract over the analysis of a document (unigrams
// only): the statistics are those of mime.Analyze, so no token is indexed
// again. fn is called in sorted term order, then for the host terms.
//
// When df is not nil, df[i] is the document frequency of t.Sorted[i].
func (e *extractor) extractTerms(doc *mime.Document, t *mime.Terms, df []int32, sc *scratch, fn func(term string, phi *[numFeatures]float64, z float64)) {
	stats := sc.stats[:0]
	defer func() { clear(sc.stats); sc.stats = sc.stats[:0] }()
	stats = slices.Grow(stats, len(t.Sorted))
	for i, term := range t.Sorted {
		st := &t.Stats[i]
		if st.TF <= 0 {
			continue // not from Analyze: no occurrence
		}
		ts := termStat{term: term, tf: st.TF, first: st.First,
			caps: st.Capitalized, allCaps: st.AllCaps, subject: st.InSubject}
		if df != nil {
			ts.hasDF, ts.df = true, df[i]
		}
		stats = append(stats, ts)
	}
	sc.stats = stats
	e.features(doc, sc, t.Tokens, fn)
}

// features computes the feature vector of every term of sc.stats, of a
// document of n tokens, plus the host terms of doc, and passes it to fn.
// It may append to sc.stats.
func (e *extractor) features(doc *mime.Document, sc *scratch, n int, fn func(term string, phi *[numFeatures]float64, z float64)) {
	stats := sc.stats
	defer func() { sc.stats = stats }()
	var inURL *wordSet
	var hostTerms []string
	if doc != nil {
		inURL, hostTerms = sc.urlWords(doc)
		defer sc.clearURLWords()
	}
	if e.hosts {
		// Host pseudo-terms start with hostPrefix, which no token has.
		for _, h := range hostTerms {
			stats = append(stats, termStat{term: h, tf: 1, first: int32(n), host: true})
		}
	}
	lenF := fmath.Log1p(float64(n)) / fmath.Log1p(4096)
	den := float64(max(n, 1))
	if e.zt != nil {
		e.featuresZ(sc, stats, inURL, lenF, den, fn)
		return
	}
	var phi [numFeatures]float64
	for i := range stats {
		s := &stats[i]
		e.termFeatures(s, &phi, inURL, lenF, den)
		sc.hashOK = false
		if s.host {
			phi[fIDF], phi[fUnseen] = 1, 0
		} else if s.hasDF {
			idf, unseen := e.idfDF(int(s.df))
			phi[fIDF] = idf
			phi[fUnseen] = b2f(unseen)
		} else if e.vocab != nil && e.ngram == 1 {
			df, h := e.vocab.lookup(s.term)
			if df > 0 {
				sc.hash, sc.hashOK = h, true
			}
			idf, unseen := e.idfDF(int(df))
			phi[fIDF] = idf
			phi[fUnseen] = b2f(unseen)
		} else {
			idf, unseen := e.idf(s.term)
			phi[fIDF] = idf
			phi[fUnseen] = b2f(unseen)
		}
		phi[fIDF2] = phi[fIDF] * phi[fIDF]
		fn(s.term, &phi, 0)
	}
}

// termFeatures fills phi with the features of s that do not depend on the
// df table, and zeroes the others.
func (e *extractor) termFeatures(s *termStat, phi *[numFeatures]float64, inURL *wordSet, lenF, den float64) {
	phi[fBias] = 1
	if int(s.tf) < len(tfTab) {
		phi[fTF] = tfTab[s.tf]
	} else {
		phi[fTF] = fmath.Log1p(float64(s.tf)) / fmath.Log1p(16)
	}
	phi[fLoc] = min(float64(s.first)/den, 1)
	phi[fLen] = lenF
	phi[fCap], phi[fAllCaps] = 0, 0
	if s.caps != 0 { // most terms: no division
		phi[fCap] = float64(s.caps) / float64(s.tf)
	}
	if s.allCaps != 0 {
		phi[fAllCaps] = float64(s.allCaps) / float64(s.tf)
	}
	phi[fSubject] = b2f(s.subject)
	phi[fInURL] = 0
	if !s.host && inURL.hasFirstWord(s.term) {
		phi[fInURL] = 1
	}
	phi[fHost] = b2f(s.host)
	phi[fTermLen] = termLenTab[termRunes(s.term)]
	phi[fIDF], phi[fIDF2], phi[fUnseen] = 0, 0, 0
}

// featuresZ is the loop of features when the feature weights are set
// (Signer): it computes only z = Σ λf·φf, in feature order but for the
// df-dependent features added last as one group, as the plain
// computation (see zReference in the tests) does, from the tables of
// e.zt, leaving out the products whose feature is 0 (adding ±0 changes no
// sum but the sign of a zero z, and only z > 0 matters). It skips every
// term whose z cannot be positive before looking up its df, and passes a
// nil phi to fn.
func (e *extractor) featuresZ(sc *scratch, stats []termStat, inURL *wordSet, lenF, den float64, fn func(term string, phi *[numFeatures]float64, z float64)) {
	lam, zt := e.lam, e.zt
	lenZ := float64(lam[fLen] * lenF) // explicit conversions keep products rounded: no FMA fusion, same weights on every architecture
	idfMax := e.idfMax
	plainDF := e.df == nil || e.logN1 == 0
	useVocab := e.vocab != nil && e.ngram == 1
	for i := range stats {
		s := &stats[i]
		sc.hashOK = false
		// Σ λf·φf in feature order, leaving out the df-dependent
		// features.
		z := lam[fBias]
		if int(s.tf) < len(zt.tf) {
			z += zt.tf[s.tf]
		} else {
			z += float64(lam[fTF] * (fmath.Log1p(float64(s.tf)) / fmath.Log1p(16)))
		}
		z += float64(lam[fLoc] * min(float64(s.first)/den, 1))
		z += lenZ
		if s.caps != 0 {
			z += float64(lam[fCap] * (float64(s.caps) / float64(s.tf)))
		}
		if s.allCaps != 0 {
			z += float64(lam[fAllCaps] * (float64(s.allCaps) / float64(s.tf)))
		}
		if s.subject {
			z += lam[fSubject]
		}
		if !s.host && inURL.hasFirstWord(s.term) {
			z += lam[fInURL]
		}
		if s.host {
			z += lam[fHost]
		}
		z += zt.termLen[termRunes(s.term)]
		if z+idfMax <= 0 {
			continue
		}
		var dz float64
		switch {
		case s.host:
			dz = zt.host
		case plainDF:
			dz = zt.noDF
		default:
			var df int32
			if s.hasDF {
				df = s.df
			} else if useVocab {
				var h uint64
				df, h = e.vocab.lookup(s.term)
				if df > 0 {
					sc.hash, sc.hashOK = h, true
				}
			} else {
				idf, unseen := e.idf(s.term)
				dz = dfPart(lam, idf, b2f(unseen))
				break
			}
			if d := int(max(df, 0)); d < len(zt.df) {
				dz = zt.df[d]
			} else {
				idf, _ := e.idfDF(d)
				dz = dfPart(lam, idf, 0)
			}
		}
		fn(s.term, nil, z+dz)
	}
}

func firstWord(term string) string {
	if i := strings.IndexByte(term, ' '); i >= 0 {
		return term[:i]
	}
	return term
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
