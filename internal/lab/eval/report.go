package eval

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/lab/spotsigs"
)

func pct(n, d float64) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*n/d)
}

func num(x float64) string {
	if x == float64(int64(x)) {
		return fmt.Sprintf("%d", int64(x))
	}
	return fmt.Sprintf("%.1f", x)
}

// WriteMarkdown prints the accuracy tables as Markdown.
func (r *AccuracyResult) WriteMarkdown(w io.Writer) { r.writeMarkdown(w, true) }

// writeMarkdown prints the accuracy tables; detail adds the engine's
// actions per class (RESULTS.md leaves them to the plain-text output).
func (r *AccuracyResult) writeMarkdown(w io.Writer, detail bool) {
	fmt.Fprintf(w, "Corpus: %d messages (%d spam, %d ham). Usable spam: %d (%d trivial duplicates and %d with fewer than %d unique terms removed, as in the paper's sect. 6.3).\n",
		r.Messages, r.Spam, r.Ham, r.UsableSpam, r.TrivialDups, r.ShortSpam, MinUnique)
	fmt.Fprintf(w, "Per seed, %.0f spam (%.0f%%) are reported and every other message is checked; %.1f of the reported messages have at least one checked near-duplicate (cosine ≥ %.2f over unique terms), %.1f on average. Averages over %d seeds.\n\n",
		r.Queries, 100*r.ReportShare, r.QueriesWithN, r.Cosine, r.Neighbours, r.Seeds)
	fmt.Fprintln(w, "| configuration | near-dup recall (eq. 3) | neighbours flagged | spam flagged | ham flagged (FP) | utility | utility per query (eq. 5) |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| %s | %.3f ± %.3f | %.3f | %s / %s (%s) | %s / %s | %.1f | %.2f |\n",
			row.Name, row.Recall, row.RecallStd, row.RecallFlagged,
			num(row.SpamFlagged), num(row.SpamChecked), pct(row.SpamFlagged, row.SpamChecked),
			num(row.HamFlagged), num(row.HamChecked), row.Utility, row.QueryUtility)
	}
	fmt.Fprintf(w, "\nRecall is given ± its standard deviation over the seeds. Utility = spam flagged − %g × ham flagged. Near-dup recall counts a neighbour of a reported message as found when it shares a signature with it (I-Match, ANDD rows), is found by the seed method's search (SpotSigs, PPJoin+ rows) or is flagged as a member of the same campaign (engine rows); \"neighbours flagged\" counts it when it is flagged at all.\n", r.Cost)
	var eng []Row
	for _, row := range r.Rows {
		if row.Actions != nil {
			eng = append(eng, row)
		}
	}
	if len(eng) > 0 && detail {
		acts := []action.Action{action.Accept, action.Tag, action.Quarantine, action.Reject}
		fmt.Fprintln(w, "\nActions taken by the engine on the checked messages (mean per seed):")
		fmt.Fprintln(w)
		fmt.Fprint(w, "| configuration | class |")
		for _, a := range acts {
			fmt.Fprintf(w, " %s |", a)
		}
		fmt.Fprint(w, "\n| --- | --- |")
		for range acts {
			fmt.Fprint(w, " ---: |")
		}
		fmt.Fprintln(w)
		for _, row := range eng {
			for _, cl := range []string{"spam", "ham"} {
				fmt.Fprintf(w, "| %s | %s |", row.Name, cl)
				for _, a := range acts {
					fmt.Fprintf(w, " %s |", num(row.Actions[cl+"/"+a.String()]))
				}
				fmt.Fprintln(w)
			}
		}
	}
	for _, row := range r.Rows {
		if len(row.FalsePositives) > 0 {
			fmt.Fprintf(w, "\nHam flagged by %q: %d messages, e.g.", row.Name, len(row.FalsePositives))
			for i, p := range row.FalsePositives[:min(1, len(row.FalsePositives))] {
				if i > 0 {
					fmt.Fprint(w, ",")
				}
				fmt.Fprintf(w, " `%s` (%d of %d seeds)", rel(r.Corpus, p.Path), p.Seeds, r.Seeds)
			}
			fmt.Fprint(w, " (--json lists them all)")
			fmt.Fprintln(w, ".")
		}
	}
}

func rel(base, p string) string {
	if r, err := filepath.Rel(base, p); err == nil {
		return r
	}
	return p
}

// WriteMarkdown prints the adversarial tables as Markdown.
func (r *AdversarialResult) WriteMarkdown(w io.Writer) { r.writeMarkdown(w, true) }

// writeMarkdown prints the adversarial tables; detail adds the seed
// methods and the q-gram sketches alone per kind (RESULTS.md leaves them
// to the plain-text output of nddlab eval adversarial).
func (r *AdversarialResult) writeMarkdown(w io.Writer, detail bool) {
	fmt.Fprintf(w, "Seed %d: %d spam reported (%d without any signature); %.1f%% of the reported messages are flagged unmodified, and copies are made of those. Detection rate of the default engine (action ≠ accept) per randomization kind and strength (share of words affected, of paragraphs moved, or length of appended text):\n\n",
		r.Seed, r.Reported, r.Skipped, 100*r.Baseline)
	strengths := r.Strengths()
	fmt.Fprint(w, "| kind |")
	for _, s := range strengths {
		fmt.Fprintf(w, " %.2f |", s)
	}
	fmt.Fprint(w, " I-Match evidence | ANDD evidence | short-message evidence | q-gram evidence |\n| --- |")
	for range strengths {
		fmt.Fprint(w, " ---: |")
	}
	fmt.Fprintln(w, " ---: | ---: | ---: | ---: |")
	for _, k := range r.Kinds() {
		fmt.Fprintf(w, "| %s |", k)
		det, im, an, sh, qg := 0, 0, 0, 0, 0
		for _, s := range strengths {
			c := r.Cell(k, s)
			mark := ""
			if c.Rate < 0.9 {
				mark = " ✗"
			}
			fmt.Fprintf(w, " %.3f%s |", c.Rate, mark)
			det += c.Detected
			im += c.ByIMatch
			an += c.ByANDD
			sh += c.ByShort
			qg += c.ByQGram
		}
		fmt.Fprintf(w, " %s | %s | %s | %s |\n", pct(float64(im), float64(det)), pct(float64(an), float64(det)), pct(float64(sh), float64(det)), pct(float64(qg), float64(det)))
	}
	fmt.Fprintf(w, "\n✗: below the 0.9 goal. Evidence columns: share of the detected copies (all strengths) whose verdict has a matching I-Match signature / a verified ANDD sketch / a short-message key (internal/shortsig; for these long messages, the lead key: same subject and leading text) / a verified q-gram sketch (internal/qgram). Ham flagged with the same store: %d of %d.\n", r.HamFlagged, r.HamChecked)
	if detail {
		r.writeSeedMethods(w, strengths)
	} else {
		fmt.Fprintf(w, "\n`nddlab eval adversarial` also measures SpotSigs, PPJoin and the q-gram sketches alone on the same copies; for them the ham found is: SpotSigs %d, PPJoin %d of %d.\n", r.SpotSigsHam, r.PPJoinHam, r.HamChecked)
	}
	r.writeDistance(w, strengths)
}

// writeSeedMethods prints what the seed methods and the q-gram sketches
// alone find of the copies, per kind and strength.
func (r *AdversarialResult) writeSeedMethods(w io.Writer, strengths []float64) {
	fmt.Fprintf(w, "\nThe seed methods alone on the same copies (docs/design/methods.md): share of the copies whose original SpotSigs (its index of the reported messages; weighted Jaccard of spot signatures ≥ %.2f) / PPJoin (exact cosine over unique terms ≥ %.2f) finds:\n\n", spotsigs.DefaultThreshold, seedCosine)
	fmt.Fprint(w, "| kind |")
	for _, s := range strengths {
		fmt.Fprintf(w, " SpotSigs %.2f | PPJoin %.2f |", s, s)
	}
	fmt.Fprint(w, "\n| --- |")
	for range strengths {
		fmt.Fprint(w, " ---: | ---: |")
	}
	fmt.Fprintln(w)
	for _, k := range r.Kinds() {
		fmt.Fprintf(w, "| %s |", k)
		for _, s := range strengths {
			c := r.Cell(k, s)
			n := float64(max(c.Copies, 1))
			fmt.Fprintf(w, " %.3f | %.3f |", float64(c.BySpotSigs)/n, float64(c.ByPPJoin)/n)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nHam for which they find a reported message: SpotSigs %d, PPJoin %d of %d.\n", r.SpotSigsHam, r.PPJoinHam, r.HamChecked)
	writeQGramAlone(w, r, strengths)
}

// writeDistance prints how far the copies are from their originals and
// the detection among those still near-duplicates.
func (r *AdversarialResult) writeDistance(w io.Writer, strengths []float64) {
	fmt.Fprintln(w, "\nHow far the copies are from their originals: mean cosine over unique terms (the ground truth's measure), and the detection rate among the copies that are still near-duplicates by the paper's definition (cosine ≥ 0.9; their number in parentheses):")
	fmt.Fprintln(w)
	fmt.Fprint(w, "| kind |")
	for _, s := range strengths {
		fmt.Fprintf(w, " cos %.2f | det. %.2f |", s, s)
	}
	fmt.Fprint(w, "\n| --- |")
	for range strengths {
		fmt.Fprint(w, " ---: | ---: |")
	}
	fmt.Fprintln(w)
	for _, k := range r.Kinds() {
		fmt.Fprintf(w, "| %s |", k)
		for _, s := range strengths {
			c := r.Cell(k, s)
			det := "–"
			if c.NearDup > 0 {
				det = fmt.Sprintf("%.3f (%d)", float64(c.NearDupDetected)/float64(c.NearDup), c.NearDup)
			}
			fmt.Fprintf(w, " %.3f | %s |", c.MeanCosine, det)
		}
		fmt.Fprintln(w)
	}
	if len(r.FalsePos) > 0 {
		fmt.Fprintf(w, "\nHam flagged with that store: %d messages, e.g.", len(r.FalsePos))
		for i, p := range r.FalsePos[:min(3, len(r.FalsePos))] {
			if i > 0 {
				fmt.Fprint(w, ",")
			}
			fmt.Fprintf(w, " `%s`", rel(r.Corpus, p))
		}
		fmt.Fprint(w, " (--json lists them all)")
		fmt.Fprintln(w, ".")
	}
}

// WritePlots writes the accuracy and adversarial plots as SVG files into
// dir (either result may be nil) and returns the file names written.
func WritePlots(dir string, acc *AccuracyResult, adv *AdversarialResult, sp *SpeedResult) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	var written []string
	write := func(name, svg string) error {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(svg), 0o644); err != nil {
			return fmt.Errorf("plots: %w", err)
		}
		written = append(written, p)
		return nil
	}
	if acc != nil {
		var ks, rec, flag []float64
		var refs []Row
		for _, row := range acc.Rows {
			if row.K >= 0 {
				ks = append(ks, float64(row.K))
				rec = append(rec, row.Recall)
				flag = append(flag, row.RecallFlagged)
			} else {
				refs = append(refs, row)
			}
		}
		series := []Series{{Name: "I-Match (this corpus)", X: ks, Y: rec}}
		paper := Series{Name: "paper, Table 2"}
		for _, k := range ks {
			if v, ok := map[float64]float64{0: 0.66, 2: 0.72, 5: 0.76, 10: 0.80}[k]; ok {
				paper.X = append(paper.X, k)
				paper.Y = append(paper.Y, v)
			}
		}
		if len(paper.X) > 0 {
			series = append(series, paper)
		}
		for _, row := range refs {
			series = append(series, Series{Name: shortName(row.Name), X: []float64{ks[0], ks[len(ks)-1]}, Y: []float64{row.Recall, row.Recall}})
		}
		if len(ks) > 0 {
			if err := write("recall-vs-lexicons.svg", LinePlot("Near-duplicate recall vs. number of bagged lexicons", "bagged lexicons K (besides the original)", "recall (eq. 3)", 0, 1, series)); err != nil {
				return written, err
			}
		}
	}
	if adv != nil {
		var cats []string
		for _, k := range adv.Kinds() {
			cats = append(cats, string(k))
		}
		var series []Series
		for _, s := range adv.Strengths() {
			sr := Series{Name: fmt.Sprintf("strength %.2f", s)}
			for _, k := range adv.Kinds() {
				sr.Y = append(sr.Y, adv.Cell(k, s).Rate)
			}
			series = append(series, sr)
		}
		if err := write("detection-by-kind.svg", BarPlot("Detection rate per randomization kind (default engine)", "randomization kind", "detection rate", 0, 1, cats, series)); err != nil {
			return written, err
		}
	}
	if sp != nil && len(sp.Latency) > 0 {
		var series []Series
		names := make([]string, 0, len(sp.Latency))
		for n := range sp.Latency {
			// the latencies a message sees; the store's component
			// figures stay in the table
			if strings.Contains(n, "milter") || strings.Contains(n, "pipeline") || strings.Contains(n, "lookup all") || strings.Contains(n, "report single") {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		if len(names) == 0 {
			return written, nil
		}
		for _, n := range names {
			s := Series{Name: n}
			for i, p := range sp.Latency[n] {
				s.X = append(s.X, float64(i))
				s.Labels = append(s.Labels, fmt.Sprintf("p%g", p.Percentile))
				s.Y = append(s.Y, p.Millis)
			}
			series = append(series, s)
		}
		if err := write("latency.svg", LogLinePlot("Latency distribution", "percentile", "milliseconds", series)); err != nil {
			return written, err
		}
	}
	return written, nil
}

func shortName(s string) string {
	if i := strings.Index(s, " ("); i > 0 {
		return s[:i]
	}
	return s
}
