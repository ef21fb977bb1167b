package campaign

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/shortsig"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Costs holds one number per acting action (accepting has no false-positive
// cost and no benefit).
type Costs struct {
	Tag        float64 `yaml:"tag" json:"tag"`
	Quarantine float64 `yaml:"quarantine" json:"quarantine"`
	Reject     float64 `yaml:"reject" json:"reject"`
}

func (c Costs) of(a action.Action) float64 {
	switch a {
	case action.Tag:
		return c.Tag
	case action.Quarantine:
		return c.Quarantine
	case action.Reject:
		return c.Reject
	}
	return 0
}

// Policy holds the costs and benefits of the decision model and the
// parameters of the probability estimate (see docs/POLICY.md). Zero values
// select the documented defaults; negative values are invalid.
//
// The engine estimates p = P(message is campaign spam | evidence) as
//
//	p = match × reputation
//
// where match is the confidence that the message is a copy of the campaign
// (from which signatures matched and how strongly) and reputation is the
// probability that the campaign is spam (from its distinct spam and
// not-spam reporters and its volume, as odds multiplied by one likelihood
// ratio per reporter). It then picks the action with the highest expected
// utility EU(a) = p·Benefit(a) − (1−p)·CostFP(a), accept having EU =
// −p·MissCost.
type Policy struct {
	// CostFP is the cost of applying an action to a legitimate message,
	// in units of "one spam let through". Defaults: reject 100 (the cost of
	// the I-Match paper's utility, eq. 5), quarantine 10, tag 1.
	CostFP Costs `yaml:"cost_fp" json:"cost_fp"`
	// Benefit is the gain of applying an action to a campaign spam.
	// Defaults: reject 1, quarantine 0.9 (quarantined spam still costs a
	// look), tag 0.5 (tagged spam still reaches a folder).
	Benefit Costs `yaml:"benefit" json:"benefit"`
	// MissCost is the cost of accepting a campaign spam. Default 0 (the
	// benefits already count what is gained by acting).
	MissCost float64 `yaml:"miss_cost" json:"miss_cost"`

	// PriorOdds are the odds that a campaign is spam before counting its
	// reporters beyond the first one (who created it). Default 3.
	PriorOdds float64 `yaml:"prior_odds" json:"prior_odds"`
	// SpamReporterLR multiplies the odds for each distinct spam reporter.
	// Default 5.
	SpamReporterLR float64 `yaml:"spam_reporter_lr" json:"spam_reporter_lr"`
	// HamReporterLR divides the odds for each distinct not-spam reporter.
	// Default 25 (a "not junk" click is rarer and weightier).
	HamReporterLR float64 `yaml:"ham_reporter_lr" json:"ham_reporter_lr"`
	// VolumeLR multiplies the odds for each factor of ten of messages seen,
	// as weak evidence (a large campaign nobody calls legitimate), up to
	// VolumeMaxLR. Defaults 1.25 and 2.
	VolumeLR    float64 `yaml:"volume_lr" json:"volume_lr"`
	VolumeMaxLR float64 `yaml:"volume_max_lr" json:"volume_max_lr"`

	// MatchModel chooses how match is estimated: "calibrated" weighs
	// every family's measurements at once with the embedded logistic model
	// fitted on labelled pairs (calibration.go, `nddlab train
	// calibration`); "confidences" combines the hand-set confidences below
	// (noisy-or of I-Match and the better of ANDD and q-grams, short keys
	// by maximum), the model of earlier versions; "calibrated-confirmed"
	// (the default) is "confidences" except for the copies of a confirmed
	// campaign (ConfirmedReporters), read with the calibrated model's
	// weights for confirmed campaigns.
	MatchModel string `yaml:"match_model" json:"match_model"`

	// IMatchConfidence is the confidence that a message is a copy of a
	// campaign given that one of its I-Match signatures (one bag) matched;
	// matched bags combine as independent evidence: 1 − Π(1 − c).
	// Default 0.99.
	IMatchConfidence float64 `yaml:"imatch_confidence" json:"imatch_confidence"`
	// ANDDConfidenceAtThreshold and ANDDConfidenceMax give the confidence
	// of a verified ANDD match at the model's similarity threshold and at
	// similarity 1; in between, the log-odds of the confidence are linear
	// in the estimated cosine. Defaults 0.7 and 0.95: with the shipped
	// model, ANDD-only matches also hit mailing-list ham (docs/POLICY.md),
	// so a match found by ANDD alone can at most tag; I-Match agreement is
	// needed to quarantine or reject.
	ANDDConfidenceAtThreshold float64 `yaml:"andd_confidence_at_threshold" json:"andd_confidence_at_threshold"`
	ANDDConfidenceMax         float64 `yaml:"andd_confidence_max" json:"andd_confidence_max"`
	// QGramConfidenceAtThreshold and QGramConfidenceMax are the same for a
	// q-gram match (internal/qgram) at its threshold (the estimated docq
	// of qgram.SketchOptions.Threshold) and at similarity 1. A q-gram match
	// and an ANDD match measure the same closeness of texts: the larger of
	// the two confidences counts, not both. Defaults 0.92 and 0.95: the
	// threshold sits above what ham reaches against reported spam
	// (docs/design/qgram.md), so a q-gram match alone tags a
	// copy of a campaign with one reporter; like an ANDD match alone, it
	// never does more than tag, and with I-Match it adds no more than ANDD
	// does.
	QGramConfidenceAtThreshold float64 `yaml:"qgram_confidence_at_threshold" json:"qgram_confidence_at_threshold"`
	QGramConfidenceMax         float64 `yaml:"qgram_confidence_max" json:"qgram_confidence_max"`

	// ShortConfidence is the confidence that a message is a copy of a
	// campaign given that one of its short-message keys (all, media, links
	// or body; internal/shortsig) matched, and LeadConfidence the same for
	// a lead key (same subject and leading text, which padded copies
	// keep). Short-message keys hash the same content as the other
	// families, so they do not add to them: match is the larger of the
	// I-Match and ANDD confidence and the best short key's. Defaults 0.98
	// and 0.9: a match on short-message keys alone can tag, and quarantine
	// once the campaign has 3 spam reporters (a lead key alone: tag only);
	// it never rejects (docs/POLICY.md).
	ShortConfidence float64 `yaml:"short_confidence" json:"short_confidence"`
	LeadConfidence  float64 `yaml:"lead_confidence" json:"lead_confidence"`

	// RejectMinReporters is the number of distinct spam reporters a
	// campaign needs before its messages may be rejected, whatever p says;
	// below it the next best action applies. Default 3.
	RejectMinReporters int `yaml:"reject_min_reporters" json:"reject_min_reporters"`
	// MaxAction caps the action (e.g. "quarantine" on a server that must
	// never reject). Default reject.
	MaxAction string `yaml:"max_action" json:"max_action"`

	// GraymailReporters: a checked message with signs of legitimate bulk
	// mail or of a conversation (graymail.go: it answers another message
	// or says it is a list's mail, or came through a mailing list, was
	// sent to a list's posting address or from a sender domain that
	// delivered at least GraymailHamMessages accepted messages) that
	// matches a campaign with fewer than GraymailReporters distinct spam
	// reporters is accepted unless it is a near-copy of the reported text
	// (nearCopy: q-gram similarity, or the ANDD estimate when it has no
	// q-gram sketch, at least GraymailSimilarity with an I-Match
	// signature in common, GraymailSimilarity + 0.1 without), and is then
	// at most tagged. Defaults 5, 3 and 0.7. GraymailHistoryOnly drops
	// the signs of headers alone (In-Reply-To, References, Precedence:
	// list; default false: they are signs, so that a first day's
	// mistaken reports do not tag a thread's other posts).
	GraymailReporters   int     `yaml:"graymail_reporters" json:"graymail_reporters"`
	GraymailHamMessages int64   `yaml:"graymail_ham_messages" json:"graymail_ham_messages"`
	GraymailSimilarity  float64 `yaml:"graymail_similarity" json:"graymail_similarity"`
	GraymailHistoryOnly bool    `yaml:"graymail_history_only" json:"graymail_history_only"`
	// AuthservIDs are the authserv-ids of this server's own MTA, whose
	// Authentication-Results fields the graymail signs trust (the MTA
	// must remove fields with those ids that arrive from outside). When
	// set, a list or sender domain is a sign only for a message with a
	// passing DKIM or DMARC result of one of them for a domain of the
	// same organization: a forged From or List-Id is then no sign.
	// Default none: the domains count as they are written.
	AuthservIDs []string `yaml:"authserv_ids" json:"authserv_ids"`

	// ConfirmedReporters: a campaign with at least this many distinct
	// spam reporters and no not-spam reporter is confirmed spam, and the
	// calibrated model reads its copies' match with the weights fitted
	// against reported spam only (MatchModel.Confirmed). Default 5.
	ConfirmedReporters int `yaml:"confirmed_reporters" json:"confirmed_reporters"`
	// ConfirmedSimilarity: a copy of a confirmed campaign whose spam
	// reporters' records also weigh at least ConfirmedReporters, matched
	// with an estimated similarity (the verified ANDD or q-gram estimate)
	// of at least ConfirmedSimilarity, is at least quarantined when p
	// alone would only tag it (not with MatchModel "confidences"). No
	// legitimate message of the corpus comes near it against reported
	// spam (`nddlab eval calibration` prints the highest estimate they
	// reach). Default 0.8; above 1 turns it off.
	ConfirmedSimilarity float64 `yaml:"confirmed_similarity" json:"confirmed_similarity"`

	// RevokeHamReporters and RevokeRatio: a not-spam report revokes a
	// campaign (it is never acted on again) when its distinct not-spam
	// reporters are at least RevokeHamReporters and at least RevokeRatio ×
	// its distinct spam reporters. Defaults 2 and 0.5.
	RevokeHamReporters int     `yaml:"revoke_ham_reporters" json:"revoke_ham_reporters"`
	RevokeRatio        float64 `yaml:"revoke_ratio" json:"revoke_ratio"`

	// TrustHistory, TrustPrior and TrustMax weigh each spam reporter by
	// its record (trust.go): of its TrustHistory latest campaigns, those
	// reported as spam and allowed or revoked since contradict it, those
	// confirmed (ConfirmedReporters) agree; its weight is (k + agreed) /
	// (k + agreed + contradicted) × (1 + (TrustMax − 1) × agreed /
	// (agreed + k)), k = TrustPrior, 1 without a record. Defaults 100, 4
	// and 1.5; a negative TrustHistory turns reporter trust off.
	TrustHistory int     `yaml:"trust_history" json:"trust_history"`
	TrustPrior   float64 `yaml:"trust_prior" json:"trust_prior"`
	TrustMax     float64 `yaml:"trust_max" json:"trust_max"`

	// model is the calibrated match model (MatchModel "calibrated").
	model *MatchModel `yaml:"-" json:"-"`
}

// Match models (Policy.MatchModel).
const (
	MatchCalibrated  = "calibrated"
	MatchConfidences = "confidences"
	// MatchConfirmed: the hand-set confidences, except for the copies of
	// confirmed campaigns, read with the calibrated model's weights for
	// them.
	MatchConfirmed = "calibrated-confirmed"
)

// DefaultPolicy returns the policy with every default filled in.
func DefaultPolicy() Policy { return Policy{}.WithDefaults() }

// WithDefaults returns p with zero fields replaced by their defaults.
func (p Policy) WithDefaults() Policy {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&p.CostFP.Reject, 100)
	def(&p.CostFP.Quarantine, 10)
	def(&p.CostFP.Tag, 1)
	def(&p.Benefit.Reject, 1)
	def(&p.Benefit.Quarantine, 0.9)
	def(&p.Benefit.Tag, 0.5)
	def(&p.PriorOdds, 3)
	def(&p.SpamReporterLR, 5)
	def(&p.HamReporterLR, 25)
	def(&p.VolumeLR, 1.25)
	def(&p.VolumeMaxLR, 2)
	def(&p.IMatchConfidence, 0.99)
	def(&p.ANDDConfidenceAtThreshold, 0.7)
	def(&p.ANDDConfidenceMax, 0.95)
	def(&p.QGramConfidenceAtThreshold, 0.92)
	def(&p.QGramConfidenceMax, 0.95)
	def(&p.ShortConfidence, 0.98)
	def(&p.LeadConfidence, 0.9)
	def(&p.RevokeRatio, 0.5)
	if p.RejectMinReporters == 0 {
		p.RejectMinReporters = 3
	}
	if p.RevokeHamReporters == 0 {
		p.RevokeHamReporters = 2
	}
	if p.GraymailReporters == 0 {
		p.GraymailReporters = 5
	}
	if p.ConfirmedReporters == 0 {
		p.ConfirmedReporters = 5
	}
	if p.GraymailHamMessages == 0 {
		p.GraymailHamMessages = 3
	}
	def(&p.GraymailSimilarity, 0.7)
	def(&p.ConfirmedSimilarity, 0.8)
	if p.AuthservIDs == nil {
		p.AuthservIDs = []string{}
	} else {
		ids := make([]string, len(p.AuthservIDs))
		for i, id := range p.AuthservIDs {
			ids[i] = strings.ToLower(strings.TrimSpace(id))
		}
		p.AuthservIDs = ids
	}
	if p.TrustHistory == 0 {
		p.TrustHistory = 100
	}
	def(&p.TrustPrior, 4)
	def(&p.TrustMax, 1.5)
	if p.MaxAction == "" {
		p.MaxAction = action.Reject.String()
	}
	if p.MatchModel == "" {
		p.MatchModel = MatchConfirmed
	}
	if p.MatchModel != MatchConfidences && p.model == nil {
		p.model, _ = DefaultMatchModel() // Validate reports the error
	}
	return p
}

// WithMatchModel returns p with the calibrated match model m instead of
// the embedded one (a model fitted by `nddlab train calibration`).
func (p Policy) WithMatchModel(m *MatchModel) Policy {
	p.MatchModel, p.model = MatchCalibrated, m
	return p
}

// Validate reports invalid settings (after defaults are applied).
func (p Policy) Validate() error {
	p = p.WithDefaults()
	var errs []error
	nonneg := func(name string, v float64) {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("policy.%s must be a finite number ≥ 0, got %v", name, v))
		}
	}
	nonneg("cost_fp.tag", p.CostFP.Tag)
	nonneg("cost_fp.quarantine", p.CostFP.Quarantine)
	nonneg("cost_fp.reject", p.CostFP.Reject)
	nonneg("benefit.tag", p.Benefit.Tag)
	nonneg("benefit.quarantine", p.Benefit.Quarantine)
	nonneg("benefit.reject", p.Benefit.Reject)
	nonneg("miss_cost", p.MissCost)
	nonneg("prior_odds", p.PriorOdds)
	nonneg("revoke_ratio", p.RevokeRatio)
	nonneg("trust_prior", p.TrustPrior)
	if v := p.ConfirmedSimilarity; v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		errs = append(errs, fmt.Errorf("policy.confirmed_similarity must be a similarity in (0, 1] (0 or unset: 0.8), or above 1 to turn the rule off, got %v", v))
	}
	lr := func(name string, v float64) {
		if !(v >= 1) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("policy.%s must be a finite number ≥ 1, got %v", name, v))
		}
	}
	lr("spam_reporter_lr", p.SpamReporterLR)
	lr("ham_reporter_lr", p.HamReporterLR)
	lr("volume_lr", p.VolumeLR)
	lr("volume_max_lr", p.VolumeMaxLR)
	lr("trust_max", p.TrustMax)
	prob := func(name string, v float64) {
		if !(v > 0 && v < 1) {
			errs = append(errs, fmt.Errorf("policy.%s must be in (0, 1), got %v", name, v))
		}
	}
	prob("imatch_confidence", p.IMatchConfidence)
	prob("andd_confidence_at_threshold", p.ANDDConfidenceAtThreshold)
	prob("andd_confidence_max", p.ANDDConfidenceMax)
	prob("qgram_confidence_at_threshold", p.QGramConfidenceAtThreshold)
	prob("qgram_confidence_max", p.QGramConfidenceMax)
	prob("short_confidence", p.ShortConfidence)
	prob("lead_confidence", p.LeadConfidence)
	prob("graymail_similarity", p.GraymailSimilarity)
	if p.ANDDConfidenceMax < p.ANDDConfidenceAtThreshold {
		errs = append(errs, errors.New("policy.andd_confidence_max must be ≥ policy.andd_confidence_at_threshold"))
	}
	if p.QGramConfidenceMax < p.QGramConfidenceAtThreshold {
		errs = append(errs, errors.New("policy.qgram_confidence_max must be ≥ policy.qgram_confidence_at_threshold"))
	}
	if p.RejectMinReporters < 0 {
		errs = append(errs, fmt.Errorf("policy.reject_min_reporters must be ≥ 0, got %d", p.RejectMinReporters))
	}
	if p.RevokeHamReporters < 0 {
		errs = append(errs, fmt.Errorf("policy.revoke_ham_reporters must be ≥ 0, got %d", p.RevokeHamReporters))
	}
	if p.ConfirmedReporters < 0 {
		errs = append(errs, fmt.Errorf("policy.confirmed_reporters must be ≥ 0, got %d", p.ConfirmedReporters))
	}
	if p.GraymailReporters < 0 {
		errs = append(errs, fmt.Errorf("policy.graymail_reporters must be ≥ 0, got %d", p.GraymailReporters))
	}
	if p.GraymailHamMessages < 0 {
		errs = append(errs, fmt.Errorf("policy.graymail_ham_messages must be ≥ 0, got %d", p.GraymailHamMessages))
	}
	for _, id := range p.AuthservIDs {
		if id == "" || strings.ContainsAny(id, " \t;()\"") {
			errs = append(errs, fmt.Errorf("policy.authserv_ids: %q is not an authserv-id (a host name)", id))
		}
	}
	if _, err := action.Parse(p.MaxAction); err != nil {
		errs = append(errs, fmt.Errorf("policy.max_action: %w", err))
	}
	switch p.MatchModel {
	case MatchCalibrated, MatchConfirmed:
		if p.model == nil {
			_, err := DefaultMatchModel()
			errs = append(errs, fmt.Errorf("policy.match_model: %w", err))
		}
	case MatchConfidences:
	default:
		errs = append(errs, fmt.Errorf("policy.match_model must be %q, %q or %q, got %q", MatchConfirmed, MatchCalibrated, MatchConfidences, p.MatchModel))
	}
	return errors.Join(errs...)
}

// EU is the expected utility of applying a to a message that is campaign
// spam with probability prob.
func (p Policy) EU(a action.Action, prob float64) float64 {
	p = p.WithDefaults()
	return p.eu(a, prob)
}

// eu is EU for a policy with defaults applied.
func (p *Policy) eu(a action.Action, prob float64) float64 {
	if a == action.Accept {
		return -prob * p.MissCost
	}
	return prob*p.Benefit.of(a) - (1-prob)*p.CostFP.of(a)
}

// Threshold is one action's operating range: the action maximizes
// expected utility for From < p ≤ To (From = To = 1 when it never does).
type Threshold struct {
	Action   action.Action
	From, To float64
}

// Thresholds returns the ranges of p in which each action is the best one,
// mildest first, ignoring RejectMinReporters and MaxAction. They are the
// crossing points of the expected-utility lines (see docs/POLICY.md).
func (p Policy) Thresholds() []Threshold {
	p = p.WithDefaults()
	// EU lines are linear in prob; scan for the upper envelope.
	best := func(prob float64) action.Action {
		b := action.Accept
		for a := action.Tag; a <= action.Reject; a++ {
			if p.eu(a, prob) > p.eu(b, prob)+1e-15 {
				b = a
			}
		}
		return b
	}
	out := make([]Threshold, 0, 4)
	for _, a := range action.Verdicts() {
		out = append(out, Threshold{Action: a, From: 1, To: 1})
	}
	// Crossing points: bisect between the actions chosen at each end.
	var walk func(lo, hi float64, alo, ahi action.Action)
	walk = func(lo, hi float64, alo, ahi action.Action) {
		if alo == ahi {
			return
		}
		if hi-lo < 1e-9 {
			out[alo].To = lo
			out[ahi].From = lo
			return
		}
		mid := (lo + hi) / 2
		am := best(mid)
		walk(lo, mid, alo, am)
		walk(mid, hi, am, ahi)
	}
	a0, a1 := best(0), best(1)
	out[a0].From = 0
	out[a1].To = 1
	walk(0, 1, a0, a1)
	for i := range out {
		if out[i].From > out[i].To {
			out[i].From = out[i].To
		}
		if math.Abs(out[i].From-math.Round(out[i].From*1e6)/1e6) < 1e-8 {
			out[i].From = math.Round(out[i].From*1e6) / 1e6
		}
	}
	return out
}

// Reputation is the probability that a campaign is spam given its
// reporters and volume: odds = PriorOdds × SpamReporterLR^(spam−1) ×
// HamReporterLR^(−ham) × min(VolumeLR^log10(1+messages), VolumeMaxLR).
// The first spam reporter is what created the campaign; PriorOdds already
// stands for it.
func (p Policy) Reputation(c *store.Campaign) float64 {
	p = p.WithDefaults()
	return p.reputation(c)
}

func (p *Policy) reputation(c *store.Campaign) float64 { return p.weightedReputation(c, nil) }

// weightedReputation is Reputation with each spam reporter counting its
// weight (trust.go), the heaviest as the first; nil weights count 1 each.
func (p *Policy) weightedReputation(c *store.Campaign, w reporterWeights) float64 {
	spam := c.SpamReporters
	if spam < 1 {
		spam = 1
	}
	var logOdds float64
	if w == nil {
		logOdds = math.Log(p.PriorOdds) + float64(spam-1)*math.Log(p.SpamReporterLR)
	} else {
		for i, x := range w {
			if i == 0 {
				logOdds += x * math.Log(p.PriorOdds)
			} else {
				logOdds += x * math.Log(p.SpamReporterLR)
			}
		}
		if rest := spam - int64(len(w)); rest > 0 {
			logOdds += float64(rest) * math.Log(p.SpamReporterLR)
		}
	}
	logOdds -= float64(c.HamReporters) * math.Log(p.HamReporterLR)
	if c.Messages > 0 {
		v := math.Log10(1+float64(c.Messages)) * math.Log(p.VolumeLR)
		logOdds += math.Min(v, math.Log(p.VolumeMaxLR))
	}
	return 1 / (1 + math.Exp(-logOdds))
}

// MatchConfidence is the confidence that a message is a copy of a campaign
// given the evidence that matched it: 1 − Π(1 − c_i) over the matched
// I-Match bags and the larger of the confidences of the best verified
// ANDD similarity and of the best q-gram similarity (both measure the
// same thing, closeness of texts, and are not counted twice), or the
// confidence of the best matched short-message key when that is larger;
// threshold is the ANDD model's similarity threshold. A similarity at its
// threshold has confidence ANDDConfidenceAtThreshold (QGramConfidence…
// for q-grams), a similarity of 1 ANDDConfidenceMax, logit-linear in
// between.
func (p Policy) MatchConfidence(ev []Evidence, threshold float64) float64 {
	p = p.WithDefaults()
	return p.matchConfidence(ev, threshold)
}

func (p *Policy) matchConfidence(ev []Evidence, threshold float64) float64 {
	miss := 1.0
	bestSim := -1.0
	bestQ, qThreshold := -1.0, 1.0
	short := 0.0
	for _, e := range ev {
		switch e.Family {
		case FamilyQGram:
			if e.Similarity > bestQ {
				bestQ, qThreshold = e.Similarity, e.Threshold
			}
		case FamilyIMatch:
			miss *= 1 - p.IMatchConfidence
		case FamilyANDD:
			if e.Similarity > bestSim {
				bestSim = e.Similarity
			}
		case FamilyShort:
			c := p.ShortConfidence
			if e.Kind == shortsig.KindLead.String() {
				c = p.LeadConfidence
			}
			short = math.Max(short, c)
		}
	}
	c := math.Max(similarityConfidence(bestSim, threshold, p.ANDDConfidenceAtThreshold, p.ANDDConfidenceMax),
		similarityConfidence(bestQ, qThreshold, p.QGramConfidenceAtThreshold, p.QGramConfidenceMax))
	miss *= 1 - c
	// Short-message keys do not add to the other families.
	return math.Max(1-miss, short)
}

// Decision is the policy's answer for one campaign match: the action, the
// probability and each of its factors, and the rule that chose the action.
// Rule is its one-line explanation, rendered from the other fields by
// Explain.
type Decision struct {
	Action     action.Action    `json:"action"`
	P          float64          `json:"p"`          // match × reputation
	Match      float64          `json:"match"`      // confidence that the message is a copy
	Reputation float64          `json:"reputation"` // probability that the campaign is spam
	Campaign   store.CampaignID `json:"campaign"`
	// State is the campaign's administrative state: an allowed or revoked
	// campaign is never acted on, whatever P.
	State store.State `json:"state"`
	// The reputation's factors.
	SpamReporters int64 `json:"spam_reporters"`
	HamReporters  int64 `json:"ham_reporters"`
	Messages      int64 `json:"messages"`
	// The match's factors: I-Match bags matched, best verified ANDD
	// similarity (-1 when none) and the model's threshold.
	IMatchBags    int     `json:"imatch_bags"`
	ANDD          float64 `json:"andd"`
	ANDDThreshold float64 `json:"andd_threshold"`
	// QGram is the best q-gram similarity (estimated docq, -1 when none)
	// and QGramThreshold the threshold it was held to.
	QGram          float64 `json:"qgram"`
	QGramThreshold float64 `json:"qgram_threshold,omitempty"`
	// Short are the kinds of the short-message keys matched ("all",
	// "media", "links", "body", "lead"), in order of evidence.
	Short []string `json:"short,omitempty"`
	// Inputs are the measurements of the message against the campaign
	// (what the calibrated match model weighs and the graymail near-copy
	// test reads) and MatchModel the version of the model match came from
	// (0 when it came from the hand-set confidences).
	Inputs     *MatchInputs `json:"inputs,omitempty"`
	MatchModel int          `json:"match_model,omitempty"`
	// Confirmed is set when the campaign is confirmed (at least
	// policy.confirmed_reporters spam reporters, no not-spam reporter)
	// and the model's weights for confirmed campaigns were used.
	Confirmed bool `json:"confirmed,omitempty"`
	// Threshold is the probability above which the policy picks Action
	// (for accept, the tag threshold P stayed at or below), and CostFP the
	// false-positive cost that set it (cost_fp of Action; cost_fp.tag for
	// accept).
	Threshold float64 `json:"threshold"`
	CostFP    float64 `json:"cost_fp"`
	// RejectMinReporters is set when the policy chose reject but the
	// campaign had fewer spam reporters than policy.reject_min_reporters:
	// the next best action applies.
	RejectMinReporters int `json:"reject_min_reporters,omitempty"`
	// MaxAction is set when policy.max_action capped the action.
	MaxAction *action.Action `json:"max_action,omitempty"`
	// SingleReporter is set when the campaign has one spam reporter and
	// p asked for more than tag: one account never raises a campaign above
	// tag.
	SingleReporter bool `json:"single_reporter,omitempty"`
	// ConfirmedClose is set when the campaign is confirmed and the copy's
	// estimated similarity (given) reached policy.confirmed_similarity,
	// raising tag to quarantine.
	ConfirmedClose      float64 `json:"confirmed_close,omitempty"`
	confirmedSimilarity float64
	// SpamWeight is the sum of the spam reporters' weights when their
	// records make it differ from their number (reporter trust, trust.go).
	SpamWeight float64 `json:"spam_weight,omitempty"`
	// Graymail is set when the message's signs of legitimate bulk mail
	// held the action back (graymail.go), GraymailLimit to what.
	Graymail      *Graymail      `json:"graymail,omitempty"`
	GraymailLimit *action.Action `json:"graymail_limit,omitempty"`
	// graymailReporters is the policy's GraymailReporters and
	// graymailInputs the measurements the near-copy test read, for Explain.
	graymailReporters int
	graymailInputs    MatchInputs
	// PooledWith lists the other campaigns whose reporters were counted
	// (each reporter once) with the campaign's: the message matched them
	// too and they are near-duplicates of it (pool.go).
	PooledWith []store.CampaignID `json:"pooled_with,omitempty"`
	// Rule is Explain(): "tag: p=0.7500 > 0.6667 (cost_fp.tag=1); p = …".
	Rule string `json:"rule"`
}

// Decide chooses the action for a message matching campaign c with the
// given evidence. Allowed and revoked campaigns are never acted on.
func (p Policy) Decide(c *store.Campaign, ev []Evidence, threshold float64) Decision {
	p = p.WithDefaults()
	d := p.decide(c, ev, inputsOf(verifiedOnly(ev, threshold)), nil, nil, threshold, p.Thresholds())
	d.Rule = d.Explain()
	return d
}

// verifiedOnly returns ev without the ANDD and q-gram evidence below its
// threshold (threshold for ANDD, the evidence's own for q-grams): no
// evidence for the hand-set confidences either, and what the engine never
// passes on as evidence.
func verifiedOnly(ev []Evidence, threshold float64) []Evidence {
	out := make([]Evidence, 0, len(ev))
	for _, e := range ev {
		if e.Family == FamilyANDD && e.Similarity < threshold || e.Family == FamilyQGram && e.Similarity < e.Threshold {
			continue
		}
		out = append(out, e)
	}
	return out
}

// match is the match probability of the evidence ev, whose measurements
// are in: the calibrated model's, or the hand-set confidences'.
func (p *Policy) match(ev []Evidence, in MatchInputs, confirmed bool, threshold float64) (float64, int) {
	switch {
	case p.model != nil && p.MatchModel == MatchCalibrated:
		return p.model.Probability(in, confirmed), p.model.Version
	case p.model != nil && p.MatchModel == MatchConfirmed && confirmed:
		// Never below the hand-set confidences: the model reads the
		// measurements a copy has, the confidences the signatures.
		c, m := p.matchConfidence(ev, threshold), p.model.Probability(in, true)
		if m > c {
			return m, p.model.Version
		}
		return c, 0
	}
	return p.matchConfidence(ev, threshold), 0
}

// decide is Decide for a policy with defaults applied and its thresholds,
// without rendering Rule (only the chosen campaign's is needed).
func (p *Policy) decide(c *store.Campaign, ev []Evidence, in MatchInputs, gray *Graymail, w reporterWeights, threshold float64, th []Threshold) Decision {
	d := Decision{
		Reputation: p.weightedReputation(c, w),
		Campaign:   c.ID, State: c.State,
		SpamReporters: c.SpamReporters, HamReporters: c.HamReporters, Messages: c.Messages,
		ANDDThreshold: threshold,
	}
	confirmed := c.State == store.StateActive && c.SpamReporters >= int64(p.ConfirmedReporters) && c.HamReporters == 0
	if w != nil {
		d.SpamWeight = math.Round(w.sum(c.SpamReporters)*1000) / 1000
	}
	d.Match, d.MatchModel = p.match(ev, in, confirmed, threshold)
	d.Inputs = &in
	if d.MatchModel > 0 {
		d.Confirmed = confirmed && len(p.model.Confirmed) > 0
	}
	d.IMatchBags, d.ANDD, d.Short = evidenceFactors(ev)
	d.QGram, d.QGramThreshold = qgramFactor(ev)
	d.P = d.Match * d.Reputation
	if c.State == store.StateAllowed || c.State == store.StateRevoked {
		return d
	}
	maxA, err := action.Parse(p.MaxAction)
	if err != nil {
		maxA = action.Reject
	}
	best, bestEU := action.Accept, p.eu(action.Accept, d.P)
	for a := action.Tag; a <= action.Reject; a++ {
		if eu := p.eu(a, d.P); eu > bestEU+1e-12 {
			best, bestEU = a, eu
		}
	}
	if best == action.Reject && c.SpamReporters < int64(p.RejectMinReporters) {
		d.RejectMinReporters = p.RejectMinReporters
		best = p.bestBelow(action.Reject, d.P)
	}
	if best > action.Tag && c.SpamReporters <= 1 {
		d.SingleReporter = true
		best = p.bestBelow(action.Quarantine, d.P)
	}
	if best == action.Tag && confirmed && p.MatchModel != MatchConfidences && w.sum(c.SpamReporters) >= float64(p.ConfirmedReporters) {
		if sim := max(d.ANDD, d.QGram); sim >= p.ConfirmedSimilarity {
			d.ConfirmedClose, d.confirmedSimilarity = sim, p.ConfirmedSimilarity
			best = action.Quarantine
		}
	}
	if gray != nil {
		if lim := p.graymailLimit(c.SpamReporters, in); best > lim {
			d.Graymail, d.GraymailLimit, d.graymailReporters, d.graymailInputs = gray, &lim, p.GraymailReporters, in
			best = p.bestBelow(lim+1, d.P)
		}
	}
	if best > maxA {
		d.MaxAction = &maxA
		best = p.bestBelow(maxA+1, d.P)
	}
	d.Action = best
	if best == action.Accept {
		d.Threshold, d.CostFP = th[action.Tag].From, p.CostFP.Tag
	} else {
		d.Threshold, d.CostFP = th[best].From, p.CostFP.of(best)
	}
	return d
}

// Explain renders the decision in one line, e.g. "tag: p=0.7500 > 0.6667
// (cost_fp.tag=1); p = match 1.0000 (11 I-Match bags, ANDD 1.000 ≥ 0.589)
// × reputation 0.7500 (1 spam/0 not-spam reporters, 0 msgs)".
func (d *Decision) Explain() string {
	switch d.State {
	case store.StateAllowed:
		return fmt.Sprintf("accept: campaign %d is allowed by an administrator (p=%.4f ignored)", d.Campaign, d.P)
	case store.StateRevoked:
		return fmt.Sprintf("accept: campaign %d is revoked by not-spam reports (%d not-spam vs %d spam reporters; p=%.4f ignored)",
			d.Campaign, d.HamReporters, d.SpamReporters, d.P)
	}
	why := ""
	if d.RejectMinReporters > 0 {
		why = fmt.Sprintf("; reject needs %d spam reporters, has %d", d.RejectMinReporters, d.SpamReporters)
	}
	if d.SingleReporter {
		why += "; one spam reporter never raises a campaign above tag"
	}
	if d.ConfirmedClose > 0 && d.Action == action.Quarantine {
		why += fmt.Sprintf("; a copy of a confirmed campaign at estimated similarity %.3f ≥ %.2f (policy.confirmed_similarity) is at least quarantined", d.ConfirmedClose, d.confirmedSimilarity)
	}
	if d.Graymail != nil {
		if *d.GraymailLimit == action.Accept {
			why += fmt.Sprintf("; graymail (%s) reported by fewer than %d accounts stays at accept unless a near-copy, and %s is not one", d.Graymail, d.graymailReporters, d.graymailInputs)
		} else {
			why += fmt.Sprintf("; graymail (%s) reported by fewer than %d accounts is at most tagged", d.Graymail, d.graymailReporters)
		}
	}
	if d.MaxAction != nil {
		why += fmt.Sprintf("; capped by max_action=%s", *d.MaxAction)
	}
	pooled := ""
	if len(d.PooledWith) > 0 {
		pooled = fmt.Sprintf(" with campaign%s %s", plural(len(d.PooledWith)), joinIDs(d.PooledWith))
	}
	summary := d.evidenceSummary()
	if d.MatchModel > 0 && d.Inputs != nil {
		conf := ""
		if d.Confirmed {
			conf = ", confirmed campaign"
		}
		summary = fmt.Sprintf("match model v%d%s: %s", d.MatchModel, conf, d.Inputs)
	}
	weighed := ""
	if d.SpamWeight > 0 {
		weighed = fmt.Sprintf(" weighing %.2f by their records", d.SpamWeight)
	}
	basis := fmt.Sprintf("match %.4f (%s) × reputation %.4f (%d spam%s/%d not-spam reporters%s, %d msgs)",
		d.Match, summary, d.Reputation, d.SpamReporters, weighed, d.HamReporters, pooled, d.Messages)
	switch {
	case d.Action == action.Accept && why == "":
		return fmt.Sprintf("accept: p=%.4f ≤ %.4f (tag threshold, cost_fp.tag=%g); p = %s",
			d.P, d.Threshold, d.CostFP, basis)
	case d.Action == action.Accept:
		return fmt.Sprintf("accept: p=%.4f%s; p = %s", d.P, why, basis)
	case d.ConfirmedClose > 0 && d.Action == action.Quarantine:
		// p chose tag; the confirmed-copy rule raised it.
		return fmt.Sprintf("quarantine: p=%.4f%s; p = %s", d.P, why, basis)
	default:
		return fmt.Sprintf("%s: p=%.4f > %.4f (cost_fp.%s=%g)%s; p = %s",
			d.Action, d.P, d.Threshold, d.Action, d.CostFP, why, basis)
	}
}

// evidenceFactors counts the matched I-Match bags, finds the best ANDD
// similarity (-1 when none) and lists the kinds of short-message keys.
func evidenceFactors(ev []Evidence) (bags int, andd float64, short []string) {
	andd = -1
	for _, e := range ev {
		switch e.Family {
		case FamilyIMatch:
			bags++
		case FamilyANDD:
			andd = math.Max(andd, e.Similarity)
		case FamilyShort:
			if !slices.Contains(short, e.Kind) {
				short = append(short, e.Kind)
			}
		}
	}
	return bags, andd, short
}

// qgramFactor returns the best q-gram similarity (-1 when none) and its
// threshold.
func qgramFactor(ev []Evidence) (sim, threshold float64) {
	sim = -1
	for _, e := range ev {
		if e.Family == FamilyQGram && e.Similarity > sim {
			sim, threshold = e.Similarity, e.Threshold
		}
	}
	return sim, threshold
}

// evidenceSummary describes the match's evidence in a few words:
// "3 I-Match bags, ANDD 0.934 ≥ 0.589, short-message keys (all, media)".
func (d *Decision) evidenceSummary() string {
	var parts []string
	switch d.IMatchBags {
	case 0:
	case 1:
		parts = append(parts, "1 I-Match bag")
	default:
		parts = append(parts, fmt.Sprintf("%d I-Match bags", d.IMatchBags))
	}
	if d.ANDD >= 0 {
		parts = append(parts, fmt.Sprintf("ANDD %.3f ≥ %.3f", d.ANDD, d.ANDDThreshold))
	}
	if d.QGram >= 0 && d.QGramThreshold > 0 {
		parts = append(parts, fmt.Sprintf("q-grams %.3f ≥ %.3f", d.QGram, d.QGramThreshold))
	}
	switch len(d.Short) {
	case 0:
	case 1:
		parts = append(parts, "short-message key ("+d.Short[0]+")")
	default:
		parts = append(parts, "short-message keys ("+strings.Join(d.Short, ", ")+")")
	}
	if len(parts) == 0 {
		return "no evidence"
	}
	return strings.Join(parts, ", ")
}

func logit(p float64) float64 { return math.Log(p / (1 - p)) }

// similarityConfidence is the confidence of a verified similarity sim
// held to threshold: atThreshold there, atOne at 1, log-odds linear in
// between (see MatchConfidence); 0 below the threshold.
func similarityConfidence(sim, threshold, atThreshold, atOne float64) float64 {
	if sim < threshold || sim < 0 {
		return 0
	}
	frac := 1.0
	if threshold < 1 {
		frac = (sim - threshold) / (1 - threshold)
	}
	frac = math.Max(0, math.Min(1, frac))
	lo, hi := logit(atThreshold), logit(atOne)
	return 1 / (1 + math.Exp(-(lo + frac*(hi-lo))))
}

// bestBelow is the best action milder than limit.
func (p *Policy) bestBelow(limit action.Action, prob float64) action.Action {
	best, bestEU := action.Accept, p.eu(action.Accept, prob)
	for a := action.Tag; a < limit; a++ {
		if eu := p.eu(a, prob); eu > bestEU+1e-12 {
			best, bestEU = a, eu
		}
	}
	return best
}

// ShouldRevoke tells whether a campaign's not-spam evidence outweighs its
// spam reports (see Policy.RevokeHamReporters).
func (p Policy) ShouldRevoke(c *store.Campaign) bool {
	p = p.WithDefaults()
	return c.HamReporters >= int64(p.RevokeHamReporters) &&
		float64(c.HamReporters) >= p.RevokeRatio*float64(c.SpamReporters)
}

// DescribeThresholds returns one line per action telling for which p the
// policy chooses it, e.g. "reject      p > 0.9989  (cost_fp 100, benefit 1)",
// for `nddmilter config check` and logs.
func (p Policy) DescribeThresholds() []string {
	p = p.WithDefaults()
	var lines []string
	for _, t := range p.Thresholds() {
		var rng string
		switch {
		case t.From >= t.To:
			rng = "never (dominated by another action)"
		case t.From == 0:
			rng = fmt.Sprintf("p ≤ %.4f", t.To)
		case t.To >= 1:
			rng = fmt.Sprintf("p > %.4f", t.From)
		default:
			rng = fmt.Sprintf("%.4f < p ≤ %.4f", t.From, t.To)
		}
		line := fmt.Sprintf("%-10s  %s", t.Action, rng)
		if t.Action != action.Accept {
			line += fmt.Sprintf("  (cost_fp %g, benefit %g)", p.CostFP.of(t.Action), p.Benefit.of(t.Action))
		}
		lines = append(lines, line)
	}
	maxA, _ := action.Parse(p.MaxAction)
	lines = append(lines, fmt.Sprintf("reject also needs ≥ %d distinct spam reporters; actions are capped at %s", p.RejectMinReporters, maxA))
	return lines
}
