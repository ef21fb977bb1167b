package campaign

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/shortsig"
	"github.com/nddmilter/nddmilter/internal/store"
)

// The calibrated match probability (docs/POLICY.md, "The probability
// model").
//
// How sure the engine is that a message is a copy of a campaign is learnt
// from labelled pairs rather than set by hand: a logistic model over the
// measurements of every evidence family at once (I-Match bags agreeing,
// ANDD estimated cosine, q-gram estimated docq, short-message and lead
// keys), fitted by `nddlab train calibration` on randomized copies of
// reported spam (positives) and on the other messages of the corpus the
// lookup finds against reported spam and reported legitimate mail,
// mailing-list look-alikes included (negatives). Its coefficients are a
// small versioned data file embedded in the binary (data/match-model.json).
// The families are combined as evidence in one model: a loose ANDD
// estimate that the q-gram similarity does not back counts for less than
// the same estimate alone, and agreeing families count for more than the
// best of them.

// MatchInputs are the measurements of one message against one campaign
// that the match model weighs.
type MatchInputs struct {
	// Bags is the number of the message's I-Match signatures (one per
	// lexicon) that the campaign has.
	Bags int `json:"bags"`
	// ANDD is the estimated cosine of the message's ANDD sketch with the
	// campaign's closest kept sketch (or the band-agreement estimate):
	// the verified similarity when ANDD matched (ANDDVerified), else the
	// whole-message estimate below the model's threshold; -1 when not
	// measured (no sketch on either side, or a match through the
	// mailing-list footer only).
	ANDD         float64 `json:"andd"`
	ANDDVerified bool    `json:"andd_verified,omitempty"`
	// QGram is the estimated docq of the message's q-grams with the
	// campaign's closest q-gram sketch (both without mailing-list
	// footers), -1 when not measured.
	QGram float64 `json:"qgram"`
	// Short is set when a short-message key other than a lead key
	// matched (all, media, links, body), Lead when a lead key did.
	Short bool `json:"short,omitempty"`
	// Whole is set when the short-message key of the whole content (kind
	// all: media, links and text) matched. The model does not weigh it
	// apart from Short; the graymail near-copy test does.
	Whole bool `json:"whole,omitempty"`
	Lead  bool `json:"lead,omitempty"`
}

// NoInputs are the inputs of a message that nothing was measured for.
func NoInputs() MatchInputs { return MatchInputs{ANDD: -1, QGram: -1} }

// inputsOf derives the inputs from evidence alone (Policy.Decide, whose
// callers have no whole-message measurements).
func inputsOf(ev []Evidence) MatchInputs {
	in := NoInputs()
	for _, e := range ev {
		switch e.Family {
		case FamilyIMatch:
			in.Bags++
		case FamilyANDD:
			in.ANDD = math.Max(in.ANDD, e.Similarity)
			in.ANDDVerified = true
		case FamilyQGram:
			in.QGram = math.Max(in.QGram, e.Similarity)
		case FamilyShort:
			switch e.Kind {
			case shortsig.KindLead.String():
				in.Lead = true
			case shortsig.KindAll.String():
				in.Short, in.Whole = true, true
			default:
				in.Short = true
			}
		}
	}
	return in
}

// String renders the inputs for a verdict's rule: "3 I-Match bags, ANDD
// 0.812, q-grams 0.640, lead key".
func (in MatchInputs) String() string {
	var parts []string
	switch in.Bags {
	case 0:
		parts = append(parts, "no I-Match bag")
	case 1:
		parts = append(parts, "1 I-Match bag")
	default:
		parts = append(parts, fmt.Sprintf("%d I-Match bags", in.Bags))
	}
	if in.ANDD >= 0 {
		s := fmt.Sprintf("ANDD %.3f", in.ANDD)
		if !in.ANDDVerified {
			s += " (unverified)"
		}
		parts = append(parts, s)
	}
	if in.QGram >= 0 {
		parts = append(parts, fmt.Sprintf("q-grams %.3f", in.QGram))
	}
	if in.Whole {
		parts = append(parts, "short-message key (whole content)")
	} else if in.Short {
		parts = append(parts, "short-message key")
	}
	if in.Lead {
		parts = append(parts, "lead key")
	}
	return strings.Join(parts, ", ")
}

// matchFeatureNames are the features a match model may weigh, in the
// order of MatchFeatures. They are the model file's vocabulary: a model
// naming another feature is refused.
var matchFeatureNames = []string{
	"bias",
	"imatch",         // 1 when at least one bag matched
	"imatch_log",     // ln(1 + bags)
	"andd",           // the ANDD estimate, 0 when not measured
	"andd_measured",  // 1 when measured
	"andd_verified",  // 1 when it reached the model's threshold (footer check passed)
	"qgram",          // the q-gram estimate, 0 when not measured
	"qgram_measured", // 1 when measured
	"short",          // a short-message key (all, media, links, body)
	"lead",           // a lead key
	"andd_qgram",     // the product of the two estimates (0 unless both measured)
	"andd_sq",        // the ANDD estimate squared
	"qgram_sq",       // the q-gram estimate squared
	"imatch_one",     // 1 when exactly one bag matched
}

// MatchFeatureNames returns the names of the match model's features, in
// the order of MatchFeatures.
func MatchFeatureNames() []string { return append([]string(nil), matchFeatureNames...) }

// MatchFeatures returns the feature values of in, in the order of
// MatchFeatureNames: what the match model weighs and what `nddlab train
// calibration` fits it on.
func MatchFeatures(in MatchInputs) []float64 {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	andd, qg := math.Max(in.ANDD, 0), math.Max(in.QGram, 0)
	return []float64{
		1,
		b(in.Bags > 0),
		math.Log1p(float64(in.Bags)),
		andd,
		b(in.ANDD >= 0),
		b(in.ANDDVerified),
		qg,
		b(in.QGram >= 0),
		b(in.Short),
		b(in.Lead),
		andd * qg,
		andd * andd,
		qg * qg,
		b(in.Bags == 1),
	}
}

// MatchModelFormat names the match model's file format.
const MatchModelFormat = "nddmilter-match-model"

// MatchModel is the calibrated match model: the logistic regression
// P(copy of the campaign | inputs) = 1 / (1 + exp(−w·features)).
type MatchModel struct {
	Format string `json:"format"`
	// Version is the model's version, printed in verdicts ("match model
	// v2"); Format's version is the set of feature names.
	Version int `json:"version"`
	// Weights are the coefficients by feature name (MatchFeatureNames);
	// a feature not named weighs 0.
	Weights map[string]float64 `json:"weights"`
	// Confirmed are the coefficients for a confirmed campaign (many spam
	// reporters, none saying not-spam: Policy.ConfirmedReporters), fitted
	// against reported spam only: the look-alikes of legitimate mail that
	// weigh on Weights are not what a confirmed spam run's copies are
	// taken for. Empty: Weights.
	Confirmed map[string]float64 `json:"confirmed,omitempty"`
	// Fitted tells how the model was fitted (command, data, held-out
	// figures), for people.
	Fitted string `json:"fitted,omitempty"`

	w, wc []float64 // Weights and Confirmed in the order of matchFeatureNames
}

// ErrMatchModel is returned for an unusable match model file.
var ErrMatchModel = errors.New("invalid match model")

// ParseMatchModel decodes and checks a match model file.
func ParseMatchModel(b []byte) (*MatchModel, error) {
	var m MatchModel
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMatchModel, err)
	}
	if m.Format != MatchModelFormat {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrMatchModel, m.Format, MatchModelFormat)
	}
	if m.Version < 1 {
		return nil, fmt.Errorf("%w: version %d", ErrMatchModel, m.Version)
	}
	var err error
	if m.w, err = weightVector(m.Weights); err != nil {
		return nil, err
	}
	m.wc = m.w
	if len(m.Confirmed) > 0 {
		if m.wc, err = weightVector(m.Confirmed); err != nil {
			return nil, err
		}
	}
	for _, w := range [][]float64{m.w, m.wc} {
		if err := checkMonotone(w); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

// weightVector orders weights by feature name.
func weightVector(weights map[string]float64) ([]float64, error) {
	w := make([]float64, len(matchFeatureNames))
	for name, v := range weights {
		i := indexOf(matchFeatureNames, name)
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown feature %q", ErrMatchModel, name)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: weight of %q is %v", ErrMatchModel, name, v)
		}
		w[i] = v
	}
	return w, nil
}

func indexOf(names []string, n string) int {
	for i, s := range names {
		if s == n {
			return i
		}
	}
	return -1
}

// NewMatchModel returns a model with the weights w and, for confirmed
// campaigns, wc (nil: w), in the order of MatchFeatureNames.
func NewMatchModel(version int, w, wc []float64, fitted string) (*MatchModel, error) {
	named := func(w []float64) (map[string]float64, error) {
		if len(w) != len(matchFeatureNames) {
			return nil, fmt.Errorf("%w: %d weights for %d features", ErrMatchModel, len(w), len(matchFeatureNames))
		}
		out := map[string]float64{}
		for i, v := range w {
			if v != 0 {
				out[matchFeatureNames[i]] = v
			}
		}
		return out, nil
	}
	m := &MatchModel{Format: MatchModelFormat, Version: version, Fitted: fitted}
	var err error
	if m.Weights, err = named(w); err != nil {
		return nil, err
	}
	if wc != nil {
		if m.Confirmed, err = named(wc); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMatchModel, err)
	}
	return ParseMatchModel(b)
}

// maxMatch bounds the model's probability away from 1: no measurement is
// certain, and p must stay comparable with the policy's thresholds.
const maxMatch = 1 - 1e-6

// Probability is P(the message is a copy of the campaign | in), for a
// confirmed campaign when confirmed is set. A message with no evidence at
// all has probability 0. More I-Match bags in common are never weaker
// evidence than fewer: the bags' part of the sum is the largest it is for
// any number of bags up to in.Bags (a model fitted with a bonus for
// exactly one bag would otherwise rank one bag above two).
func (m *MatchModel) Probability(in MatchInputs, confirmed bool) float64 {
	if in.Bags == 0 && in.ANDD < 0 && in.QGram < 0 && !in.Short && !in.Lead {
		return 0
	}
	w := m.w
	if confirmed {
		w = m.wc
	}
	z := 0.0
	for i, x := range MatchFeatures(in) {
		if !bagFeature[i] {
			z += w[i] * x
		}
	}
	bags := 0.0
	for b := 1; b <= in.Bags; b++ {
		bags = max(bags, bagTerm(w, b))
	}
	z += bags
	return math.Min(1/(1+math.Exp(-z)), maxMatch)
}

// bagFeature marks the features of the I-Match bags in common.
var bagFeature = func() []bool {
	f := make([]bool, len(matchFeatureNames))
	for i, n := range matchFeatureNames {
		f[i] = n == "imatch" || n == "imatch_log" || n == "imatch_one"
	}
	return f
}()

// bagTerm is the bags' part of the model's sum for b bags in common.
func bagTerm(w []float64, b int) float64 {
	x := MatchFeatures(MatchInputs{Bags: b, ANDD: -1, QGram: -1})
	t := 0.0
	for i, v := range x {
		if bagFeature[i] {
			t += w[i] * v
		}
	}
	return t
}

// checkMonotone refuses weights under which a higher ANDD or q-gram
// estimate (in [0, 1]) would lower the probability: the partial
// derivatives w_x + w_xy·y + 2·w_xx·x must stay ≥ 0 over the square.
func checkMonotone(w []float64) error {
	at := func(n string) float64 { return w[indexOf(matchFeatureNames, n)] }
	for _, f := range []struct{ x, xx string }{{"andd", "andd_sq"}, {"qgram", "qgram_sq"}} {
		if at(f.x)+min(0, at("andd_qgram"))+min(0, 2*at(f.xx)) < 0 {
			return fmt.Errorf("%w: the probability falls as the %s estimate rises", ErrMatchModel, f.x)
		}
	}
	return nil
}

//go:embed data/match-model.json
var defaultMatchModel []byte

// DefaultMatchModel returns the embedded match model.
var DefaultMatchModel = sync.OnceValues(func() (*MatchModel, error) {
	m, err := ParseMatchModel(defaultMatchModel)
	if err != nil {
		return nil, fmt.Errorf("embedded match model: %w", err)
	}
	return m, nil
})

// Inspected is one campaign that the lookup of a message found, with the
// measurements the match model weighs.
type Inspected struct {
	Campaign store.CampaignID
	Inputs   MatchInputs
	// Matched is set when the campaign's evidence made it a match (the
	// policy decided on it); Probability is the policy's match.
	Matched     bool
	Probability float64
}

// Inspect signs raw and returns every campaign its lookup finds, matched
// or not, with the match model's inputs: the seam of fitting the model
// (`nddlab train calibration`). It changes nothing.
func (e *Checker) Inspect(ctx context.Context, raw []byte) ([]Inspected, error) {
	m, err := e.pipe.Sign(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	if m.Skip != pipeline.NoSkip {
		return nil, nil
	}
	res, err := e.match(ctx, m, false)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	out := make([]Inspected, 0, len(res.found))
	for _, c := range res.found {
		p, _ := e.policy.match(c.evidence, c.inputs, false, e.threshold)
		out = append(out, Inspected{Campaign: c.id, Inputs: c.inputs, Matched: len(c.evidence) > 0, Probability: p})
	}
	return out, nil
}
