package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mailbox"
	"github.com/nddmilter/nddmilter/internal/mime"
)

func newLexiconCmd(gf *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lexicon",
		Short: "Build, inspect and tune I-Match lexicons",
		Long: `An I-Match lexicon holds the document frequencies of a corpus, the primary
lexicon L (terms whose normalized idf lies in a window) and the secondary
lexicon B used for long messages. nddmilter embeds a default lexicon built
from the Brown corpus; see docs/design/imatch.md to build one from your own mail.`,
	}
	cmd.AddCommand(newLexiconBuildCmd(), newLexiconShowCmd(), newLexiconTuneCmd(), newLexiconExplainCmd())
	return cmd
}

// corpusFlags select and read the documents of a corpus.
type corpusFlags struct {
	format    string
	filesFrom string
	maxBytes  int64
	progress  bool
}

func (c *corpusFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.format, "format", "auto", "document format: auto (messages unless a file does not start with a header), eml (messages: .eml, mbox, Maildir) or text (each file is one plain-text document)")
	cmd.Flags().StringVar(&c.filesFrom, "files-from", "", "read the paths to read from `FILE` (one per line, # comments), in addition to the arguments")
	cmd.Flags().Int64Var(&c.maxBytes, "max-bytes", mailbox.DefaultMaxBytes, "skip messages larger than this many bytes")
	cmd.Flags().BoolVar(&c.progress, "progress", false, "show a progress bar even when standard error is not a terminal")
}

// headerLine matches a first line that is an RFC 5322 header field.
var headerLine = regexp.MustCompile(`^[!-9;-~]+:`)

// looksLikeMessage reports whether raw starts like an email message.
func looksLikeMessage(raw []byte) bool {
	line, _, _ := bytes.Cut(raw, []byte("\n"))
	return headerLine.Match(line)
}

type corpusDoc struct {
	path  string
	terms []string // in document order, with repetitions
}

// readCorpus reads every document under paths and calls add (from a single
// goroutine) with its terms in document order; tokenization runs on all
// cores. It returns the number of documents read and skipped.
func (c *corpusFlags) readCorpus(ctx context.Context, stderr io.Writer, paths []string, what string, add func(corpusDoc)) (read, skipped int, err error) {
	switch c.format {
	case "auto", "eml", "text":
	default:
		return 0, 0, fmt.Errorf("--format %q: want auto, eml or text", c.format)
	}
	if c.filesFrom != "" {
		more, err := mailbox.ReadFilesFrom(c.filesFrom)
		if err != nil {
			return 0, 0, err
		}
		paths = append(paths, more...)
	}
	if len(paths) == 0 {
		return 0, 0, errors.New("no corpus paths given")
	}
	var bar *progressbar.ProgressBar
	if c.progress || term.IsTerminal(int(os.Stderr.Fd())) {
		bar = progressbar.NewOptions(-1,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("docs"),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		defer bar.Finish()
	}
	type job struct {
		seq int
		msg mailbox.Message
	}
	type result struct {
		seq int
		doc corpusDoc
	}
	jobs := make(chan job, 64)
	results := make(chan result, 64)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				terms, err := c.safeTerms(j.msg)
				if err != nil {
					fmt.Fprintf(stderr, "skipped %s: %v\n", j.msg.Path, err)
				}
				results <- result{j.seq, corpusDoc{path: j.msg.Path, terms: terms}}
			}
		}()
	}
	// Results are re-ordered so that callers see the walk's order (tune
	// depends on it; df counting does not).
	done := make(chan struct{})
	go func() {
		defer close(done)
		pending := map[int]corpusDoc{}
		next := 0
		for r := range results {
			pending[r.seq] = r.doc
			for d, ok := pending[next]; ok; d, ok = pending[next] {
				delete(pending, next)
				next++
				add(d)
				read++
				if bar != nil {
					bar.Add(1)
				}
			}
		}
	}()
	seq := 0
	walkErr := mailbox.Walk(ctx, paths, mailbox.Options{
		MaxBytes: c.maxBytes,
		Mbox:     map[bool]mailbox.MboxMode{true: mailbox.MboxNever, false: mailbox.MboxAuto}[c.format == "text"],
		OnSkip: func(path string, reason error) error {
			skipped++
			fmt.Fprintf(stderr, "skipped %s: %v\n", path, reason)
			return nil
		},
	}, func(m mailbox.Message) error {
		m.Raw = bytes.Clone(m.Raw)
		select {
		case jobs <- job{seq, m}:
			seq++
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(jobs)
	wg.Wait()
	close(results)
	<-done
	if walkErr != nil {
		return read, skipped, walkErr
	}
	return read, skipped, nil
}

// safeTerms is terms, turning a panic of the parser (a bug: mime.Parse
// must never panic) into an error so that one bad message does not stop a
// build over a whole mail archive.
func (c *corpusFlags) safeTerms(m mailbox.Message) (terms []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			terms, err = nil, fmt.Errorf("parser panic (please report): %v", r)
		}
	}()
	return c.terms(m), nil
}

// terms tokenizes one document according to the format.
func (c *corpusFlags) terms(m mailbox.Message) []string {
	var doc *mime.Document
	switch {
	case c.format == "text", c.format == "auto" && !looksLikeMessage(m.Raw) && !strings.Contains(m.Path, "#"):
		doc = &mime.Document{Text: string(m.Raw)}
	default:
		doc = mime.Parse(m.Raw, mime.Options{})
	}
	toks := mime.Tokenize(doc, mime.TokenOptions{})
	terms := make([]string, len(toks))
	for i, t := range toks {
		terms[i] = t.Term
	}
	return terms
}

func uniqueSorted(terms []string) []string {
	u := slices.Clone(terms)
	slices.Sort(u)
	return slices.Compact(u)
}

func newLexiconBuildCmd() *cobra.Command {
	var (
		cf      corpusFlags
		opts    imatchbag.BuildOptions
		out     string
		keepDup bool
	)
	cmd := &cobra.Command{
		Use:   "build -o FILE PATH...",
		Short: "Build a lexicon from a corpus of messages or plain-text documents",
		Long: `Build reads every document under the given paths (files, directories searched
recursively, Maildirs, mbox files, - for standard input), counts document
frequencies and writes the lexicon file. Exact duplicate documents (same set of
words) are counted once unless --keep-duplicates is given. The output is a pure
function of the documents and flags.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("lexicon build: -o FILE is required")
			}
			b := imatchbag.NewBuilder()
			seen := map[[16]byte]bool{}
			dups, empty := 0, 0
			read, skipped, err := cf.readCorpus(cmd.Context(), cmd.ErrOrStderr(), args, "reading", func(d corpusDoc) {
				u := uniqueSorted(d.terms)
				if len(u) == 0 {
					empty++
					return
				}
				if !keepDup {
					h := imatchbag.HashTerms(u)
					if seen[h] {
						dups++
						return
					}
					seen[h] = true
				}
				b.Add(u)
			})
			if err != nil {
				return fmt.Errorf("lexicon build: %w", err)
			}
			lex, err := b.Build(opts)
			if err != nil {
				return fmt.Errorf("lexicon build: %w", err)
			}
			if err := writeFileAtomic(out, lex); err != nil {
				return fmt.Errorf("lexicon build: %w", err)
			}
			st := lex.Stats()
			fmt.Fprintf(cmd.ErrOrStderr(), "read %d documents (%d skipped, %d without words, %d exact duplicates); N = %d\n", read, skipped, empty, dups, st.N)
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: id %08x, |L| = %d (df %d..%d), |B| = %d, %d terms\n", out, st.ID, st.Primary, st.PrimaryDF[0], st.PrimaryDF[1], st.Secondary, st.Terms)
			return nil
		},
	}
	cf.register(cmd)
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "write the lexicon to `FILE`")
	f.Float64Var(&opts.IdfMin, "idf-min", imatchbag.DefaultIdfMin, "lower bound of the normalized idf window of the primary lexicon")
	f.Float64Var(&opts.IdfMax, "idf-max", imatchbag.DefaultIdfMax, "upper bound of the normalized idf window of the primary lexicon")
	f.IntVar(&opts.SecondaryMax, "secondary-max", imatchbag.DefaultSecondaryMax, "maximum size of the secondary lexicon (-1: none)")
	f.IntVar(&opts.MinDF, "min-df", imatchbag.DefaultMinDF, "record the document frequency of terms in at least this many documents")
	f.IntVar(&opts.MaxTerms, "max-terms", 0, "record at most this many document frequencies (most frequent first; 0: no cap)")
	f.Uint64Var(&opts.Seed, "seed", 0, "bagging seed")
	f.StringVar(&opts.Description, "description", "", "one-line provenance note stored in the file")
	f.BoolVar(&keepDup, "keep-duplicates", false, "count exact duplicate documents every time")
	return cmd
}

// writeFileAtomic writes the lexicon to path through a temporary file.
func writeFileAtomic(path string, lex *imatchbag.Lexicon) error {
	var buf bytes.Buffer
	if _, err := lex.WriteTo(&buf); err != nil {
		return err
	}
	if path == "-" {
		_, err := os.Stdout.Write(buf.Bytes())
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".lexicon-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// loadLexicon reads a lexicon file, or the embedded default when path is "".
func loadLexicon(path string) (*imatchbag.Lexicon, error) {
	if path == "" {
		return imatchbag.DefaultLexicon()
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	lex, err := imatchbag.ReadLexiconFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return lex, nil
}

func newLexiconShowCmd() *cobra.Command {
	var (
		useDefault bool
		list       string
	)
	cmd := &cobra.Command{
		Use:   "show [FILE | --default]",
		Short: "Print the statistics of a lexicon",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if useDefault == (len(args) == 1) {
				return errors.New("lexicon show: give a FILE or --default")
			}
			path := ""
			if len(args) == 1 {
				path = args[0]
			}
			lex, err := loadLexicon(path)
			if err != nil {
				return fmt.Errorf("lexicon show: %w", err)
			}
			w := cmd.OutOrStdout()
			switch list {
			case "":
			case "primary":
				for _, t := range lex.Primary() {
					fmt.Fprintf(w, "%s\t%d\n", t, lex.DF(t))
				}
				return nil
			case "secondary":
				for _, t := range lex.Secondary() {
					fmt.Fprintf(w, "%s\t%d\n", t, lex.DF(t))
				}
				return nil
			default:
				return fmt.Errorf("lexicon show: --list %q: want primary or secondary", list)
			}
			st := lex.Stats()
			name := path
			if name == "" {
				name = "(embedded default)"
			}
			fmt.Fprintf(w, "lexicon:         %s\n", name)
			fmt.Fprintf(w, "format version:  %d (signature version %d)\n", st.Version, imatchbag.SignatureVersion)
			fmt.Fprintf(w, "id:              %08x\n", st.ID)
			if st.Description != "" {
				fmt.Fprintf(w, "description:     %s\n", st.Description)
			}
			fmt.Fprintf(w, "documents (N):   %d\n", st.N)
			fmt.Fprintf(w, "nidf window:     [%g, %g]\n", st.IdfMin, st.IdfMax)
			fmt.Fprintf(w, "primary |L|:     %d terms (document frequency %d..%d)\n", st.Primary, st.PrimaryDF[0], st.PrimaryDF[1])
			fmt.Fprintf(w, "secondary |B|:   %d terms (cap %d)\n", st.Secondary, st.SecondaryMax)
			fmt.Fprintf(w, "recorded terms:  %d (df >= %d)\n", st.Terms, st.MinDF)
			fmt.Fprintf(w, "bagging seed:    %d\n", st.Seed)
			if s, err := imatchbag.NewSigner(lex, imatchbag.Options{}); err == nil && st.Primary > 0 {
				lo, hi := 1.0, 0.0
				for b := 1; b <= s.Options().K; b++ {
					lo, hi = min(lo, s.BagShare(b)), max(hi, s.BagShare(b))
				}
				fmt.Fprintf(w, "bagged lexicons: K = %d (default), each holding %.1f–%.1f%% of L\n", s.Options().K, 100*lo, 100*hi)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&useDefault, "default", false, "show the embedded default lexicon")
	cmd.Flags().StringVar(&list, "list", "", "list the terms of the primary or secondary lexicon with their document frequencies")
	return cmd
}

func parseWindows(s string) ([][2]float64, error) {
	var ws [][2]float64
	for _, part := range strings.Split(s, ",") {
		lo, hi, ok := strings.Cut(strings.TrimSpace(part), "-")
		a, err1 := strconv.ParseFloat(lo, 64)
		b, err2 := strconv.ParseFloat(hi, 64)
		if !ok || err1 != nil || err2 != nil || a > b {
			return nil, fmt.Errorf("bad window %q (want MIN-MAX, e.g. 0.2-0.3)", part)
		}
		ws = append(ws, [2]float64{a, b})
	}
	return ws, nil
}

func newLexiconTuneCmd() *cobra.Command {
	var (
		cf        corpusFlags
		topts     imatchbag.TuneOptions
		windows   string
		negatives []string
		maxDocs   int
	)
	cmd := &cobra.Command{
		Use:   "tune PATH...",
		Short: "Measure near-duplicate recall and false matches per idf window",
		Long: `Tune builds a lexicon from 4/5 of the corpus for every candidate idf window,
then for each held-out document simulates near-duplicates (random word
insertions, deletions and typos, an appended paragraph, shuffled order) and
measures how many still share a signature with the original, and how many
pairs of distinct held-out documents share one (false matches). With
--negatives, it also signs your legitimate mail with each lexicon and counts
the pairs of messages sharing a signature, and among them the dissimilar ones
(cosine of their words below 0.5): the false matches that matter. It prints a
Markdown table (docs/design/imatch.md says how the default was chosen).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if windows != "" {
				ws, err := parseWindows(windows)
				if err != nil {
					return fmt.Errorf("lexicon tune: %w", err)
				}
				topts.Windows = ws
			}
			var docs [][]string
			dropped := 0
			if _, _, err := cf.readCorpus(cmd.Context(), cmd.ErrOrStderr(), args, "reading", func(d corpusDoc) {
				switch {
				case len(d.terms) == 0:
				case len(docs) >= maxDocs:
					dropped++
				default:
					docs = append(docs, d.terms)
				}
			}); err != nil {
				return fmt.Errorf("lexicon tune: %w", err)
			}
			if dropped > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "using the first %d documents (%d more ignored, see --max-docs)\n", maxDocs, dropped)
			}
			if len(negatives) > 0 {
				nf := corpusFlags{format: "eml", maxBytes: cf.maxBytes, progress: cf.progress}
				if _, _, err := nf.readCorpus(cmd.Context(), cmd.ErrOrStderr(), negatives, "reading negatives", func(d corpusDoc) {
					topts.Negatives = append(topts.Negatives, d.terms)
				}); err != nil {
					return fmt.Errorf("lexicon tune: negatives: %w", err)
				}
			}
			topts.Progress = func(done, total int) { fmt.Fprintf(cmd.ErrOrStderr(), "window %d/%d\n", done, total) }
			rep, err := imatchbag.Tune(docs, topts)
			if err != nil {
				return fmt.Errorf("lexicon tune: %w", err)
			}
			so := topts.Signer
			fmt.Fprintf(cmd.OutOrStdout(), "K = %d, MinTerms = %d, MinRatio = %g, MinUnique = %d (0 = default)\n\n", so.K, so.MinTerms, so.MinRatio, so.MinUnique)
			_, err = io.WriteString(cmd.OutOrStdout(), rep.Markdown())
			return err
		},
	}
	cf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&windows, "windows", "", "candidate windows, e.g. 0.1-0.3,0.2-0.4 (default: a grid)")
	f.IntVar(&topts.Signer.K, "k", 0, "bagged lexicons (0: default 10)")
	f.IntVar(&topts.Signer.MinTerms, "min-terms", 0, "minimum |S| (0: default)")
	f.Float64Var(&topts.Signer.MinRatio, "min-ratio", 0, "minimum |S|/|U| (0: default, negative: off)")
	f.IntVar(&topts.Build.SecondaryMax, "secondary-max", 0, "secondary lexicon cap (0: default)")
	f.IntVar(&topts.MaxEval, "max-eval", 0, "evaluate at most this many held-out documents (0: 2000)")
	f.Uint64Var(&topts.Seed, "seed", 0, "perturbation seed (0: 1)")
	f.IntVar(&maxDocs, "max-docs", 50000, "read at most this many corpus documents (they are held in memory)")
	f.StringArrayVar(&negatives, "negatives", nil, "legitimate mail (file, directory, mbox; repeatable): count its pairs sharing a signature as false matches")
	return cmd
}

func newLexiconExplainCmd() *cobra.Command {
	var (
		lexPath string
		format  string
		opts    imatchbag.Options
	)
	cmd := &cobra.Command{
		Use:   "explain MESSAGE",
		Short: "Show how a message's I-Match signatures are computed",
		Long: `Explain prints the unique words of a message (a file, or - for standard input),
which of them are in the primary and secondary lexicons, the terms hashed into
the signature of the original lexicon, and the K+1 signatures.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lex, err := loadLexicon(lexPath)
			if err != nil {
				return fmt.Errorf("lexicon explain: %w", err)
			}
			var raw []byte
			err = mailbox.Walk(cmd.Context(), args[:1], mailbox.Options{Mbox: mailbox.MboxNever, Stdin: cmd.InOrStdin(),
				OnSkip: func(p string, reason error) error { return fmt.Errorf("%s: %w", p, reason) }},
				func(m mailbox.Message) error {
					if raw != nil {
						return errors.New("give one message file, not a directory")
					}
					raw = m.Raw
					return nil
				})
			if err != nil {
				return fmt.Errorf("lexicon explain: %w", err)
			}
			cf := corpusFlags{format: format}
			u := uniqueSorted(cf.terms(mailbox.Message{Path: args[0], Raw: raw}))
			s, err := imatchbag.NewSigner(lex, opts)
			if err != nil {
				return fmt.Errorf("lexicon explain: %w", err)
			}
			r := s.Sign(u)
			w := cmd.OutOrStdout()
			var inL, inB []string
			for _, t := range u {
				switch primary, secondary := s.Class(t); {
				case primary:
					inL = append(inL, t)
				case secondary:
					inB = append(inB, t)
				}
			}
			fmt.Fprintf(w, "lexicon %08x; %d unique words U; %d in L; %d in B\n", lex.ID(), len(u), len(inL), len(inB))
			fmt.Fprintf(w, "L ∩ U: %s\n", strings.Join(inL, " "))
			if S := s.SignatureTerms(u, 0); S != nil {
				fmt.Fprintf(w, "S (%d terms, %d from B): %s\n", r.Terms, r.Secondary, strings.Join(S, " "))
			}
			if r.Reason != "" {
				fmt.Fprintf(w, "no signature of the original lexicon: %s\n", r.Reason)
			}
			for _, sig := range r.Signatures {
				fmt.Fprintf(w, "bag %2d  %x\n", sig.Bag, sig.Key())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&lexPath, "lexicon", "", "lexicon file (default: the embedded one)")
	f.StringVar(&format, "format", "auto", "auto, eml or text")
	f.IntVar(&opts.K, "k", 0, "bagged lexicons (0: default 10, negative: none)")
	f.IntVar(&opts.MinTerms, "min-terms", 0, "minimum |S| (0: default)")
	f.Float64Var(&opts.MinRatio, "min-ratio", 0, "minimum |S|/|U| (0: default, negative: off)")
	return cmd
}
