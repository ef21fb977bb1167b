package pairs

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/mailbox"
	"github.com/nddmilter/nddmilter/internal/mime"
)

// ReadAll returns every message found under paths (files, directories,
// mbox, Maildir), in mailbox.Walk's deterministic order, with cluster.
func ReadAll(ctx context.Context, paths []string, cluster int) ([]Item, error) {
	var out []Item
	err := mailbox.Walk(ctx, paths, mailbox.Options{}, func(m mailbox.Message) error {
		out = append(out, Item{Name: m.Path, Raw: m.Raw, Cluster: cluster})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", strings.Join(paths, ", "), err)
	}
	return out, nil
}

// LoadClusters reads labeled campaigns from dir: every sub-directory is one
// campaign (its messages, found recursively, are near-duplicates of each
// other). Cluster ids follow the sorted sub-directory names; names[i] is
// the name of cluster i.
func LoadClusters(ctx context.Context, dir string) (items []Item, names []string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("clusters: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		msgs, err := ReadAll(ctx, []string{filepath.Join(dir, e.Name())}, len(names))
		if err != nil {
			return nil, nil, err
		}
		names = append(names, e.Name())
		items = append(items, msgs...)
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("clusters: %s has no sub-directory", dir)
	}
	return items, names, nil
}

// LoadCSV reads labeled campaigns from a CSV file of "path,cluster" lines
// (an optional header "path,cluster" is skipped). Relative paths are
// relative to the CSV file's directory. Cluster labels are arbitrary
// strings; names[i] is the label of cluster i.
func LoadCSV(ctx context.Context, file string) (items []Item, names []string, err error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, fmt.Errorf("csv: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = 2
	r.TrimLeadingSpace = true
	ids := map[string]int{}
	base := filepath.Dir(file)
	for line := 1; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("csv %s: %w", file, err)
		}
		if line == 1 && strings.EqualFold(rec[0], "path") && strings.EqualFold(rec[1], "cluster") {
			continue
		}
		p := rec[0]
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		id, ok := ids[rec[1]]
		if !ok {
			id = len(names)
			ids[rec[1]] = id
			names = append(names, rec[1])
		}
		msgs, err := ReadAll(ctx, []string{p}, id)
		if err != nil {
			return nil, nil, fmt.Errorf("csv %s line %d: %w", file, line, err)
		}
		items = append(items, msgs...)
	}
	if len(items) == 0 {
		return nil, nil, fmt.Errorf("csv %s: no messages", file)
	}
	return items, names, nil
}

// SynthOptions configure Synthesize. Zero values select the defaults.
type SynthOptions struct {
	// Copies is the number of randomized copies per base message (the base
	// itself is kept too). Default 4.
	Copies int
	// Strengths are cycled through for the copies. Default {0.1, 0.2, 0.3}.
	Strengths []float64
	// Kinds are the randomizations; default {spamgen.Combo} (three random
	// techniques per copy).
	Kinds []spamgen.Kind
	// Seed seeds spamgen. Default 1.
	Seed uint64
	// Paragraphs is the pool of innocent text appended by spamgen's Append.
	// Default: spamgen's built-in pool.
	Paragraphs []string
	// VarySubject is the share of copies whose subject is replaced by
	// random words of Paragraphs (spammers rotate subject lines; without
	// this a model learns to trust the subject too much). Default 0.
	VarySubject float64
}

// Synthesize turns every base message into a campaign: the base plus
// Copies randomized copies made with spamgen, all labeled with a cluster
// of their own (first + index of the base). Bases without text are
// skipped.
func Synthesize(bases []Item, first int, opts SynthOptions) []Item {
	if opts.Copies == 0 {
		opts.Copies = 4
	}
	if len(opts.Strengths) == 0 {
		opts.Strengths = []float64{0.1, 0.2, 0.3}
	}
	if len(opts.Kinds) == 0 {
		opts.Kinds = []spamgen.Kind{spamgen.Combo}
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	var out []Item
	for i, b := range bases {
		cluster := first + i
		var copies []Item
		for c := range opts.Copies {
			raw, err := spamgen.Mutate(b.Raw, spamgen.Options{
				Kinds:      opts.Kinds,
				Strength:   opts.Strengths[c%len(opts.Strengths)],
				Seed:       opts.Seed*1_000_003 + uint64(i)*1009 + uint64(c),
				Paragraphs: opts.Paragraphs,
			})
			if err != nil {
				break
			}
			if opts.VarySubject > 0 && len(opts.Paragraphs) > 0 {
				r := rand.New(rand.NewPCG(opts.Seed, uint64(i)*1009+uint64(c)))
				if r.Float64() < opts.VarySubject {
					words := strings.Fields(opts.Paragraphs[r.IntN(len(opts.Paragraphs))])
					if len(words) > 0 {
						k := 3 + r.IntN(5)
						start := r.IntN(len(words))
						raw = replaceSubject(raw, strings.Join(words[start:min(len(words), start+k)], " "))
					}
				}
			}
			copies = append(copies, Item{Name: fmt.Sprintf("%s~copy%d", b.Name, c+1), Raw: raw, Cluster: cluster})
		}
		if len(copies) == 0 {
			continue
		}
		out = append(out, Item{Name: b.Name, Raw: b.Raw, Cluster: cluster})
		out = append(out, copies...)
	}
	return out
}

// replaceSubject replaces the Subject field of the header of raw (or adds
// one) with subj, plain ASCII.
func replaceSubject(raw []byte, subj string) []byte {
	subj = strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, subj)
	end := bytes.Index(raw, []byte("\r\n\r\n"))
	nl := "\r\n"
	if e2 := bytes.Index(raw, []byte("\n\n")); end < 0 || (e2 >= 0 && e2 < end) {
		end, nl = e2, "\n"
	}
	if end < 0 {
		return raw
	}
	lines := strings.Split(string(raw[:end]), nl)
	var out []string
	skip := false
	for _, l := range lines {
		if skip && (strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")) {
			continue // folded continuation of the old subject
		}
		skip = false
		if len(l) >= 8 && strings.EqualFold(l[:8], "subject:") {
			skip = true
			continue
		}
		out = append(out, l)
	}
	out = append(out, "Subject: "+subj)
	return append([]byte(strings.Join(out, nl)), raw[end:]...)
}

// BaseFromText makes a base message of a plain text document: the subject
// is its first words, and with link a campaign URL made of its words is
// added (spam campaigns carry a payload link; spamgen keeps it).
func BaseFromText(name, text string, link bool) Item {
	words := strings.Fields(text)
	subj := strings.Join(words[:min(len(words), 6)], " ")
	body := text
	if link && len(words) >= 3 {
		clean := func(w string) string {
			return strings.Map(func(r rune) rune {
				if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
					return r
				}
				return -1
			}, strings.ToLower(w))
		}
		host := clean(words[len(words)/3]) + clean(words[len(words)/2])
		if host != "" {
			body += fmt.Sprintf("\n\nhttp://www.%s.example/%s\n", host, clean(words[2*len(words)/3]))
		}
	}
	return Item{Name: name, Raw: spamgen.NewMessage(subj, body, false)}
}

// MergeNaturalDuplicates gives items that are already near-duplicates of
// each other (cosine of their sets of unique terms ≥ threshold) the same
// cluster, so that a corpus's own repeated campaigns are not counted as
// unrelated pairs. Unrelated items (Cluster < 0) get fresh cluster ids
// first. It returns the number of merges.
func MergeNaturalDuplicates(items []Item, threshold float64) int {
	next := 0
	for _, it := range items {
		next = max(next, it.Cluster+1)
	}
	for i := range items {
		if items[i].Cluster < 0 {
			items[i].Cluster = next
			next++
		}
	}
	d := &dict{ids: map[string]int32{}}
	vecs := make([]sparse, len(items))
	for i, it := range items {
		toks := mime.Tokenize(mime.Parse(it.Raw, mime.Options{}), mime.TokenOptions{})
		set := map[string]float64{}
		for _, t := range mime.UniqueTerms(toks) {
			set[t] = 1
		}
		vecs[i] = d.vec(set)
	}
	parent := make([]int, next)
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	merges := 0
	for i := range items {
		for j := i + 1; j < len(items); j++ {
			a, b := find(items[i].Cluster), find(items[j].Cluster)
			if a == b || len(vecs[i].ids) < 5 || len(vecs[j].ids) < 5 {
				continue
			}
			if cosine(&vecs[i], &vecs[j]) >= threshold {
				parent[max(a, b)] = min(a, b)
				merges++
			}
		}
	}
	for i := range items {
		items[i].Cluster = find(items[i].Cluster)
	}
	return merges
}

// SpamAssassinOptions configure SpamAssassinSet. Zero values select the
// defaults.
type SpamAssassinOptions struct {
	// Bases is the number of spam messages turned into campaigns. Default 150.
	Bases int
	// Ham is the number of ham messages added as unrelated mail. Default 300.
	Ham int
	// Synth configures the copies.
	Synth SynthOptions
	// Seed selects the messages. Default 1.
	Seed uint64
	// Natural is the binary-cosine threshold above which messages are
	// merged as natural near-duplicates. Default 0.9.
	Natural float64
}

// SpamAssassinSet builds the test set of the pairwise comparison from the
// SpamAssassin corpus (scripts/fetch-corpus.sh): Bases spam messages drawn
// from spamDirs, each with randomized copies (a synthetic campaign), plus
// Ham ham messages drawn from hamDirs as unrelated mail; the corpus's own
// near-duplicates are merged into one campaign.
func SpamAssassinSet(ctx context.Context, spamDirs, hamDirs []string, opts SpamAssassinOptions) ([]Item, int, error) {
	if opts.Bases == 0 {
		opts.Bases = 150
	}
	if opts.Ham == 0 {
		opts.Ham = 300
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.Natural == 0 {
		opts.Natural = 0.9
	}
	spam, err := ReadAll(ctx, spamDirs, -1)
	if err != nil {
		return nil, 0, err
	}
	ham, err := ReadAll(ctx, hamDirs, -1)
	if err != nil {
		return nil, 0, err
	}
	r := rand.New(rand.NewPCG(opts.Seed, 0xa11ce))
	pick := func(in []Item, n int) []Item {
		in = slices.Clone(in)
		r.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		return in[:min(n, len(in))]
	}
	bases := pick(spam, opts.Bases)
	synth := opts.Synth
	if synth.Seed == 0 {
		synth.Seed = opts.Seed
	}
	items := Synthesize(bases, 0, synth)
	items = append(items, pick(ham, opts.Ham)...)
	merges := MergeNaturalDuplicates(items, opts.Natural)
	return items, merges, nil
}
