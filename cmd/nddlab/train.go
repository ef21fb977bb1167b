package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/lab/eval"
	"github.com/nddmilter/nddmilter/internal/lab/eval/pairs"
	"github.com/nddmilter/nddmilter/internal/lab/train"
)

func newTrainCmd(gf *globalFlags) *cobra.Command {
	var o train.Options
	cmd := &cobra.Command{
		Use:   "train (--clusters DIR | --csv FILE | --synthesize N --from PATH...) [--negatives PATH...] -o MODEL",
		Short: "Learn ANDD term weights from labeled campaigns and write a model file",
		Long: `Learn the ANDD term-weighting model (docs/design/andd.md) from labeled campaigns:

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
			return train.Train(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Clusters, "clusters", "", "directory with one sub-directory of messages per campaign")
	fl.StringVar(&o.CSV, "csv", "", "CSV file of path,cluster lines")
	fl.StringSliceVar(&o.Negatives, "negatives", nil, "unrelated messages (files, directories, mbox, Maildir)")
	fl.IntVar(&o.Synthesize, "synthesize", 0, "number of synthetic campaigns to build from --from")
	fl.StringSliceVar(&o.From, "from", nil, "documents to synthesize campaigns from (mail or plain text)")
	fl.IntVar(&o.Copies, "copies", 4, "randomized copies per synthetic campaign")
	fl.IntVar(&o.SynthNeg, "synth-negatives", 1000, "documents of --from (not used as campaigns) added as unrelated mail")
	fl.Float64SliceVar(&o.Strengths, "strengths", []float64{0.1, 0.3, 0.5}, "randomization strengths of the synthetic copies (cycled)")
	fl.Float64Var(&o.MinRecall, "min-recall", 0.8, "raise the threshold as long as this share of held-out near-duplicate pairs stays above it (0: Max F1 point)")
	fl.Float64Var(&o.MaxFPR, "max-fpr", 1e-4, "highest share of unrelated held-out pairs allowed above the model's threshold")
	fl.Float64Var(&o.VarySubject, "vary-subject", 0.5, "share of synthetic copies whose subject line is replaced by unrelated words")
	fl.BoolVar(&o.Link, "link", true, "give plain-text synthetic campaigns a payload URL")
	fl.StringVarP(&o.Out, "output", "o", "", "model file to write (required)")
	fl.Int64Var(&o.Seed, "seed", 1, "seed of sampling, splitting and synthesis")
	fl.IntVar(&o.Pairs, "pairs", 20000, "number of preference examples (near-duplicate pair, unrelated pair)")
	fl.Float64Var(&o.L2, "l2", 0.001, "L2 regularization strength (towards the initial weights)")
	fl.Float64Var(&o.Scale, "scale", 10, "scale of the similarity difference in the logistic loss")
	fl.StringVar(&o.Sim, "sim", "cosine", "similarity to train for: cosine or jaccard")
	fl.Float64Var(&o.Holdout, "holdout", 0.2, "share of campaigns and negatives held out for evaluation")
	fl.IntVar(&o.MaxIter, "max-iter", 150, "maximum L-BFGS iterations")
	fl.StringSliceVar(&o.Features, "features", nil, "features to use (default all: "+strings.Join(andd.FeatureNames(), ",")+")")
	fl.IntVar(&o.NGram, "ngram", 1, "k of the k-gram terms")
	fl.StringVar(&o.Lexicon, "lexicon", "", "lexicon file for document frequencies (default: embedded)")
	fl.StringVar(&o.BaseModel, "base-model", "", "model whose LSH parameters to keep (default: embedded)")
	fl.IntVar(&o.LSH.Bits, "bits", 0, "cosine sketch bits m (default: the base model's)")
	fl.IntVar(&o.LSH.MinHashes, "minhashes", -1, "weighted min-hashes, 0 for none (default: the base model's)")
	fl.IntVar(&o.LSH.Bands, "bands", 0, "band keys b (default: the base model's)")
	fl.IntVar(&o.LSH.BandBits, "band-bits", 0, "bits per band r (default: the base model's)")
	fl.BoolVarP(&o.Quiet, "quiet", "q", false, "no progress bars")
	cmd.AddCommand(newTrainCompareCmd(gf), newTrainCalibrationCmd())
	return cmd
}

func newTrainCompareCmd(gf *globalFlags) *cobra.Command {
	var o train.CompareOptions
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
			return train.Compare(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&o.Spam, "spam", nil, "spam messages to build campaigns from")
	fl.StringSliceVar(&o.Ham, "ham", nil, "ham messages (unrelated mail)")
	fl.StringVar(&o.Clusters, "clusters", "", "labeled campaigns: one sub-directory per campaign")
	fl.StringVar(&o.CSV, "csv", "", "labeled campaigns: CSV of path,cluster")
	fl.StringSliceVar(&o.Negatives, "negatives", nil, "unrelated messages added to a labeled set")
	fl.IntVar(&o.Bases, "bases", 150, "spam messages turned into campaigns")
	fl.IntVar(&o.HamN, "ham-count", 300, "ham messages added")
	fl.IntVar(&o.Copies, "copies", 4, "randomized copies per campaign")
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the selection and of the copies")
	fl.Float64Var(&o.Natural, "natural", 0.9, "binary cosine above which corpus messages are merged as natural near-duplicates")
	fl.StringVar(&o.Model, "model", "", "ANDD cosine model (default: embedded)")
	fl.StringVar(&o.JaccardModel, "jaccard-model", "", "ANDD Jaccard model (default: embedded)")
	fl.StringVar(&o.Lexicon, "lexicon", "", "lexicon file (default: embedded)")
	fl.StringSliceVar(&o.Bands, "bands", nil, "also measure these band layouts BxR of the cosine sketch (e.g. 16x16,32x12), at the model's threshold")
	fl.StringSliceVar(&o.Methods, "methods", nil, "methods to run (default all: "+strings.Join(pairs.AllMethods(), ", ")+")")
	fl.BoolVarP(&o.Quiet, "quiet", "q", false, "no progress bars")
	return cmd
}

func newTrainCalibrationCmd() *cobra.Command {
	f := &evalFlags{}
	var out string
	var fitSeeds, heldOut []uint
	var l2, prior, cprior float64
	var version int
	var pairsOut string
	cmd := &cobra.Command{
		Use:   "calibration -o FILE",
		Short: "Fit the match probability (one logistic model over every evidence family) on labelled pairs of the corpus and write the model file",
		Long: `Fit P(message is a copy of the campaign | evidence), the match model the
policy weighs every family's measurements with (docs/POLICY.md, "The
probability model"), on labelled pairs of the corpus: spamgen copies of
reported spam (positives), and the other messages the engine's lookup finds
against reported spam and against a mistaken reporter's legitimate mail
(negatives below cosine 0.7; corpus pairs ≥ 0.9 are positives). Fitted on
--fit-seeds, measured on --held-out; the model file (-o) is what
internal/campaign/data/match-model.json embeds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.load()
			if err != nil {
				return err
			}
			o := eval.CalibrationOptions{L2: l2, PriorOdds: prior, ConfirmedPriorOdds: cprior, Accuracy: f.accuracyOptions()}
			for _, s := range fitSeeds {
				o.FitSeeds = append(o.FitSeeds, uint64(s))
			}
			for _, s := range heldOut {
				o.HeldOut = append(o.HeldOut, uint64(s))
			}
			r, err := eval.RunCalibration(cmd.Context(), c, o)
			if err != nil {
				return fmt.Errorf("train calibration: %w", err)
			}
			if pairsOut != "" {
				var b []byte
				for _, p := range r.Pairs {
					l, _ := json.Marshal(p)
					b = append(append(b, l...), '\n')
				}
				if err := os.WriteFile(pairsOut, b, 0o644); err != nil {
					return fmt.Errorf("write pairs: %w", err)
				}
			}
			if out != "" {
				m := r.Joint
				m.Version = version
				joint := r.Models[len(r.Models)-1]
				m.Fitted = fmt.Sprintf("nddlab %s; fitted on seeds %v (%d positive, %d negative pairs); held-out seeds %v: log loss %.4f, Brier %.4f, ECE %.4f",
					strings.Join(os.Args[1:], " "), r.FitSeeds, r.FitPos, r.FitNeg, r.HeldOut, joint.LogLoss, joint.Brier, joint.ECE)
				b, err := json.MarshalIndent(m, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
					return fmt.Errorf("write model: %w", err)
				}
			}
			return f.output(cmd.OutOrStdout(), &eval.Results{Calibration: r})
		},
	}
	f.common(cmd)
	fl := cmd.Flags()
	fl.StringVarP(&out, "output", "o", "", "model file to write (internal/campaign/data/match-model.json)")
	fl.UintSliceVar(&fitSeeds, "fit-seeds", []uint{1, 2, 3}, "seeds the model is fitted on")
	fl.UintSliceVar(&heldOut, "held-out", []uint{4, 5}, "seeds the model is measured on")
	fl.Float64Var(&l2, "l2", 1e-4, "ridge penalty per unit of pair weight")
	fl.Float64Var(&cprior, "confirmed-prior-odds", 0, "--prior-odds of the weights for confirmed campaigns (default: --prior-odds)")
	fl.Float64Var(&prior, "prior-odds", 1, "total weight of the positive pairs over the negative ones (the prior odds that a campaign the lookup found is the message's)")
	fl.IntVar(&version, "model-version", 1, "version of the model written")
	fl.StringVar(&pairsOut, "pairs", "", "also write the labelled pairs here (JSON lines)")
	return cmd
}
