// Package eval measures nddmilter: detection accuracy on a labelled corpus
// with the protocol of Kolcz & Chowdhury's I-Match email experiment (sect.
// 6.4 and 7.2 of "Lexicon randomization for near-duplicate detection with
// I-Match"), robustness against the randomizations of internal/spamgen, and
// the speed of the signature pipeline and of the store and milter (the
// latter by running `nddlab bench` as a child process). Results print as
// plain text, Markdown (for docs/RESULTS.md), JSON and SVG plots.
package eval

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// Class is the label of a message.
type Class uint8

// Message classes.
const (
	Ham Class = iota
	Spam
)

func (c Class) String() string {
	if c == Spam {
		return "spam"
	}
	return "ham"
}

// Doc is one message of a corpus with the paper's preprocessing applied.
type Doc struct {
	Path  string
	Class Class
	// Group is the corpus folder the message came from (spam, easy_ham,
	// hard_ham, ...).
	Group string
	Raw   []byte
	// Terms are the sorted unique terms (mime.Parse → Tokenize →
	// UniqueTerms with the default token options).
	Terms []string
	// Dup is the index of an earlier document with the same subject and
	// text (a trivial duplicate), or -1.
	Dup int
}

// Corpus is a labelled set of messages.
type Corpus struct {
	Dir  string
	Docs []Doc
}

// Count returns the number of documents of class c.
func (c *Corpus) Count(cl Class) int {
	n := 0
	for i := range c.Docs {
		if c.Docs[i].Class == cl {
			n++
		}
	}
	return n
}

// LoadOptions configure LoadCorpus. The zero value selects the defaults.
type LoadOptions struct {
	// MaxBytes skips larger files. Default 4 MiB.
	MaxBytes int64
	// Workers parse in parallel. Default GOMAXPROCS.
	Workers int
}

// classOf labels a corpus folder: names containing "spam" are spam,
// names containing "ham" are ham; other folders are ignored.
func classOf(dir string) (Class, bool) {
	d := strings.ToLower(dir)
	switch {
	case strings.Contains(d, "spam"):
		return Spam, true
	case strings.Contains(d, "ham"):
		return Ham, true
	}
	return 0, false
}

// LoadCorpus reads every regular file below the class folders of dir (for
// the SpamAssassin corpus exported by scripts/fetch-corpus.sh: spam/,
// easy_ham/, hard_ham/), in sorted path order, and preprocesses it.
func LoadCorpus(dir string, opts LoadOptions) (*Corpus, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 4 << 20
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read corpus %s: %w (run scripts/fetch-corpus.sh first)", dir, err)
	}
	c := &Corpus{Dir: dir}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		cl, ok := classOf(e.Name())
		if !ok {
			continue
		}
		root := filepath.Join(dir, e.Name())
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if info.Size() > opts.MaxBytes {
				return nil
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			c.Docs = append(c.Docs, Doc{Path: path, Class: cl, Group: e.Name(), Raw: raw, Dup: -1})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read corpus %s: %w", root, err)
		}
	}
	if len(c.Docs) == 0 {
		return nil, fmt.Errorf("corpus %s: no messages in spam*/ or *ham*/ folders (run scripts/fetch-corpus.sh first)", dir)
	}
	slices.SortFunc(c.Docs, func(a, b Doc) int { return strings.Compare(a.Path, b.Path) })
	keys := make([][32]byte, len(c.Docs))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < opts.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				doc := mime.Parse(c.Docs[i].Raw, mime.Options{})
				c.Docs[i].Terms = mime.UniqueTerms(mime.Tokenize(doc, mime.TokenOptions{}))
				keys[i] = sha256.Sum256([]byte(doc.Subject + "\x00" + doc.Text))
			}
		}()
	}
	for i := range c.Docs {
		next <- i
	}
	close(next)
	wg.Wait()
	first := map[[32]byte]int{}
	for i := range c.Docs {
		if j, ok := first[keys[i]]; ok && c.Docs[j].Class == c.Docs[i].Class {
			c.Docs[i].Dup = j
			continue
		}
		first[keys[i]] = i
	}
	return c, nil
}

// MinUnique is the paper's minimum number of unique terms of a usable
// message (sect. 6.3).
const MinUnique = 5

// usable reports whether d takes part in the near-duplicate experiment: it
// has enough terms and is not a trivial duplicate.
func (d *Doc) usable() bool { return len(d.Terms) >= MinUnique && d.Dup < 0 }

// Cosine is the paper's cosine over unique terms (eq. 2) of two sorted term
// lists.
func Cosine(a, b []string) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	common := 0
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch strings.Compare(a[i], b[j]) {
		case 0:
			common++
			i++
			j++
		case -1:
			i++
		default:
			j++
		}
	}
	return float64(common) / math.Sqrt(float64(len(a))*float64(len(b)))
}
