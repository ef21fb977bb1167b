package peers

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/lab/stats"
)

// frac formats k of n as "k/n (p%)".
func frac(k, n int) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%d/%d (%.1f%%)", k, n, 100*float64(k)/float64(n))
}

// count returns how many i in idx have flags[i] (all i when idx is nil).
func count(flags []bool, keep func(i int) bool) (k, n int) {
	for i, f := range flags {
		if keep != nil && !keep(i) {
			continue
		}
		n++
		if f {
			k++
		}
	}
	return k, n
}

// WriteDetection writes the detection tables (Markdown) for the results of
// the tools run on s.
func WriteDetection(w io.Writer, s *Setup, rs []*Result) {
	o := s.Opts
	nspam := 0
	for i := range s.Corpus {
		if s.Corpus[i].IsSpam() {
			nspam++
		}
	}
	fmt.Fprintf(w, "Corpus: %d messages (%d spam); reported: %d spam (%.0f%%, seed %d); checked: %d messages and %d randomized copies.\n\n",
		len(s.Corpus), nspam, len(s.Split.Reported), 100*o.Share, o.Seed, len(s.Split.Checked), len(s.Copies))

	header := func(first string) {
		fmt.Fprintf(w, "| %s |", first)
		for _, r := range rs {
			fmt.Fprintf(w, " %s |", r.Name)
		}
		fmt.Fprintf(w, "\n|---|")
		for range rs {
			fmt.Fprintf(w, "---|")
		}
		fmt.Fprintln(w)
	}
	row := func(label string, keep func(i int) bool, flags func(r *Result) []bool) {
		fmt.Fprintf(w, "| %s |", label)
		for _, r := range rs {
			k, n := count(flags(r), keep)
			fmt.Fprintf(w, " %s |", frac(k, n))
		}
		fmt.Fprintln(w)
	}
	checked := func(r *Result) []bool { return r.Checked }
	class := func(c string) func(int) bool {
		return func(i int) bool { return s.Corpus[s.Split.Checked[i]].Class == c }
	}
	header("checked messages flagged")
	row("spam", class(ClassSpam), checked)
	row("easy ham (false positives)", class(ClassEasyHam), checked)
	row("hard ham (false positives)", class(ClassHardHam), checked)
	row(fmt.Sprintf("near-duplicates of a reported spam (cosine ≥ %.2f)", o.NearDupCosine),
		func(i int) bool { return s.BestCosine[i] >= o.NearDupCosine }, checked)
	row(fmt.Sprintf("spam not near-duplicate of a report (cosine < %.2f)", o.NearDupCosine),
		func(i int) bool {
			return s.BestCosine[i] < o.NearDupCosine && s.Corpus[s.Split.Checked[i]].IsSpam()
		}, checked)
	fmt.Fprintf(w, "| reports the tool could use |")
	for _, r := range rs {
		fmt.Fprintf(w, " %s |", frac(r.Learned, r.Learned+r.Lost))
	}
	fmt.Fprintf(w, "\n| errors |")
	for _, r := range rs {
		fmt.Fprintf(w, " %d |", r.Errors)
	}
	fmt.Fprintf(w, "\n\n")

	// Randomized copies, per kind.
	fmt.Fprintf(w, "| randomized copies flagged, by kind | median cosine to source |")
	for _, r := range rs {
		fmt.Fprintf(w, " %s |", r.Name)
	}
	fmt.Fprintf(w, "\n|---|---|")
	for range rs {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintln(w)
	copies := func(r *Result) []bool { return r.Copies }
	for _, kind := range append(o.Kinds, "") {
		keep := func(i int) bool { return kind == "" || s.Copies[i].Kind == kind }
		var cos []float64
		for i := range s.Copies {
			if keep(i) {
				cos = append(cos, s.Copies[i].Cosine)
			}
		}
		label := string(kind)
		if kind == "" {
			label = "**all kinds**"
		}
		fmt.Fprintf(w, "| %s | %.2f |", label, stats.Median(cos))
		for _, r := range rs {
			k, n := count(copies(r), keep)
			fmt.Fprintf(w, " %s |", frac(k, n))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// WriteSpeedIntro writes the sentence that explains the speed tables.
func WriteSpeedIntro(w io.Writer, s *Setup) {
	o := s.Opts
	fmt.Fprintf(w, "Medians of %d runs (each run's values in brackets); throughput with %d concurrent clients, latency with one client over %d messages; every tool on the same machine, one at a time.\n\n",
		o.SpeedRuns, o.Parallel, o.LatencySample)
}

// WriteSpeed writes a speed table (Markdown): medians over the speed runs,
// every run's value, and with two tools the ratio of the second to the first.
func WriteSpeed(w io.Writer, s *Setup, rs []*Result) {
	o := s.Opts
	fmt.Fprintf(w, "|  |")
	for _, r := range rs {
		fmt.Fprintf(w, " %s |", r.Name)
	}
	if len(rs) == 2 {
		fmt.Fprintf(w, " %s ÷ %s |", rs[1].Name, rs[0].Name)
	}
	fmt.Fprintf(w, "\n|---|")
	for range rs {
		fmt.Fprintf(w, "---|")
	}
	if len(rs) == 2 {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintln(w)
	type metric struct {
		label  string
		get    func(Speed) float64
		format func(float64) string
		higher bool // higher is better
	}
	rateFmt := func(x float64) string { return fmt.Sprintf("%.0f", x) }
	msFmt := func(x float64) string { return fmt.Sprintf("%.2f ms", x) }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	metrics := []metric{
		{fmt.Sprintf("learn: reports/s (%d clients, %d reports)", o.Parallel, len(s.Split.Reported)), func(v Speed) float64 { return v.LearnRate }, rateFmt, true},
		{fmt.Sprintf("check: messages/s (%d clients, %d messages)", o.Parallel, min(o.SpeedSample, len(s.Split.Checked))), func(v Speed) float64 { return v.CheckRate }, rateFmt, true},
		{"check latency, median (1 client)", func(v Speed) float64 { return ms(v.P50) }, msFmt, false},
		{"check latency, 99th percentile (1 client)", func(v Speed) float64 { return ms(v.P99) }, msFmt, false},
		{"check latency, slowest message (1 client)", func(v Speed) float64 { return ms(v.Max) }, msFmt, false},
	}
	for _, m := range metrics {
		fmt.Fprintf(w, "| %s |", m.label)
		meds := make([]float64, len(rs))
		for k, r := range rs {
			vals := make([]float64, len(r.Speeds))
			strs := make([]string, len(r.Speeds))
			for j, v := range r.Speeds {
				vals[j] = m.get(v)
				strs[j] = strings.TrimSuffix(m.format(vals[j]), " ms")
			}
			meds[k] = stats.Median(vals)
			fmt.Fprintf(w, " %s [%s] |", m.format(meds[k]), strings.Join(strs, ", "))
		}
		if len(rs) == 2 {
			fmt.Fprintf(w, " %s |", ratio(meds[1], meds[0], m.higher))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "| detection pass: messages/s (%d clients, %d messages) |", o.Parallel, len(s.Split.Checked)+len(s.Copies))
	for _, r := range rs {
		fmt.Fprintf(w, " %.0f |", r.Detection.CheckRate)
	}
	if len(rs) == 2 {
		fmt.Fprintf(w, " %s |", ratio(rs[1].Detection.CheckRate, rs[0].Detection.CheckRate, true))
	}
	fmt.Fprintf(w, "\n\n")
	for _, r := range rs {
		if r.Slowest != "" {
			fmt.Fprintf(w, "Slowest message for %s (last run): %s, %d bytes.\n", r.Name, filepath.Base(r.Slowest), r.SlowestBytes)
		}
	}
	fmt.Fprintln(w)
}

// ratio formats a/b, saying which way is better.
func ratio(a, b float64, higherBetter bool) string {
	if a == 0 || b == 0 {
		return "–"
	}
	x := a / b
	better := (x > 1) == higherBetter
	switch {
	case x == 1:
		return "1.0×"
	case better && higherBetter:
		return fmt.Sprintf("%.1f× (faster)", x)
	case better:
		return fmt.Sprintf("%.2f× (faster)", x)
	case higherBetter:
		return fmt.Sprintf("%.2f× (slower)", x)
	default:
		return fmt.Sprintf("%.1f× (slower)", x)
	}
}

// WriteFalsePositives lists, per tool, the ham messages it flagged (at
// most limit per tool), with their best cosine to a reported spam.
func WriteFalsePositives(w io.Writer, s *Setup, rs []*Result, limit int) {
	listed := false
	for _, r := range rs {
		var lines []string
		for k, i := range s.Split.Checked {
			if r.Checked[k] && !s.Corpus[i].IsSpam() {
				lines = append(lines, fmt.Sprintf("%s (best cosine to a report %.2f)", filepath.Base(s.Corpus[i].Path), s.BestCosine[k]))
			}
		}
		if len(lines) == 0 {
			continue
		}
		if !listed {
			fmt.Fprintf(w, "Ham flagged:\n\n")
			listed = true
		}
		more := ""
		if len(lines) > limit {
			more = fmt.Sprintf(", … %d more", len(lines)-limit)
			lines = lines[:limit]
		}
		fmt.Fprintf(w, "- %s: %s%s\n", r.Name, strings.Join(lines, ", "), more)
	}
	if listed {
		fmt.Fprintln(w)
	}
}
