package eval

import (
	"fmt"
	"io"
	"time"

	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/qgram"
)

// qgramRows are the q-gram rows of the accuracy table, in memory like the
// I-Match and ANDD rows:
//
//   - the paper's method (Montanari & Puglisi): each query is compared,
//     through the inverted q-gram index of the checked messages, with
//     every message sharing a q-gram, and finds those whose docq reaches
//     the paper's threshold (q = 4, td = 0.8; case kept);
//   - the engine's q-gram family alone: band keys of the q-gram sketches,
//     candidates verified by the estimated docq (qgram.Sketcher).
//
// The text of a message is its subject and visible text (mime.Parse).
func qgramRows(c *Corpus, exps []*experiment, opts AccuracyOptions) []Row {
	profiles := make([]qgram.Profile, len(c.Docs))
	sketches := make([]qgram.Sketch, len(c.Docs))
	keys := make([][]string, len(c.Docs))
	sk := qgram.NewSketcher(opts.Engine.QGram)
	parallel(len(c.Docs), opts.Workers, func(i int) {
		doc := mime.Parse(c.Docs[i].Raw, opts.Engine.Mime)
		profiles[i] = qgram.NewProfile(doc.Subject+"\n"+doc.Text, qgram.Options{})
		s, ok := sk.Sketch(doc.Subject, "\n", doc.Text)
		if !ok {
			return
		}
		sketches[i] = s
		for _, k := range qgram.BandKeys(&s) {
			keys[i] = append(keys[i], string(k))
		}
	})
	var rows []Row
	paper := qgram.Options{}
	opts.Log.Info("row", "name", "q-grams, paper")
	rows = append(rows, averageRows(fmt.Sprintf("q-grams, paper's method (inverted index, docq ≥ %.1f, q = %d)", qgram.DefaultThreshold, qgram.DefaultQ), -1, opts, exps,
		func(e *experiment) outcome {
			// All checked messages arrive in one hour: the 24-hour window
			// holds them all.
			x := qgram.NewIndex(paper)
			at := time.Unix(0, 0)
			for _, j := range e.checked {
				x.Add(uint64(j), at, profiles[j])
			}
			return findMatch(c, e, func(q int, f map[int]bool) {
				for _, m := range x.Query(at, profiles[q]) {
					f[int(m.ID)] = true
				}
			}, opts.Cost)
		}))
	th := sk.Threshold()
	verify := func(a, b int) bool { return qgram.EstimateSimilarity(&sketches[a], &sketches[b]) >= th }
	opts.Log.Info("row", "name", "q-gram sketches alone")
	rows = append(rows, averageRows(fmt.Sprintf("q-gram sketches alone (band keys, est. docq ≥ %.2f)", th), -1, opts, exps,
		func(e *experiment) outcome { return keyMatch(c, e, keys, verify, opts.Cost) }))
	return rows
}

// qgramAlone measures the q-gram sketches alone on adversarial copies:
// a copy is found when it shares a band key with its original and their
// estimated docq reaches the engine's threshold.
type qgramAlone struct {
	sk       *qgram.Sketcher
	mime     mime.Options
	sketches map[int]qgram.Sketch
	keys     map[int]map[string]bool
}

func newQGramAlone(c *Corpus, queries []int, ao AccuracyOptions) *qgramAlone {
	qa := &qgramAlone{sk: qgram.NewSketcher(ao.Engine.QGram), mime: ao.Engine.Mime,
		sketches: map[int]qgram.Sketch{}, keys: map[int]map[string]bool{}}
	for _, q := range queries {
		doc := mime.Parse(c.Docs[q].Raw, ao.Engine.Mime)
		s, ok := qa.sk.Sketch(doc.Subject, "\n", doc.Text)
		if !ok {
			continue
		}
		qa.sketches[q] = s
		ks := map[string]bool{}
		for _, k := range qgram.BandKeys(&s) {
			ks[string(k)] = true
		}
		qa.keys[q] = ks
	}
	return qa
}

// found reports whether the q-gram sketches alone find the copy doc of
// the reported message q. Safe for concurrent use.
func (qa *qgramAlone) found(q int, doc *mime.Document) bool {
	orig, ok := qa.sketches[q]
	if !ok {
		return false
	}
	s, ok := qa.sk.Sketch(doc.Subject, "\n", doc.Text)
	if !ok || qgram.EstimateSimilarity(&orig, &s) < qa.sk.Threshold() {
		return false
	}
	for _, k := range qgram.BandKeys(&s) {
		if qa.keys[q][string(k)] {
			return true
		}
	}
	return false
}

// writeQGramAlone writes the adversarial table of the q-gram sketches
// alone (AdvCell.QGramAlone).
func writeQGramAlone(w io.Writer, r *AdversarialResult, strengths []float64) {
	fmt.Fprintln(w, "\nThe q-gram sketches alone, in memory: share of the copies that share a q-gram band key with their original and reach the engine's estimated docq threshold:")
	fmt.Fprintln(w)
	fmt.Fprint(w, "| kind |")
	for _, s := range strengths {
		fmt.Fprintf(w, " %.2f |", s)
	}
	fmt.Fprint(w, "\n| --- |")
	for range strengths {
		fmt.Fprint(w, " ---: |")
	}
	fmt.Fprintln(w)
	for _, k := range r.Kinds() {
		fmt.Fprintf(w, "| %s |", k)
		for _, s := range strengths {
			c := r.Cell(k, s)
			rate := 0.0
			if c.Copies > 0 {
				rate = float64(c.QGramAlone) / float64(c.Copies)
			}
			fmt.Fprintf(w, " %.3f |", rate)
		}
		fmt.Fprintln(w)
	}
}
