package eval

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/optimize"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Calibration of the match probability (internal/campaign, calibration.go).
//
// Labelled pairs (message, campaign) are what the engine's lookup finds:
// per seed, the reported share of the usable spam (one reporter each) and
// a mistaken reporter's share of the legitimate mail are reported into a
// fresh store; then spamgen copies of every reported spam (each kind and
// strength of the adversarial table) and every other message of the corpus
// are inspected (campaign.Checker.Inspect: every campaign the lookup finds,
// matched or not, with the model's inputs). A pair is positive when the
// message is a copy of one of the campaign's reported messages, or a
// corpus message whose cosine over unique terms with one of them is at
// least PositiveCosine; negative when that cosine is below
// NegativeCosine; pairs in between are left out. Positives and negatives
// weigh the same in total, so the model's probability is the posterior at
// even prior odds that a campaign the lookup found is the message's.

// CalibrationOptions configure the pairs and the fit. Zero values select
// the defaults.
type CalibrationOptions struct {
	// FitSeeds are the seeds the model is fitted on, HeldOut those it is
	// measured on. Defaults 1, 2, 3 and 4, 5.
	FitSeeds, HeldOut []uint64
	// Kinds and Strengths are the randomizations of the positive copies.
	// Defaults: every spamgen kind; 0.05, 0.1, 0.2, 0.3 (the adversarial
	// table's).
	Kinds     []spamgen.Kind
	Strengths []float64
	// ReportShare is the share of the usable spam reported, HamShare the
	// share of the legitimate mail the mistaken reporter reports. Defaults
	// 0.1 and 0.1.
	ReportShare, HamShare float64
	// PositiveCosine and NegativeCosine label the corpus pairs. Defaults
	// 0.9 (the ground truth's near-duplicates) and 0.7.
	PositiveCosine, NegativeCosine float64
	// L2 is the ridge penalty per pair weight. Default 1e-4.
	L2 float64
	// PriorOdds is the total weight of the positive pairs over that of
	// the negative ones: the prior odds, before its measurements, that a
	// campaign the lookup found is the message's. Default 1.
	PriorOdds float64
	// ConfirmedPriorOdds is PriorOdds for the weights of confirmed
	// campaigns (fitted against reported spam only). Default PriorOdds.
	ConfirmedPriorOdds float64
	// Accuracy carries the engine options, lexicon, model, workers, temp
	// dir and logger.
	Accuracy AccuracyOptions
}

func (o *CalibrationOptions) defaults() error {
	if err := o.Accuracy.defaults(); err != nil {
		return err
	}
	if len(o.FitSeeds) == 0 {
		o.FitSeeds = []uint64{1, 2, 3}
	}
	if len(o.HeldOut) == 0 {
		o.HeldOut = []uint64{4, 5}
	}
	if len(o.Kinds) == 0 {
		o.Kinds = spamgen.AllKinds()
	}
	if len(o.Strengths) == 0 {
		o.Strengths = []float64{0.05, 0.1, 0.2, 0.3}
	}
	if o.ReportShare <= 0 || o.ReportShare > 1 {
		o.ReportShare = 0.1
	}
	if o.HamShare <= 0 || o.HamShare > 1 {
		o.HamShare = 0.1
	}
	if o.PositiveCosine <= 0 {
		o.PositiveCosine = 0.9
	}
	if o.NegativeCosine <= 0 {
		o.NegativeCosine = 0.7
	}
	if o.L2 <= 0 {
		o.L2 = 1e-4
	}
	if o.PriorOdds <= 0 {
		o.PriorOdds = 1
	}
	if o.ConfirmedPriorOdds <= 0 {
		o.ConfirmedPriorOdds = o.PriorOdds
	}
	return nil
}

// CalPair is one labelled (message, campaign) pair.
type CalPair struct {
	Inputs   campaign.MatchInputs `json:"inputs"`
	Positive bool                 `json:"positive"`
	// Source says where the message came from: "copy/<kind>" (a spamgen
	// copy), "spam" or "ham" (a corpus message); Against the class of the
	// campaign's reported messages ("spam", "ham").
	Source  string  `json:"source"`
	Against string  `json:"against"`
	Cosine  float64 `json:"cosine"` // best cosine with the campaign's reported messages
	Seed    uint64  `json:"seed"`
	Weight  float64 `json:"weight"`
}

// CalibrationPairs builds the labelled pairs of one seed.
func CalibrationPairs(ctx context.Context, c *Corpus, seed uint64, o CalibrationOptions) ([]CalPair, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	ao := o.Accuracy
	e, err := reportedSplit(c, seed, o.ReportShare)
	if err != nil {
		return nil, err
	}
	var hams []int
	for i := range c.Docs {
		if c.Docs[i].Class == Ham {
			hams = append(hams, i)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x63616c6962726174))
	rng.Shuffle(len(hams), func(i, j int) { hams[i], hams[j] = hams[j], hams[i] })
	reportedHam := hams[:int(math.Round(o.HamShare*float64(len(hams))))]

	dir, err := os.MkdirTemp(ao.TempDir, "nddmilter-calib-")
	if err != nil {
		return nil, fmt.Errorf("temp store: %w", err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(dir, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	eng, err := campaign.New(st, ao.Lexicon, ao.Model, ao.Engine, nil)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	members := map[store.CampaignID][]int{}
	reported := make([]bool, len(c.Docs))
	report := func(i int, reporter string) error {
		out, err := eng.Ingester.Report(ctx, c.Docs[i].Raw, store.KindSpam, reporter)
		if err != nil {
			return fmt.Errorf("report %s: %w", c.Docs[i].Path, err)
		}
		reported[i] = true
		if out.Campaign == 0 {
			return nil
		}
		for _, m := range out.Merged {
			members[out.Campaign] = append(members[out.Campaign], members[m]...)
			delete(members, m)
		}
		members[out.Campaign] = append(members[out.Campaign], i)
		return nil
	}
	for n, q := range e.queries {
		if err := report(q, fmt.Sprintf("user%d@eval.example", n)); err != nil {
			return nil, err
		}
	}
	for _, h := range reportedHam {
		if err := report(h, "mistaken@eval.example"); err != nil {
			return nil, err
		}
	}
	classOf := func(id store.CampaignID) string {
		for _, m := range members[id] {
			if c.Docs[m].Class == Spam {
				return "spam"
			}
		}
		return "ham"
	}
	type item struct {
		raw      []byte
		terms    []string
		origin   int // the reported message it is a copy of, -1 for a corpus message
		kind     spamgen.Kind
		strength float64
		source   string
	}
	var items []item
	words, paras := legitText(c)
	for _, q := range e.queries {
		for _, k := range o.Kinds {
			for _, s := range o.Strengths {
				items = append(items, item{origin: q, source: "copy/" + string(k), kind: k, strength: s})
			}
		}
	}
	for i := range c.Docs {
		if !reported[i] {
			items = append(items, item{origin: -1, source: c.Docs[i].Class.String(), raw: c.Docs[i].Raw, terms: c.Docs[i].Terms})
		}
	}
	var mu sync.Mutex
	var firstErr error
	var pairs []CalPair
	parallel(len(items), ao.Workers, func(k int) {
		it := items[k]
		if it.origin >= 0 {
			raw, err := spamgen.Mutate(c.Docs[it.origin].Raw, spamgen.Options{Kinds: []spamgen.Kind{it.kind}, Strength: it.strength,
				Seed: copySeed(seed, c.Docs[it.origin].Path, it.kind, it.strength, 0), Words: words, Paragraphs: paras})
			if err != nil {
				return
			}
			it.raw = raw
			it.terms = mime.UniqueTerms(mime.Tokenize(mime.Parse(raw, ao.Engine.Mime), ao.Engine.Tokens))
		}
		insp, err := eng.Checker.Inspect(ctx, it.raw)
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
			return
		}
		var out []CalPair
		for _, in := range insp {
			p := CalPair{Inputs: in.Inputs, Source: it.source, Against: classOf(in.Campaign), Seed: seed}
			for _, m := range members[in.Campaign] {
				p.Cosine = max(p.Cosine, Cosine(it.terms, c.Docs[m].Terms))
				if m == it.origin {
					p.Positive = true
				}
			}
			switch {
			case p.Positive:
			case p.Cosine >= o.PositiveCosine:
				p.Positive = true
			case p.Cosine >= o.NegativeCosine:
				continue // neither
			}
			out = append(out, p)
		}
		mu.Lock()
		pairs = append(pairs, out...)
		mu.Unlock()
	})
	if firstErr != nil {
		return nil, firstErr
	}
	slices.SortStableFunc(pairs, func(a, b CalPair) int { return strings.Compare(a.Source, b.Source) })
	balance(pairs, o.PriorOdds)
	return pairs, nil
}

// balance weighs the pairs so that the positives' total weight is odds
// times the negatives' (the two summing to the number of pairs).
func balance(pairs []CalPair, odds float64) {
	var pos, neg float64
	for _, p := range pairs {
		if p.Positive {
			pos++
		} else {
			neg++
		}
	}
	n := float64(len(pairs))
	wp, wn := n*odds/(1+odds), n/(1+odds)
	for i := range pairs {
		if pairs[i].Positive {
			pairs[i].Weight = wp / pos
		} else {
			pairs[i].Weight = wn / neg
		}
	}
}

// FamilyFeatures are the features of each family's own model (and of the
// joint one), by name (campaign.MatchFeatureNames).
var FamilyFeatures = []struct {
	Name     string
	Features []string
}{
	{"I-Match bags", []string{"bias", "imatch", "imatch_log"}},
	{"ANDD", []string{"bias", "andd", "andd_measured", "andd_verified"}},
	{"q-grams", []string{"bias", "qgram", "qgram_measured"}},
	{"short-message keys", []string{"bias", "short", "lead"}},
	{"joint (shipped form)", campaign.MatchFeatureNames()},
}

// FitLogistic fits the weights of the features named use (the others stay
// 0) to pairs by weighted logistic regression with an L2 penalty l2 ×
// the total weight on every weight but the bias (L-BFGS). The weights are
// in the order of campaign.MatchFeatureNames.
func FitLogistic(pairs []CalPair, use []string, l2 float64) ([]float64, error) {
	names := campaign.MatchFeatureNames()
	var idx []int
	for _, u := range use {
		i := slices.Index(names, u)
		if i < 0 {
			return nil, fmt.Errorf("fit: unknown feature %q", u)
		}
		idx = append(idx, i)
	}
	xs := make([][]float64, len(pairs))
	total := 0.0
	for i, p := range pairs {
		f := campaign.MatchFeatures(p.Inputs)
		xs[i] = make([]float64, len(idx))
		for j, k := range idx {
			xs[i][j] = f[k]
		}
		total += p.Weight
	}
	if total == 0 {
		return nil, fmt.Errorf("fit: no pairs")
	}
	lam := l2 * total
	fg := func(grad, w []float64) float64 {
		loss := 0.0
		if grad != nil {
			clear(grad)
		}
		for i, p := range pairs {
			z := 0.0
			for j, x := range xs[i] {
				z += w[j] * x
			}
			y := 0.0
			if p.Positive {
				y = 1
			}
			// log(1 + e^z) − y z, stably
			loss += p.Weight * (softplus(z) - y*z)
			if grad != nil {
				g := p.Weight * (sigmoid(z) - y)
				for j, x := range xs[i] {
					grad[j] += g * x
				}
			}
		}
		for j := range w {
			if use[j] == "bias" {
				continue
			}
			loss += lam / 2 * w[j] * w[j]
			if grad != nil {
				grad[j] += lam * w[j]
			}
		}
		return loss / total
	}
	prob := optimize.Problem{
		Func: func(w []float64) float64 { return fg(nil, w) },
		Grad: func(grad, w []float64) {
			fg(grad, w)
			for j := range grad {
				grad[j] /= total
			}
		},
	}
	res, err := optimize.Minimize(prob, make([]float64, len(idx)), &optimize.Settings{MajorIterations: 500, GradientThreshold: 1e-9}, &optimize.LBFGS{})
	if err != nil && res == nil {
		return nil, fmt.Errorf("fit: %w", err)
	}
	w := make([]float64, len(names))
	for j, k := range idx {
		w[k] = res.X[j]
	}
	return w, nil
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

func softplus(z float64) float64 {
	if z > 30 {
		return z
	}
	return math.Log1p(math.Exp(z))
}

// CalModel is one model's figures on the held-out pairs.
type CalModel struct {
	Name    string    `json:"name"`
	Weights []float64 `json:"weights"`
	// LogLoss and Brier are the weighted mean log loss and Brier score;
	// ECE the expected calibration error over the reliability bins.
	LogLoss float64 `json:"log_loss"`
	Brier   float64 `json:"brier"`
	ECE     float64 `json:"ece"`
	// Bins is the reliability diagram: per bin of predicted probability
	// (tenths), the weighted mean prediction and the share of positives.
	Bins []CalBin `json:"bins"`
	// TagRecall and TagFalse are the shares of the held-out positives and
	// negatives whose probability exceeds the bar a campaign with one
	// reporter needs to tag (0.8889 with the default policy).
	TagRecall float64 `json:"tag_recall"`
	TagFalse  float64 `json:"tag_false"`
}

// CalBin is one bin of a reliability diagram.
type CalBin struct {
	Lo        float64 `json:"lo"`
	Hi        float64 `json:"hi"`
	Pairs     int     `json:"pairs"`
	Predicted float64 `json:"predicted"`
	Observed  float64 `json:"observed"`
}

// tagBar is the match a campaign with one reporter needs to be tagged
// under the default policy: p = match × 0.75 > 2/3.
const tagBar = (2.0 / 3.0) / 0.75

// measureModel scores the weights w on pairs.
func measureModel(name string, w []float64, pairs []CalPair) CalModel {
	r := CalModel{Name: name, Weights: w}
	m, err := campaign.NewMatchModel(1, w, nil, "")
	if err != nil {
		// Weights the product refuses (not monotone in the estimates):
		// named as such, not measured.
		r.Name += " (refused: " + err.Error() + ")"
		return r
	}
	const nb = 10
	var bw, bp, by [nb]float64
	var bn [nb]int
	total, pos, neg, posTag, negTag := 0.0, 0.0, 0.0, 0.0, 0.0
	for _, p := range pairs {
		q := m.Probability(p.Inputs, false)
		y := 0.0
		if p.Positive {
			y = 1
		}
		qc := math.Min(math.Max(q, 1e-12), 1-1e-12)
		r.LogLoss += p.Weight * -(y*math.Log(qc) + (1-y)*math.Log(1-qc))
		r.Brier += p.Weight * (q - y) * (q - y)
		total += p.Weight
		b := min(nb-1, int(q*nb))
		bw[b] += p.Weight
		bp[b] += p.Weight * q
		by[b] += p.Weight * y
		bn[b]++
		if p.Positive {
			pos += p.Weight
			if q > tagBar {
				posTag += p.Weight
			}
		} else {
			neg += p.Weight
			if q > tagBar {
				negTag += p.Weight
			}
		}
	}
	if total == 0 {
		return r
	}
	r.LogLoss /= total
	r.Brier /= total
	for b := range nb {
		bin := CalBin{Lo: float64(b) / nb, Hi: float64(b+1) / nb, Pairs: bn[b]}
		if bw[b] > 0 {
			bin.Predicted, bin.Observed = bp[b]/bw[b], by[b]/bw[b]
			r.ECE += bw[b] / total * math.Abs(bin.Predicted-bin.Observed)
		}
		r.Bins = append(r.Bins, bin)
	}
	if pos > 0 {
		r.TagRecall = posTag / pos
	}
	if neg > 0 {
		r.TagFalse = negTag / neg
	}
	return r
}

// CalibrationResult is the outcome of RunCalibration.
type CalibrationResult struct {
	FitSeeds []uint64 `json:"fit_seeds"`
	HeldOut  []uint64 `json:"held_out"`
	// FitPairs and HeldPairs count the pairs (positives, negatives).
	FitPos  int `json:"fit_pos"`
	FitNeg  int `json:"fit_neg"`
	HeldPos int `json:"held_pos"`
	HeldNeg int `json:"held_neg"`
	// HeldNegHam counts the held-out negatives that are legitimate mail
	// found against reported legitimate mail (look-alikes).
	HeldNegHam int `json:"held_neg_ham"`
	// Models are each family's model and the joint one, fitted on the fit
	// seeds and measured on the held-out ones; Shipped is the embedded
	// model measured on the same held-out pairs.
	Models  []CalModel `json:"models"`
	Shipped *CalModel  `json:"shipped,omitempty"`
	// Confirmed is the joint model of confirmed campaigns, fitted and
	// measured on the pairs against reported spam only.
	Confirmed *CalModel `json:"confirmed,omitempty"`
	// HamAgainstSpam is the highest estimated similarity (verified ANDD
	// or q-grams) a legitimate message reached against a campaign of
	// reported spam, over every seed's pairs, and HamAgainstSpamPairs the
	// number of such pairs: the margin policy.confirmed_similarity keeps.
	HamAgainstSpam      float64 `json:"ham_against_spam"`
	HamAgainstSpamPairs int     `json:"ham_against_spam_pairs"`
	// Joint is the joint model fitted, as a model file's contents.
	Joint   *campaign.MatchModel `json:"joint,omitempty"`
	Elapsed string               `json:"elapsed"`
	// Pairs are the fit and held-out pairs (not printed).
	Pairs []CalPair `json:"-"`
}

// RunCalibration builds the pairs of the fit and held-out seeds, fits each
// family's model and the joint model on the former and measures them, and
// the shipped model, on the latter.
func RunCalibration(ctx context.Context, c *Corpus, o CalibrationOptions) (*CalibrationResult, error) {
	start := time.Now()
	if err := o.defaults(); err != nil {
		return nil, err
	}
	res := &CalibrationResult{FitSeeds: o.FitSeeds, HeldOut: o.HeldOut}
	gather := func(seeds []uint64) ([]CalPair, error) {
		var all []CalPair
		for _, s := range seeds {
			o.Accuracy.Log.Info("calibration pairs", "seed", s)
			ps, err := CalibrationPairs(ctx, c, s, o)
			if err != nil {
				return nil, err
			}
			all = append(all, ps...)
		}
		balance(all, o.PriorOdds)
		return all, nil
	}
	fit, err := gather(o.FitSeeds)
	if err != nil {
		return nil, err
	}
	held, err := gather(o.HeldOut)
	if err != nil {
		return nil, err
	}
	res.Pairs = append(slices.Clone(fit), held...)
	for _, p := range fit {
		if p.Positive {
			res.FitPos++
		} else {
			res.FitNeg++
		}
	}
	for _, p := range held {
		if p.Positive {
			res.HeldPos++
		} else {
			res.HeldNeg++
			if p.Source == "ham" && p.Against == "ham" {
				res.HeldNegHam++
			}
		}
	}
	for _, p := range res.Pairs {
		if p.Source == "ham" && p.Against == "spam" {
			res.HamAgainstSpamPairs++
			res.HamAgainstSpam = max(res.HamAgainstSpam, estimated(p.Inputs))
		}
	}
	for _, f := range FamilyFeatures {
		w, err := FitLogistic(fit, f.Features, o.L2)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		res.Models = append(res.Models, measureModel(f.Name, w, held))
	}
	// Confirmed campaigns: against reported spam only.
	var fitSpam, heldSpam []CalPair
	for _, p := range fit {
		if p.Against == "spam" {
			fitSpam = append(fitSpam, p)
		}
	}
	for _, p := range held {
		if p.Against == "spam" {
			heldSpam = append(heldSpam, p)
		}
	}
	balance(fitSpam, o.ConfirmedPriorOdds)
	balance(heldSpam, o.ConfirmedPriorOdds)
	wc, err := FitLogistic(fitSpam, campaign.MatchFeatureNames(), o.L2)
	if err != nil {
		return nil, fmt.Errorf("confirmed: %w", err)
	}
	conf := measureModel("joint, confirmed campaigns (against reported spam only)", wc, heldSpam)
	res.Confirmed = &conf
	joint := res.Models[len(res.Models)-1]
	res.Joint, err = campaign.NewMatchModel(1, joint.Weights, wc, "")
	if err != nil {
		return nil, err
	}
	if m, err := campaign.DefaultMatchModel(); err == nil {
		w := make([]float64, len(campaign.MatchFeatureNames()))
		for i, n := range campaign.MatchFeatureNames() {
			w[i] = m.Weights[n]
		}
		s := measureModel(fmt.Sprintf("shipped (v%d)", m.Version), w, held)
		res.Shipped = &s
	}
	res.Elapsed = time.Since(start).Round(time.Second).String()
	return res, nil
}

// estimated is the estimated similarity of a pair as the confirmed-copy
// rule reads it: the larger of the verified ANDD and the q-gram estimate.
func estimated(in campaign.MatchInputs) float64 {
	s := max(in.QGram, 0)
	if in.ANDDVerified {
		s = max(s, in.ANDD)
	}
	return s
}

// WriteMarkdown prints the calibration tables.
func (r *CalibrationResult) WriteMarkdown(w io.Writer) { r.writeMarkdown(w, true) }

// writeMarkdown prints the calibration tables; detail adds the shipped
// model's reliability table (RESULTS.md draws it as a diagram).
func (r *CalibrationResult) writeMarkdown(w io.Writer, detail bool) {
	fmt.Fprintf(w, "Pairs (message, campaign) the engine's lookup finds. Per seed, 10%% of the usable spam and 10%% of the legitimate mail are reported, each by one user, into a fresh store. Positives: spamgen copies of a reported spam (every kind, strengths 0.05–0.3) and messages at cosine ≥ 0.9 to a reported one. Negatives: messages below 0.7, look-alikes of reported legitimate mail included. Fitted on seeds %v (%d positive, %d negative pairs), measured on seeds %v (%d positive, %d negative, %d of them look-alikes), both classes weighing the same. ECE: expected calibration error over tenths of p. Tag bar: the share of pairs whose p exceeds the %.4f a one-reporter campaign needs for tag.\n\n",
		r.FitSeeds, r.FitPos, r.FitNeg, r.HeldOut, r.HeldPos, r.HeldNeg, r.HeldNegHam, tagBar)
	fmt.Fprintln(w, "| model | log loss | Brier | ECE | positives over the tag bar | negatives over the tag bar |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
	rows := slices.Clone(r.Models)
	if r.Confirmed != nil {
		rows = append(rows, *r.Confirmed)
	}
	if r.Shipped != nil {
		rows = append(rows, *r.Shipped)
	}
	for _, m := range rows {
		fmt.Fprintf(w, "| %s | %.4f | %.4f | %.4f | %.4f | %.4f |\n", m.Name, m.LogLoss, m.Brier, m.ECE, m.TagRecall, m.TagFalse)
	}
	fmt.Fprintln(w)
	if r.HamAgainstSpamPairs > 0 {
		fmt.Fprintf(w, "Legitimate messages against reported spam (%d pairs, every seed): the highest estimated similarity (verified ANDD or q-grams) is %.3f; a confirmed campaign's copies from %.2f on are at least quarantined (`policy.confirmed_similarity`).\n\n",
			r.HamAgainstSpamPairs, r.HamAgainstSpam, campaign.DefaultPolicy().ConfirmedSimilarity)
	}
	if r.Shipped != nil && detail {
		fmt.Fprintf(w, "Reliability of the shipped model on the held-out pairs:\n\n")
		fmt.Fprintln(w, "| p | pairs | mean p | share positive |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
		for _, b := range r.Shipped.Bins {
			if b.Pairs == 0 {
				continue
			}
			fmt.Fprintf(w, "| %.1f–%.1f | %d | %.3f | %.3f |\n", b.Lo, b.Hi, b.Pairs, b.Predicted, b.Observed)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Run time: %s.\n", r.Elapsed)
}

// reliabilityPlot draws the reliability diagram of the shipped model and
// of each family's model.
func (r *CalibrationResult) reliabilityPlot() string {
	diag := Series{Name: "perfect calibration"}
	for i := 0; i <= 10; i++ {
		diag.X = append(diag.X, float64(i)/10)
		diag.Y = append(diag.Y, float64(i)/10)
	}
	series := []Series{diag}
	rows := r.Models
	if r.Shipped != nil {
		rows = append(slices.Clone(rows), *r.Shipped)
	}
	for _, m := range rows {
		s := Series{Name: m.Name}
		for _, b := range m.Bins {
			if b.Pairs >= 5 {
				s.X = append(s.X, b.Predicted)
				s.Y = append(s.Y, b.Observed)
			}
		}
		series = append(series, s)
	}
	return LinePlot("Reliability of the match probability (held-out seeds)", "predicted P(copy of the campaign)", "observed share of copies", 0, 1, series)
}
