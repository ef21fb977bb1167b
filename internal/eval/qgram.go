package eval

import (
	"fmt"
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
			return foundMatch(c, e, func(q int) map[int]bool {
				f := map[int]bool{}
				for _, m := range x.Query(at, profiles[q]) {
					f[int(m.ID)] = true
				}
				return f
			}, opts.Cost)
		}))
	th := sk.Threshold()
	verify := func(a, b int) bool { return qgram.EstimateSimilarity(&sketches[a], &sketches[b]) >= th }
	opts.Log.Info("row", "name", "q-gram sketches alone")
	rows = append(rows, averageRows(fmt.Sprintf("q-gram sketches alone (band keys, est. docq ≥ %.2f)", th), -1, opts, exps,
		func(e *experiment) outcome { return keyMatch(c, e, keys, verify, opts.Cost) }))
	return rows
}
