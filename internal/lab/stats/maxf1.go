package stats

import (
	"cmp"
	"slices"
)

// PRF is the best operating point of a scored pair set.
type PRF struct {
	F1, Precision, Recall float64
	// Threshold: pairs scoring at least Threshold are predicted positive;
	// it lies half-way between the lowest score predicted positive and the
	// next lower score.
	Threshold float64
	// Positives is the number of positive pairs.
	Positives int
}

// MaxF1 sweeps the decision threshold over scores and returns the point of
// highest F1 (the paper's "Max F1"). Pairs of equal score are always on
// the same side of the threshold.
func MaxF1(scores []float64, labels []bool) PRF {
	n := min(len(scores), len(labels))
	idx := make([]int, n)
	pos := 0
	for i := range idx {
		idx[i] = i
		if labels[i] {
			pos++
		}
	}
	best := PRF{Positives: pos, Threshold: 1}
	if pos == 0 {
		return best
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	tp, fp := 0, 0
	for i := 0; i < n; {
		s := scores[idx[i]]
		for i < n && scores[idx[i]] == s {
			if labels[idx[i]] {
				tp++
			} else {
				fp++
			}
			i++
		}
		if tp == 0 {
			continue
		}
		p := float64(tp) / float64(tp+fp)
		r := float64(tp) / float64(pos)
		if f := 2 * p * r / (p + r); f > best.F1 {
			// The threshold goes half-way to the next lower score, the
			// middle of the gap that separates the two decisions.
			thr := s
			if i < n {
				thr = (s + scores[idx[i]]) / 2
			}
			best = PRF{F1: f, Precision: p, Recall: r, Threshold: thr, Positives: pos}
		}
	}
	return best
}

// AtThreshold returns precision, recall and F1 when pairs scoring at least
// threshold are predicted positive.
func AtThreshold(scores []float64, labels []bool, threshold float64) PRF {
	tp, fp, pos := 0, 0, 0
	for i := range min(len(scores), len(labels)) {
		if labels[i] {
			pos++
		}
		if scores[i] >= threshold {
			if labels[i] {
				tp++
			} else {
				fp++
			}
		}
	}
	r := PRF{Threshold: threshold, Positives: pos}
	if tp > 0 {
		r.Precision = float64(tp) / float64(tp+fp)
		r.Recall = float64(tp) / float64(pos)
		r.F1 = 2 * r.Precision * r.Recall / (r.Precision + r.Recall)
	}
	return r
}
