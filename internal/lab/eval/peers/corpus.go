// Package peers measures nddmilter side by side with the tools
// administrators use today for the same job, first of all rspamd's
// fuzzy_check module with a local fuzzy storage (docs/design/methods.md).
//
// Both tools get the same protocol as `nddlab eval`: a seeded random
// share of the spam of a labelled corpus is reported (rspamd learns it with
// fuzzy_add, nddmilter with a junk report), every other message is checked,
// and so are randomized copies (internal/spamgen) of the reported spam. The
// package computes the ground truth of near-duplicates (cosine similarity of
// unique-term sets, the preprocessing of Kolcz & Chowdhury), runs each tool
// with the same client parallelism, and renders detection and speed tables.
//
// The driver is scripts/peers/compare.sh; nothing here runs in `go test`
// against a real rspamd.
package peers

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Classes of the SpamAssassin public corpus, as laid out by
// scripts/fetch-corpus.sh: DIR/{spam,easy_ham,hard_ham}/*.eml.
const (
	ClassSpam    = "spam"
	ClassEasyHam = "easy_ham"
	ClassHardHam = "hard_ham"
)

// Classes lists the corpus classes in table order.
var classes = []string{ClassSpam, ClassEasyHam, ClassHardHam}

// Message is one labelled message of the corpus.
type Message struct {
	Path  string // file path, or a synthetic name for generated copies
	Class string // ClassSpam, ClassEasyHam or ClassHardHam
	Raw   []byte
}

// IsSpam reports whether m is labelled spam.
func (m *Message) IsSpam() bool { return m.Class == ClassSpam }

// LoadCorpus reads DIR/{spam,easy_ham,hard_ham}/* (regular files, sorted by
// name). A missing class directory is an error; so is an empty corpus.
// Files larger than maxBytes (0 = 4 MiB) are skipped, like a mail server
// would skip them.
func LoadCorpus(dir string, maxBytes int64) ([]Message, error) {
	if maxBytes <= 0 {
		maxBytes = 4 << 20
	}
	var msgs []Message
	for _, class := range classes {
		cdir := filepath.Join(dir, class)
		ents, err := os.ReadDir(cdir)
		if err != nil {
			return nil, fmt.Errorf("read corpus class %s: %w", class, err)
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			info, err := e.Info()
			if err != nil || info.Size() > maxBytes {
				continue
			}
			p := filepath.Join(cdir, e.Name())
			raw, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			msgs = append(msgs, Message{Path: p, Class: class, Raw: StripMboxFrom(raw)})
		}
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("corpus %s is empty", dir)
	}
	return msgs, nil
}

// Split is the protocol of `nddlab eval`: which messages are reported
// and which are checked. Both hold indexes into the corpus slice.
type Split struct {
	Reported []int // spam reported as junk
	Checked  []int // every other message
}

// SplitReported picks a seeded random share (0 < share ≤ 1; default 0.1 when
// share ≤ 0) of the spam messages to be reported; all other messages are
// checked. At least one spam is reported when there is any. The result is
// deterministic for equal inputs and seed.
func SplitReported(msgs []Message, share float64, seed uint64) Split {
	if share <= 0 {
		share = 0.1
	}
	if share > 1 {
		share = 1
	}
	var spam []int
	for i := range msgs {
		if msgs[i].IsSpam() {
			spam = append(spam, i)
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	rng.Shuffle(len(spam), func(i, j int) { spam[i], spam[j] = spam[j], spam[i] })
	n := int(float64(len(spam))*share + 0.5)
	if n == 0 && len(spam) > 0 {
		n = 1
	}
	rep := slices.Clone(spam[:n])
	slices.Sort(rep)
	var s Split
	s.Reported = rep
	for i := range msgs {
		if _, found := slices.BinarySearch(rep, i); !found {
			s.Checked = append(s.Checked, i)
		}
	}
	return s
}

// StripMboxFrom removes a leading mbox separator line ("From addr date"):
// it is not part of the message a mail server receives. (The SpamAssassin
// corpus files keep it.)
func StripMboxFrom(raw []byte) []byte {
	if !bytes.HasPrefix(raw, []byte("From ")) {
		return raw
	}
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		return raw[i+1:]
	}
	return raw
}

// Sample returns a seeded random subset of about n messages with the class
// shares of msgs, in corpus order (all of msgs when n ≥ len(msgs)).
func Sample(msgs []Message, n int, seed uint64) []Message {
	if n <= 0 || n >= len(msgs) {
		return msgs
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5a3b1e))
	keep := make([]bool, len(msgs))
	for _, class := range classes {
		var idx []int
		for i := range msgs {
			if msgs[i].Class == class {
				idx = append(idx, i)
			}
		}
		rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		k := int(float64(len(idx))*float64(n)/float64(len(msgs)) + 0.5)
		for _, i := range idx[:min(k, len(idx))] {
			keep[i] = true
		}
	}
	var out []Message
	for i := range msgs {
		if keep[i] {
			out = append(out, msgs[i])
		}
	}
	return out
}
