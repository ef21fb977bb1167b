// Package train drives the learning of the ANDD term-weighting model from
// labeled campaigns (`nddlab train`) and the pairwise comparison of
// near-duplicate detection methods (`nddlab train compare`). It belongs
// to the measurement lab: the daemon never links it.
package train

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

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/anddtrain"
	"github.com/nddmilter/nddmilter/internal/lab/eval/pairs"
	"github.com/nddmilter/nddmilter/internal/mime"
)

// Options configure Train (the flags of `nddlab train`, whose defaults
// are documented there).
type Options struct {
	// Clusters, CSV or Synthesize (with From) select the labeled
	// campaigns; Negatives adds unrelated messages.
	Clusters    string
	CSV         string
	Negatives   []string
	Synthesize  int
	From        []string
	Copies      int
	Link        bool
	SynthNeg    int
	Strengths   []float64
	VarySubject float64
	// MaxFPR and MinRecall place the model's threshold on the held-out pairs.
	MaxFPR    float64
	MinRecall float64
	// Out is the model file written.
	Out      string
	Seed     int64
	Pairs    int
	L2       float64
	Scale    float64
	Sim      string
	Holdout  float64
	MaxIter  int
	Features []string
	NGram    int
	// Lexicon and BaseModel are files; "" for the embedded ones. LSH
	// overrides the base model's LSH parameters where positive
	// (MinHashes where ≥ 0).
	Lexicon   string
	BaseModel string
	LSH       andd.LSH
	Quiet     bool
}

func loadLexicon(path string) (*imatchbag.Lexicon, error) {
	if path == "" {
		return imatchbag.DefaultLexicon()
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lexicon: %w", err)
	}
	return imatchbag.ReadLexiconFile(fh)
}

func loadModel(path string, def func() (*andd.Model, error)) (*andd.Model, error) {
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

func newBar(quiet bool, max int, what string) *progressbar.ProgressBar {
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

// looksLikeMail reports whether raw starts with a header field.
func looksLikeMail(raw []byte) bool {
	line, _, _ := bytes.Cut(raw, []byte("\n"))
	name, _, ok := bytes.Cut(line, []byte(":"))
	if !ok || len(name) == 0 || len(name) > 40 {
		return bytes.HasPrefix(raw, []byte("From "))
	}
	return !bytes.ContainsAny(name, " \t")
}

// trainingItems gathers the labeled campaigns and negatives.
func trainingItems(ctx context.Context, o *Options) ([]pairs.Item, error) {
	var items []pairs.Item
	var err error
	sources := 0
	if o.Clusters != "" {
		sources++
		if items, _, err = pairs.LoadClusters(ctx, o.Clusters); err != nil {
			return nil, err
		}
	}
	if o.CSV != "" {
		sources++
		if items, _, err = pairs.LoadCSV(ctx, o.CSV); err != nil {
			return nil, err
		}
	}
	if o.Synthesize > 0 {
		sources++
		if items, err = synthesize(ctx, o); err != nil {
			return nil, err
		}
	}
	if sources != 1 {
		return nil, errors.New("give exactly one of --clusters, --csv and --synthesize")
	}
	if len(o.Negatives) > 0 {
		neg, err := pairs.ReadAll(ctx, o.Negatives, -1)
		if err != nil {
			return nil, err
		}
		items = append(items, neg...)
	}
	return items, nil
}

// synthesize builds o.Synthesize campaigns from documents of o.From, and
// takes unused documents as unrelated mail.
func synthesize(ctx context.Context, o *Options) ([]pairs.Item, error) {
	if len(o.From) == 0 {
		return nil, errors.New("--synthesize needs --from")
	}
	docs, err := pairs.ReadAll(ctx, o.From, -1)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(uint64(o.Seed), 0xba5e))
	r.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
	n := min(o.Synthesize, len(docs))
	bases := make([]pairs.Item, 0, n)
	for _, d := range docs[:n] {
		if looksLikeMail(d.Raw) {
			bases = append(bases, d)
		} else {
			bases = append(bases, pairs.BaseFromText(d.Name, string(d.Raw), o.Link))
		}
	}
	// Appended innocent text comes from the documents not used as bases.
	var paras []string
	for _, d := range docs[n:min(len(docs), n+200)] {
		if !looksLikeMail(d.Raw) {
			if p := strings.TrimSpace(string(d.Raw)); len(p) > 200 {
				paras = append(paras, p[:min(len(p), 1500)])
			}
		}
	}
	items := pairs.Synthesize(bases, 0, pairs.SynthOptions{Copies: o.Copies, Seed: uint64(o.Seed), Paragraphs: paras, Strengths: o.Strengths, VarySubject: o.VarySubject})
	// Unused documents are unrelated mail.
	for _, d := range docs[n:min(len(docs), n+o.SynthNeg)] {
		if !looksLikeMail(d.Raw) {
			d = pairs.BaseFromText(d.Name, string(d.Raw), false)
		}
		d.Cluster = -1
		items = append(items, d)
	}
	return items, nil
}

// splitHoldout assigns whole campaigns (and single negatives) to the
// held-out set with probability share.
func splitHoldout(items []pairs.Item, share float64, seed int64) (train, test []pairs.Item) {
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

// baseModel reads the base model and applies the LSH overrides.
func baseModel(o *Options) (*andd.Model, error) {
	base, err := loadModel(o.BaseModel, andd.DefaultModel)
	if err != nil {
		return nil, err
	}
	if o.LSH.Bits > 0 {
		base.LSH.Bits = o.LSH.Bits
	}
	if o.LSH.MinHashes >= 0 {
		base.LSH.MinHashes = o.LSH.MinHashes
	}
	if o.LSH.Bands > 0 {
		base.LSH.Bands = o.LSH.Bands
	}
	if o.LSH.BandBits > 0 {
		base.LSH.BandBits = o.LSH.BandBits
	}
	if err := base.Validate(); err != nil {
		return nil, err
	}
	return base, nil
}

// Train learns the model from the labeled campaigns, evaluates it on the
// held-out share, places its threshold and writes it to o.Out. The
// figures go to stdout, the progress to stderr.
func Train(ctx context.Context, o Options, stdout io.Writer) error {
	if o.Out == "" {
		return errors.New("train: -o MODEL is required")
	}
	if o.Holdout < 0 || o.Holdout >= 1 {
		return errors.New("train: --holdout must be in [0, 1)")
	}
	lex, err := loadLexicon(o.Lexicon)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	base, err := baseModel(&o)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	items, err := trainingItems(ctx, &o)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	train, test := splitHoldout(items, o.Holdout, o.Seed)
	st := pairs.Describe(train)
	fmt.Fprintf(os.Stderr, "train: %d messages (%d campaigns, %d unrelated) for training, %d held out\n",
		st.Messages, st.Clusters, st.Singletons, len(test))
	m, err := fit(ctx, &o, train, lex, base, stdout)
	if err != nil {
		return err
	}
	m.Training.Clusters = st.Clusters
	m.Training.Source = o.source()
	if len(test) > 1 && pairs.Describe(test).Positives > 0 {
		if err := placeThreshold(ctx, &o, m, test, lex, stdout); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		return err
	}
	if err := os.WriteFile(o.Out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s\n", o.Out)
	return nil
}

// fit parses the training messages and runs the optimizer.
func fit(ctx context.Context, o *Options, train []pairs.Item, lex *imatchbag.Lexicon, base *andd.Model, stdout io.Writer) (*andd.Model, error) {
	bar := newBar(o.Quiet, len(train), "parse")
	docs := make([]anddtrain.Doc, len(train))
	for i, it := range train {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		doc := mime.Parse(it.Raw, mime.Options{})
		docs[i] = anddtrain.Doc{Doc: doc, Toks: mime.Tokenize(doc, mime.TokenOptions{}), Cluster: it.Cluster}
		bar.Add(1)
	}
	bar.Finish()

	bar = newBar(o.Quiet, o.MaxIter, "l-bfgs")
	m, res, err := anddtrain.Train(docs, lex, base, anddtrain.Options{
		Seed: o.Seed, Pairs: o.Pairs, L2: o.L2, Scale: o.Scale, MaxIter: o.MaxIter,
		Features: o.Features, Similarity: o.Sim, NGram: o.NGram,
		Progress: func(iter int, loss float64) {
			bar.Describe(fmt.Sprintf("l-bfgs loss %.5f", loss))
			bar.Set(iter)
		},
	})
	bar.Finish()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "loss %.5f -> %.5f after %d iterations (%s)\n", res.InitLoss, res.Loss, res.Iterations, res.Status)
	for i, name := range m.Features {
		fmt.Fprintf(stdout, "  λ[%-8s] = %+.4f\n", name, m.Lambda[i])
	}
	return m, nil
}

// placeThreshold compares the methods on the held-out pairs and sets the
// model's threshold: the held-out Max F1 point of ANDD-LSH-Cos, raised for
// precision within o.MinRecall and o.MaxFPR.
func placeThreshold(ctx context.Context, o *Options, m *andd.Model, test []pairs.Item, lex *imatchbag.Lexicon, stdout io.Writer) error {
	jm := m
	if o.Sim == andd.SimCosine {
		jm = m.Clone()
		jm.Similarity = andd.SimJaccard
	}
	methods := []string{pairs.MethodANDDRawCos, pairs.MethodANDDLSHCos}
	if o.Sim == andd.SimJaccard {
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
	raiseThreshold(o, m, pp.Scores(pairs.MethodANDDLSHCos), pp.Labels(), stdout)
	return nil
}

// raiseThreshold raises the model's threshold for precision: blocking
// mail is costlier than missing a copy.
func raiseThreshold(o *Options, m *andd.Model, scores []float64, labels []bool, stdout io.Writer) {
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
	if k := int(math.Ceil(o.MinRecall*float64(len(pos)))) - 1; k >= 0 && k < len(pos) && pos[k]-1e-6 > m.Threshold {
		m.Threshold = pos[k] - 1e-6
		fmt.Fprintf(stdout, "threshold raised to %.3f: keeps %.0f%% of the held-out near-duplicate pairs\n", m.Threshold, 100*o.MinRecall)
	}
	// Then at most --max-fpr of the unrelated pairs above it.
	slices.Sort(neg)
	slices.Reverse(neg)
	if k := int(o.MaxFPR * float64(len(neg))); k < len(neg) && neg[k]+1e-6 > m.Threshold {
		m.Threshold = min(neg[k]+1e-6, 0.999)
		fmt.Fprintf(stdout, "threshold raised to %.3f: at most %g of the unrelated held-out pairs above it\n", m.Threshold, o.MaxFPR)
	}
}

// source describes the training data, recorded in the model.
func (o *Options) source() string {
	switch {
	case o.Clusters != "":
		return "clusters " + o.Clusters
	case o.CSV != "":
		return "csv " + o.CSV
	default:
		return fmt.Sprintf("synthesized %d campaigns × %d copies", o.Synthesize, o.Copies)
	}
}
