package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/eval/pairs"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
)

type trainFlags struct {
	clusters    string
	csv         string
	negatives   []string
	synthesize  int
	from        []string
	copies      int
	link        bool
	synthNeg    int
	strengths   []float64
	varySubject float64
	maxFPR      float64
	minRecall   float64
	out         string
	seed        int64
	pairs       int
	l2          float64
	scale       float64
	sim         string
	holdout     float64
	maxIter     int
	features    []string
	ngram       int
	lexicon     string
	baseModel   string
	lsh         andd.LSH
	quiet       bool
}

func newTrainCmd(gf *globalFlags) *cobra.Command {
	var f trainFlags
	cmd := &cobra.Command{
		Use:   "train (--clusters DIR | --csv FILE | --synthesize N --from PATH...) [--negatives PATH...] -o MODEL",
		Short: "Learn ANDD term weights from labeled campaigns and write a model file",
		Long: `Learn the ANDD term-weighting model (docs/ANDD.md) from labeled campaigns:

  --clusters DIR     one sub-directory of messages per campaign
  --csv FILE         lines "path,cluster" (paths relative to the CSV file)
  --synthesize N --from PATH...
                     build N synthetic campaigns: each of N documents drawn
                     from PATH (mail or plain text) plus --copies randomized
                     copies made the way spammers do (internal/spamgen)

--negatives adds unrelated messages (never near-duplicates of anything).
A --holdout share of the campaigns is kept out of training; the held-out
Max F1 is printed at the end and the model's sketch threshold is set at the
held-out Max F1 point of ANDD-LSH-Cos. Training is deterministic for a
given --seed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTrain(cmd.Context(), cmd.OutOrStdout(), &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.clusters, "clusters", "", "directory with one sub-directory of messages per campaign")
	fl.StringVar(&f.csv, "csv", "", "CSV file of path,cluster lines")
	fl.StringSliceVar(&f.negatives, "negatives", nil, "unrelated messages (files, directories, mbox, Maildir)")
	fl.IntVar(&f.synthesize, "synthesize", 0, "number of synthetic campaigns to build from --from")
	fl.StringSliceVar(&f.from, "from", nil, "documents to synthesize campaigns from (mail or plain text)")
	fl.IntVar(&f.copies, "copies", 4, "randomized copies per synthetic campaign")
	fl.IntVar(&f.synthNeg, "synth-negatives", 1000, "documents of --from (not used as campaigns) added as unrelated mail")
	fl.Float64SliceVar(&f.strengths, "strengths", []float64{0.1, 0.3, 0.5}, "randomization strengths of the synthetic copies (cycled)")
	fl.Float64Var(&f.minRecall, "min-recall", 0.8, "raise the threshold as long as this share of held-out near-duplicate pairs stays above it (0: Max F1 point)")
	fl.Float64Var(&f.maxFPR, "max-fpr", 1e-4, "highest share of unrelated held-out pairs allowed above the model's threshold")
	fl.Float64Var(&f.varySubject, "vary-subject", 0.5, "share of synthetic copies whose subject line is replaced by unrelated words")
	fl.BoolVar(&f.link, "link", true, "give plain-text synthetic campaigns a payload URL")
	fl.StringVarP(&f.out, "output", "o", "", "model file to write (required)")
	fl.Int64Var(&f.seed, "seed", 1, "seed of sampling, splitting and synthesis")
	fl.IntVar(&f.pairs, "pairs", 20000, "number of preference examples (near-duplicate pair, unrelated pair)")
	fl.Float64Var(&f.l2, "l2", 0.001, "L2 regularization strength (towards the initial weights)")
	fl.Float64Var(&f.scale, "scale", 10, "scale of the similarity difference in the logistic loss")
	fl.StringVar(&f.sim, "sim", "cosine", "similarity to train for: cosine or jaccard")
	fl.Float64Var(&f.holdout, "holdout", 0.2, "share of campaigns and negatives held out for evaluation")
	fl.IntVar(&f.maxIter, "max-iter", 150, "maximum L-BFGS iterations")
	fl.StringSliceVar(&f.features, "features", nil, "features to use (default all: "+strings.Join(andd.FeatureNames(), ",")+")")
	fl.IntVar(&f.ngram, "ngram", 1, "k of the k-gram terms")
	fl.StringVar(&f.lexicon, "lexicon", "", "lexicon file for document frequencies (default: embedded)")
	fl.StringVar(&f.baseModel, "base-model", "", "model whose LSH parameters to keep (default: embedded)")
	fl.IntVar(&f.lsh.Bits, "bits", 0, "cosine sketch bits m (default: the base model's)")
	fl.IntVar(&f.lsh.MinHashes, "minhashes", -1, "weighted min-hashes, 0 for none (default: the base model's)")
	fl.IntVar(&f.lsh.Bands, "bands", 0, "band keys b (default: the base model's)")
	fl.IntVar(&f.lsh.BandBits, "band-bits", 0, "bits per band r (default: the base model's)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bars")
	cmd.AddCommand(newTrainCompareCmd(gf))
	return cmd
}

func anddLexicon(path string) (*imatchbag.Lexicon, error) {
	if path == "" {
		return imatchbag.DefaultLexicon()
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lexicon: %w", err)
	}
	return imatchbag.ReadLexiconFile(fh)
}

func anddModel(path string, def func() (*andd.Model, error)) (*andd.Model, error) {
	if path == "" {
		return def()
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	defer fh.Close()
	m, err := andd.ReadModel(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func anddBar(quiet bool, max int, what string) *progressbar.ProgressBar {
	if quiet {
		return progressbar.NewOptions(max, progressbar.OptionSetWriter(io.Discard))
	}
	return progressbar.NewOptions(max,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}

// anddLooksLikeMail reports whether raw starts with a header field.
func anddLooksLikeMail(raw []byte) bool {
	line, _, _ := bytes.Cut(raw, []byte("\n"))
	name, _, ok := bytes.Cut(line, []byte(":"))
	if !ok || len(name) == 0 || len(name) > 40 {
		return bytes.HasPrefix(raw, []byte("From "))
	}
	return !bytes.ContainsAny(name, " \t")
}

// anddTrainingItems gathers the labeled campaigns and negatives.
func anddTrainingItems(ctx context.Context, f *trainFlags) ([]pairs.Item, error) {
	var items []pairs.Item
	var err error
	sources := 0
	if f.clusters != "" {
		sources++
		if items, _, err = pairs.LoadClusters(ctx, f.clusters); err != nil {
			return nil, err
		}
	}
	if f.csv != "" {
		sources++
		if items, _, err = pairs.LoadCSV(ctx, f.csv); err != nil {
			return nil, err
		}
	}
	if f.synthesize > 0 {
		sources++
		if len(f.from) == 0 {
			return nil, errors.New("--synthesize needs --from")
		}
		docs, err := pairs.ReadAll(ctx, f.from, -1)
		if err != nil {
			return nil, err
		}
		r := rand.New(rand.NewPCG(uint64(f.seed), 0xba5e))
		r.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
		n := min(f.synthesize, len(docs))
		bases := make([]pairs.Item, 0, n)
		for _, d := range docs[:n] {
			if anddLooksLikeMail(d.Raw) {
				bases = append(bases, d)
			} else {
				bases = append(bases, pairs.BaseFromText(d.Name, string(d.Raw), f.link))
			}
		}
		// Appended innocent text comes from the documents not used as bases.
		var paras []string
		for _, d := range docs[n:min(len(docs), n+200)] {
			if !anddLooksLikeMail(d.Raw) {
				if p := strings.TrimSpace(string(d.Raw)); len(p) > 200 {
					paras = append(paras, p[:min(len(p), 1500)])
				}
			}
		}
		items = pairs.Synthesize(bases, 0, pairs.SynthOptions{Copies: f.copies, Seed: uint64(f.seed), Paragraphs: paras, Strengths: f.strengths, VarySubject: f.varySubject})
		// Unused documents are unrelated mail.
		for _, d := range docs[n:min(len(docs), n+f.synthNeg)] {
			if !anddLooksLikeMail(d.Raw) {
				d = pairs.BaseFromText(d.Name, string(d.Raw), false)
			}
			d.Cluster = -1
			items = append(items, d)
		}
	}
	if sources != 1 {
		return nil, errors.New("give exactly one of --clusters, --csv and --synthesize")
	}
	if len(f.negatives) > 0 {
		neg, err := pairs.ReadAll(ctx, f.negatives, -1)
		if err != nil {
			return nil, err
		}
		items = append(items, neg...)
	}
	return items, nil
}

// anddSplitHoldout assigns whole campaigns (and single negatives) to the
// held-out set with probability share.
func anddSplitHoldout(items []pairs.Item, share float64, seed int64) (train, test []pairs.Item) {
	r := rand.New(rand.NewPCG(uint64(seed), 0x401d))
	held := map[int]bool{}
	var clusters []int
	for _, it := range items {
		if it.Cluster >= 0 && !slices.Contains(clusters, it.Cluster) {
			clusters = append(clusters, it.Cluster)
		}
	}
	slices.Sort(clusters)
	for _, c := range clusters {
		held[c] = r.Float64() < share
	}
	for _, it := range items {
		h := false
		if it.Cluster >= 0 {
			h = held[it.Cluster]
		} else {
			h = r.Float64() < share
		}
		if h {
			test = append(test, it)
		} else {
			train = append(train, it)
		}
	}
	return train, test
}

func runTrain(ctx context.Context, stdout io.Writer, f *trainFlags) error {
	if f.out == "" {
		return errors.New("train: -o MODEL is required")
	}
	if f.holdout < 0 || f.holdout >= 1 {
		return errors.New("train: --holdout must be in [0, 1)")
	}
	lex, err := anddLexicon(f.lexicon)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	base, err := anddModel(f.baseModel, andd.DefaultModel)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if f.lsh.Bits > 0 {
		base.LSH.Bits = f.lsh.Bits
	}
	if f.lsh.MinHashes >= 0 {
		base.LSH.MinHashes = f.lsh.MinHashes
	}
	if f.lsh.Bands > 0 {
		base.LSH.Bands = f.lsh.Bands
	}
	if f.lsh.BandBits > 0 {
		base.LSH.BandBits = f.lsh.BandBits
	}
	if err := base.Validate(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	items, err := anddTrainingItems(ctx, f)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	train, test := anddSplitHoldout(items, f.holdout, f.seed)
	st := pairs.Describe(train)
	fmt.Fprintf(os.Stderr, "train: %d messages (%d campaigns, %d unrelated) for training, %d held out\n",
		st.Messages, st.Clusters, st.Singletons, len(test))

	bar := anddBar(f.quiet, len(train), "parse")
	docs := make([]andd.TrainDoc, len(train))
	for i, it := range train {
		if err := ctx.Err(); err != nil {
			return err
		}
		doc := mime.Parse(it.Raw, mime.Options{})
		docs[i] = andd.TrainDoc{Doc: doc, Toks: mime.Tokenize(doc, mime.TokenOptions{}), Cluster: it.Cluster}
		bar.Add(1)
	}
	bar.Finish()

	bar = anddBar(f.quiet, f.maxIter, "l-bfgs")
	m, res, err := andd.Train(docs, lex, base, andd.TrainOptions{
		Seed: f.seed, Pairs: f.pairs, L2: f.l2, Scale: f.scale, MaxIter: f.maxIter,
		Features: f.features, Similarity: f.sim, NGram: f.ngram,
		Progress: func(iter int, loss float64) {
			bar.Describe(fmt.Sprintf("l-bfgs loss %.5f", loss))
			bar.Set(iter)
		},
	})
	bar.Finish()
	if err != nil {
		return err
	}
	m.Training.Clusters = st.Clusters
	m.Training.Source = trainSource(f)
	fmt.Fprintf(stdout, "loss %.5f -> %.5f after %d iterations (%s)\n", res.InitLoss, res.Loss, res.Iterations, res.Status)
	for i, name := range m.Features {
		fmt.Fprintf(stdout, "  λ[%-8s] = %+.4f\n", name, m.Lambda[i])
	}

	if len(test) > 1 && pairs.Describe(test).Positives > 0 {
		jm := m
		if f.sim == andd.SimCosine {
			jm = m.Clone()
			jm.Similarity = andd.SimJaccard
		}
		methods := []string{pairs.MethodANDDRawCos, pairs.MethodANDDLSHCos}
		if f.sim == andd.SimJaccard {
			methods = []string{pairs.MethodANDDRawJacc, pairs.MethodANDDLSHJacc, pairs.MethodANDDLSHCos}
		}
		methods = append(methods, pairs.MethodTFIDF)
		pp, err := pairs.Prepare(ctx, test, pairs.Options{Lexicon: lex, Cosine: m, Jaccard: jm, Methods: methods})
		if err != nil {
			return fmt.Errorf("train: held-out evaluation: %w", err)
		}
		rows := pp.Compare()
		ts := pairs.Describe(test)
		fmt.Fprintf(stdout, "\nheld out: %d messages, %d campaigns, %d pairs (%d near-duplicate)\n\n", ts.Messages, ts.Clusters, ts.Pairs, ts.Positives)
		pairs.Markdown(stdout, rows)
		for _, r := range rows {
			if r.Method == pairs.MethodANDDLSHCos {
				m.Threshold = r.Threshold
				m.Training.HeldOutMaxF1 = r.F1
			}
		}
		fmt.Fprintf(stdout, "\nheld-out Max F1 (ANDD-LSH-Cos): %.3f at estimated cosine %.3f\n", m.Training.HeldOutMaxF1, m.Threshold)
		// Blocking mail is costlier than missing a copy: raise the
		// threshold until at most --max-fpr of the unrelated pairs pass.
		scores, labels := pp.Scores(pairs.MethodANDDLSHCos), pp.Labels()
		var neg, pos []float64
		for i, s := range scores {
			if !labels[i] {
				neg = append(neg, s)
			} else {
				pos = append(pos, s)
			}
		}
		// Precision first: the highest threshold that still keeps
		// --min-recall of the held-out near-duplicate pairs.
		slices.Sort(pos)
		slices.Reverse(pos)
		if k := int(math.Ceil(f.minRecall*float64(len(pos)))) - 1; k >= 0 && k < len(pos) && pos[k]-1e-6 > m.Threshold {
			m.Threshold = pos[k] - 1e-6
			fmt.Fprintf(stdout, "threshold raised to %.3f: keeps %.0f%% of the held-out near-duplicate pairs\n", m.Threshold, 100*f.minRecall)
		}
		slices.Sort(neg)
		slices.Reverse(neg)
		if k := int(f.maxFPR * float64(len(neg))); k < len(neg) && neg[k]+1e-6 > m.Threshold {
			m.Threshold = min(neg[k]+1e-6, 0.999)
			fmt.Fprintf(stdout, "threshold raised to %.3f: at most %g of the unrelated held-out pairs above it\n", m.Threshold, f.maxFPR)
		}
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		return err
	}
	if err := os.WriteFile(f.out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s\n", f.out)
	return nil
}

func trainSource(f *trainFlags) string {
	switch {
	case f.clusters != "":
		return "clusters " + f.clusters
	case f.csv != "":
		return "csv " + f.csv
	default:
		return fmt.Sprintf("synthesized %d campaigns × %d copies", f.synthesize, f.copies)
	}
}

type compareFlags struct {
	spam, ham     []string
	clusters, csv string
	negatives     []string
	bases, hamN   int
	copies        int
	seed          uint64
	natural       float64
	model, jmodel string
	lexicon       string
	methods       []string
	bands         []string
	quiet         bool
}

func newTrainCompareCmd(gf *globalFlags) *cobra.Command {
	var f compareFlags
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Max F1 over all message pairs for ANDD, TF-IDF, binary cosine and I-Match (the ANDD paper's Tables 4–5)",
		Long: `Score near-duplicate detection methods over every pair of test messages
(positive when both belong to one campaign) and print a Markdown table of
Max F1, precision and recall.

The test set is either labeled (--clusters DIR or --csv FILE, plus
--negatives), or built from a corpus such as SpamAssassin
(scripts/fetch-corpus.sh): --bases spam messages from --spam, each with
--copies randomized copies (spamgen), plus --ham messages of --ham as
unrelated mail; messages already near-duplicates of each other (binary
cosine ≥ --natural) are merged into one campaign.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCompare(cmd.Context(), cmd.OutOrStdout(), &f)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.spam, "spam", nil, "spam messages to build campaigns from")
	fl.StringSliceVar(&f.ham, "ham", nil, "ham messages (unrelated mail)")
	fl.StringVar(&f.clusters, "clusters", "", "labeled campaigns: one sub-directory per campaign")
	fl.StringVar(&f.csv, "csv", "", "labeled campaigns: CSV of path,cluster")
	fl.StringSliceVar(&f.negatives, "negatives", nil, "unrelated messages added to a labeled set")
	fl.IntVar(&f.bases, "bases", 150, "spam messages turned into campaigns")
	fl.IntVar(&f.hamN, "ham-count", 300, "ham messages added")
	fl.IntVar(&f.copies, "copies", 4, "randomized copies per campaign")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the selection and of the copies")
	fl.Float64Var(&f.natural, "natural", 0.9, "binary cosine above which corpus messages are merged as natural near-duplicates")
	fl.StringVar(&f.model, "model", "", "ANDD cosine model (default: embedded)")
	fl.StringVar(&f.jmodel, "jaccard-model", "", "ANDD Jaccard model (default: embedded)")
	fl.StringVar(&f.lexicon, "lexicon", "", "lexicon file (default: embedded)")
	fl.StringSliceVar(&f.bands, "bands", nil, "also measure these band layouts BxR of the cosine sketch (e.g. 16x16,32x12), at the model's threshold")
	fl.StringSliceVar(&f.methods, "methods", nil, "methods to run (default all: "+strings.Join(pairs.AllMethods(), ", ")+")")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bars")
	return cmd
}

func runCompare(ctx context.Context, stdout io.Writer, f *compareFlags) error {
	lex, err := anddLexicon(f.lexicon)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	cm, err := anddModel(f.model, andd.DefaultModel)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	jm, err := anddModel(f.jmodel, andd.DefaultJaccardModel)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	var items []pairs.Item
	merges := 0
	switch {
	case f.clusters != "":
		items, _, err = pairs.LoadClusters(ctx, f.clusters)
	case f.csv != "":
		items, _, err = pairs.LoadCSV(ctx, f.csv)
	case len(f.spam) > 0:
		items, merges, err = pairs.SpamAssassinSet(ctx, f.spam, f.ham, pairs.SpamAssassinOptions{
			Bases: f.bases, Ham: f.hamN, Seed: f.seed, Natural: f.natural,
			Synth: pairs.SynthOptions{Copies: f.copies, Seed: f.seed},
		})
	default:
		return errors.New("compare: give --spam (and --ham), --clusters or --csv")
	}
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	if f.clusters != "" || f.csv != "" {
		if len(f.negatives) > 0 {
			neg, err := pairs.ReadAll(ctx, f.negatives, -1)
			if err != nil {
				return fmt.Errorf("compare: %w", err)
			}
			items = append(items, neg...)
		}
	}
	st := pairs.Describe(items)
	fmt.Fprintf(stdout, "%d messages, %d campaigns, %d unrelated; %d pairs, %d near-duplicate", st.Messages, st.Clusters, st.Singletons, st.Pairs, st.Positives)
	if merges > 0 {
		fmt.Fprintf(stdout, " (%d natural near-duplicate merges)", merges)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout)
	var bar *progressbar.ProgressBar
	stage := ""
	pp, err := pairs.Prepare(ctx, items, pairs.Options{Lexicon: lex, Cosine: cm, Jaccard: jm, Methods: f.methods,
		Progress: func(s string, done, total int) {
			if s != stage {
				if bar != nil {
					bar.Finish()
				}
				stage = s
				bar = anddBar(f.quiet, total, s)
			}
			bar.Set(done)
		}})
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	rows := pp.Compare()
	if bar != nil {
		bar.Finish()
	}
	if err := pairs.Markdown(stdout, rows); err != nil {
		return err
	}
	if slices.Contains(pp.Methods(), pairs.MethodANDDLSHCos) {
		at := andd.AtThreshold(pp.Scores(pairs.MethodANDDLSHCos), pp.Labels(), cm.Threshold)
		fmt.Fprintf(stdout, "\nANDD-LSH-Cos at the model's threshold %.3f (what the daemon uses): F1 %.3f, precision %.3f, recall %.3f\n",
			cm.Threshold, at.F1, at.Precision, at.Recall)
	}
	if len(f.bands) > 0 {
		var cfgs []pairs.BandConfig
		for _, s := range f.bands {
			var c pairs.BandConfig
			if _, err := fmt.Sscanf(s, "%dx%d", &c.Bands, &c.Bits); err != nil {
				return fmt.Errorf("compare: --bands %q: want BxR", s)
			}
			cfgs = append(cfgs, c)
		}
		brows, err := pp.Bands(cm.Threshold, cfgs)
		if err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		fmt.Fprintln(stdout)
		return pairs.BandsMarkdown(stdout, cm.Threshold, brows)
	}
	return nil
}
