package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/lab/eval"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
)

// evalFlags are shared by the eval subcommands.
type evalFlags struct {
	corpus         string
	seeds          int
	reportShare    float64
	k              []int
	noEngine       bool
	workers        int
	json           bool
	markdown       bool
	plots          string
	docsDir        string
	quiet          bool
	anddExact      float64
	anddVerif      float64
	matchModel     string
	matchModelFile string

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
	fl.Float64Var(&f.anddExact, "andd-exact", 0, "engine: exact cosine over distinct terms an ANDD-only match must reach (0: off)")
	fl.Float64Var(&f.anddVerif, "andd-verified", 0, "engine: estimated cosine from which an exactly verified ANDD-only candidate matches (0: the model's threshold)")
	fl.StringVar(&f.matchModelFile, "match-model-file", "", "engine: a match model file (nddlab train calibration -o) instead of the embedded one")
	fl.StringVar(&f.matchModel, "match-model", "", "engine: policy.match_model, calibrated or confidences (default: the policy's)")
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
	o := f.accuracyOptions0()
	if f.matchModelFile != "" {
		b, err := os.ReadFile(f.matchModelFile)
		if err == nil {
			var m *campaign.MatchModel
			if m, err = campaign.ParseMatchModel(b); err == nil {
				o.Engine.Policy = o.Engine.Policy.WithMatchModel(m)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "match model:", err)
			os.Exit(2)
		}
	}
	return o
}

func (f *evalFlags) accuracyOptions0() eval.AccuracyOptions {
	return eval.AccuracyOptions{Seeds: f.seeds, ReportShare: f.reportShare, K: f.k, SkipEngine: f.noEngine, Workers: f.workers, Log: f.logger(),
		Engine: campaign.Options{ANDDExactCosine: f.anddExact, ANDDVerifiedThreshold: f.anddVerif, Policy: campaign.Policy{MatchModel: f.matchModel}}}
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

// output prints r as the flags ask.
func (f *evalFlags) output(w io.Writer, r *eval.Results) error {
	return r.Write(w, eval.OutputOptions{Args: os.Args[1:], Plots: f.plots, JSON: f.json, Markdown: f.markdown, DocsDir: f.docsDir})
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
lexicons, ANDD alone, SpotSigs and PPJoin+ (docs/design/methods.md), and the
daemon's engine over a real Badger store.

Fetch the corpus first: scripts/fetch-corpus.sh.

Subcommands: adversarial (robustness to spamgen randomizations), padding
(copies padded with appended random words), reporters (every spam reported
by N users, then every message checked), mistaken (legitimate mail reported
as junk by 1 and 3 users, the rest of it checked), confirmed (campaigns with
many spam reporters and no dissent), calibration (the match model's
reliability on held-out seeds), speed (pipeline and store/milter
benchmarks), zap (zero-hour purge of a campaign's delivered copies), all
(accuracy, adversarial, reporters, mistaken, confirmed, calibration, speed
and zap: with --markdown it prints docs/RESULTS.md).`,
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
			return f.output(cmd.OutOrStdout(), &eval.Results{Accuracy: acc})
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
			return fa.output(cmd.OutOrStdout(), &eval.Results{Adversarial: r})
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
			return fp.output(cmd.OutOrStdout(), &eval.Results{Padding: r})
		},
	}
	fp.common(pad)
	pad.Flags().Float64Var(&fp.reportShare, "report-share", 0.1, "share of the usable spam reported")
	pad.Flags().Uint64Var(&fp.advSeed, "adv-seed", 1, "seed of the reported set and the padding")
	pad.Flags().IntSliceVar(&padKB, "kib", []int{0, 1, 4, 8, 16, 32}, "amounts of appended text, in KiB")

	fr := &evalFlags{}
	var reporters int
	rep := &cobra.Command{
		Use:   "reporters",
		Short: "Every spam of the corpus reported by N users, then every message checked: the ham flagged",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := fr.load()
			if err != nil {
				return err
			}
			r, err := eval.RunReporters(cmd.Context(), c, eval.ReportersOptions{Reporters: reporters, Accuracy: fr.accuracyOptions()})
			if err != nil {
				return fmt.Errorf("eval reporters: %w", err)
			}
			return fr.output(cmd.OutOrStdout(), &eval.Results{Reporters: r})
		},
	}
	fr.common(rep)
	rep.Flags().IntVar(&reporters, "reporters", 3, "users who report every spam message")

	fm := &evalFlags{}
	var mistakenReporters []int
	var mistakenShare float64
	var coldSenders, firstDay, inOrder bool
	mis := &cobra.Command{
		Use:   "mistaken",
		Short: "Legitimate mail reported as junk by mistaken users: the other legitimate mail flagged, near-copies of a reported message or not",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := fm.load()
			if err != nil {
				return err
			}
			r, err := eval.RunMistaken(cmd.Context(), c, eval.MistakenOptions{Seeds: fm.seeds, Share: mistakenShare, Reporters: mistakenReporters, ColdSenders: coldSenders, FirstDay: firstDay, InOrder: inOrder, Accuracy: fm.accuracyOptions()})
			if err != nil {
				return fmt.Errorf("eval mistaken: %w", err)
			}
			return fm.output(cmd.OutOrStdout(), &eval.Results{Mistaken: r})
		},
	}
	fm.common(mis)
	mis.Flags().IntVar(&fm.seeds, "seeds", 5, "random report sets to average over")
	mis.Flags().IntSliceVar(&mistakenReporters, "reporters", []int{1, 3}, "numbers of mistaken reporters measured")
	mis.Flags().Float64Var(&mistakenShare, "share", 0.1, "share of the legitimate mail each mistaken reporter reports")
	mis.Flags().BoolVar(&coldSenders, "cold-senders", false, "deliver no legitimate mail first: the tables of senders and lists of accepted mail start empty")
	mis.Flags().BoolVar(&firstDay, "first-day", false, "measure every row a second time as --cold-senders (what eval all shows)")
	mis.Flags().BoolVar(&inOrder, "in-order", false, "check the legitimate mail nobody reported one message at a time, each accepted one counted as delivered mail (default: a dry run)")

	fc := &evalFlags{}
	conf := &cobra.Command{
		Use:   "confirmed",
		Short: "Copies of campaigns reported by 5 users (no dissent): those at estimated similarity ≥ 0.8 should be quarantined",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := fc.load()
			if err != nil {
				return err
			}
			o, err := fc.adversarialOptions()
			if err != nil {
				return err
			}
			r, err := eval.RunConfirmed(cmd.Context(), c, eval.ConfirmedOptions{Seed: o.Seed, ReportShare: o.ReportShare, Kinds: o.Kinds, Strengths: o.Strengths, Accuracy: o.Accuracy})
			if err != nil {
				return fmt.Errorf("eval confirmed: %w", err)
			}
			return fc.output(cmd.OutOrStdout(), &eval.Results{Confirmed: r})
		},
	}
	fc.common(conf)
	conf.Flags().Float64Var(&fc.reportShare, "report-share", 0.1, "share of the usable spam reported")
	fc.adversarialFlags(conf)

	fk := &evalFlags{}
	cal := &cobra.Command{
		Use:   "calibration",
		Short: "The match probability's calibration: each family's model and the joint one fitted on seeds 1-3, measured with the shipped model on seeds 4-5",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := fk.load()
			if err != nil {
				return err
			}
			r, err := eval.RunCalibration(cmd.Context(), c, eval.CalibrationOptions{Accuracy: fk.accuracyOptions()})
			if err != nil {
				return fmt.Errorf("eval calibration: %w", err)
			}
			return fk.output(cmd.OutOrStdout(), &eval.Results{Calibration: r})
		},
	}
	fk.common(cal)

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
			return fs.output(cmd.OutOrStdout(), &eval.Results{Speed: r})
		},
	}
	fs.common(speed)
	fs.speedFlags(speed)

	fz := &evalFlags{}
	var zo eval.ZapOptions
	zapCmd := &cobra.Command{
		Use:   "zap",
		Short: "Zero-hour purge: a campaign's copies left in INBOX without and with the purge, escalation → moved, the ledger's cost",
		Long: `A campaign of --users randomized copies, one per user, arriving over
--span; a share of the recipients report theirs after an exponential
delay if it is still in their INBOX, the others read theirs after another.
Every copy goes through the real engine as the milter checks it and, let
through, into the real delivery ledger; once without the purge, once with
the real purger over a model of the mailboxes (moves at --rate per second,
unread copies only). The clock is simulated; the corpus is not needed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			zo.Log = fz.logger()
			r, err := eval.RunZap(cmd.Context(), zo)
			if err != nil {
				return fmt.Errorf("eval zap: %w", err)
			}
			return fz.output(cmd.OutOrStdout(), &eval.Results{Zap: r})
		},
	}
	fz.common(zapCmd)
	zf := zapCmd.Flags()
	zf.IntVar(&zo.Users, "users", 1000, "recipients, one copy each")
	zf.DurationVar(&zo.Span, "span", 30*time.Minute, "time over which the copies arrive")
	zf.DurationVar(&zo.End, "end", 2*time.Hour, "when the mailboxes are counted, from the first copy")
	zf.Float64Var(&zo.ReportShare, "report-share", 0.03, "share of the recipients who report their copy")
	zf.DurationVar(&zo.ReportMean, "report-delay", 10*time.Minute, "mean delay of a report after delivery (exponential)")
	zf.DurationVar(&zo.ReadMean, "read-delay", time.Hour, "mean delay before a recipient reads a copy (exponential)")
	zf.Float64Var(&zo.Rate, "rate", 10, "the purge's moves per second (zap.rate)")
	zf.Uint64Var(&zo.Seed, "seed", 1, "seed of the copies and the users' delays")

	fl := &evalFlags{}
	all := &cobra.Command{
		Use:   "all",
		Short: "Accuracy, adversarial, every spam reported by 3 users, speed and zero-hour purge; with --markdown --plots docs/img it prints docs/RESULTS.md",
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
				if sp, err = eval.ReadSpeed(fl.speedFrom); err != nil {
					return err
				}
			} else if sp, err = eval.RunSpeed(cmd.Context(), c, fl.speedOptions()); err != nil {
				return fmt.Errorf("eval speed: %w", err)
			}
			reps, err := eval.RunReporters(cmd.Context(), c, eval.ReportersOptions{Reporters: 3, Accuracy: fl.accuracyOptions()})
			if err != nil {
				return fmt.Errorf("eval reporters: %w", err)
			}
			mis, err := eval.RunMistaken(cmd.Context(), c, eval.MistakenOptions{Seeds: fl.seeds, FirstDay: true, Accuracy: fl.accuracyOptions()})
			if err != nil {
				return fmt.Errorf("eval mistaken: %w", err)
			}
			conf, err := eval.RunConfirmed(cmd.Context(), c, eval.ConfirmedOptions{Seed: o.Seed, ReportShare: o.ReportShare, Kinds: o.Kinds, Strengths: o.Strengths, Accuracy: o.Accuracy})
			if err != nil {
				return fmt.Errorf("eval confirmed: %w", err)
			}
			cal, err := eval.RunCalibration(cmd.Context(), c, eval.CalibrationOptions{Accuracy: fl.accuracyOptions()})
			if err != nil {
				return fmt.Errorf("eval calibration: %w", err)
			}
			zr, err := eval.RunZap(cmd.Context(), eval.ZapOptions{Log: fl.logger()})
			if err != nil {
				return fmt.Errorf("eval zap: %w", err)
			}
			return fl.output(cmd.OutOrStdout(), &eval.Results{Accuracy: acc, Adversarial: adv, Reporters: reps, Mistaken: mis, Confirmed: conf, Calibration: cal, Speed: sp, Zap: zr})
		},
	}
	fl.common(all)
	fl.accuracyFlags(all)
	fl.adversarialFlags(all)
	fl.speedFlags(all)
	all.Flags().StringVar(&fl.speedFrom, "speed-from", "", "take the speed table from this file (the output of eval speed --json) instead of measuring again")

	cmd.AddCommand(adv, pad, rep, mis, conf, cal, speed, zapCmd, all)
	return cmd
}
