package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
)

// vocab draws words with the frequencies of the embedded lexicon's
// corpus (Brown), so that generated text has realistic term statistics.
type vocab struct {
	words []string
	cum   []int // cumulative document frequencies
}

func newVocab() (*vocab, error) {
	v := &vocab{}
	total := 0
	sc := bufio.NewScanner(bytes.NewReader(imatchbag.DefaultLexiconData()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		df, err := strconv.Atoi(f[0])
		if err != nil || df <= 0 {
			continue
		}
		total += df
		v.words = append(v.words, f[2])
		v.cum = append(v.cum, total)
	}
	if len(v.words) < 100 {
		return nil, errors.New("bench milter: the embedded lexicon has too few terms for a vocabulary")
	}
	return v, nil
}

func (v *vocab) word(rng *mrand.Rand) string {
	x := rng.IntN(v.cum[len(v.cum)-1])
	i, _ := slices.BinarySearch(v.cum, x+1)
	return v.words[min(i, len(v.words)-1)]
}

// text returns about n words in sentences and paragraphs.
func (v *vocab) text(rng *mrand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		w := v.word(rng)
		if i%12 == 0 {
			if i > 0 {
				b.WriteString(".")
				if i%48 == 0 {
					b.WriteString("\n\n")
				} else {
					b.WriteString(" ")
				}
			}
			w = strings.ToUpper(w[:1]) + w[1:]
		} else {
			b.WriteString(" ")
		}
		b.WriteString(w)
	}
	b.WriteString(".\n")
	return b.String()
}

// templates returns the n real campaigns whose copies are sent. They are
// fixed: the cached store depends on them.
func (v *vocab) templates(n int) [][]byte {
	tr := mrand.New(mrand.NewPCG(1234, 5678))
	out := make([][]byte, n)
	for i := range out {
		out[i] = spamgen.NewMessage(strings.TrimSuffix(v.text(tr, 4+tr.IntN(5)), ".\n"), v.text(tr, 80+tr.IntN(220)), tr.IntN(3) == 0)
	}
	return out
}

type benchMsg struct {
	headers [][2]string
	body    []byte
	spam    bool
}

// parseBench splits a generated raw message into unfolded headers and body
// for the milter client.
func parseBench(raw []byte, spam bool) benchMsg {
	raw = bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n"))
	head, body, _ := bytes.Cut(raw, []byte("\n\n"))
	m := benchMsg{spam: spam, body: bytes.ReplaceAll(body, []byte("\n"), []byte("\r\n"))}
	for _, line := range strings.Split(string(head), "\n") {
		if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && len(m.headers) > 0 {
			m.headers[len(m.headers)-1][1] += "\n" + line
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m.headers = append(m.headers, [2]string{k, strings.TrimLeft(v, " ")})
		}
	}
	return m
}

func (m benchMsg) raw() []byte {
	var b bytes.Buffer
	for _, h := range m.headers {
		b.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(m.body)
	return b.Bytes()
}

// campaignCopy is a randomized copy of template t (spamgen's combined
// randomizations), with a Received header like Postfix would pass.
func campaignCopy(tmpl []byte, seed uint64, i int) (benchMsg, error) {
	raw, err := spamgen.Mutate(tmpl, spamgen.Options{Seed: seed})
	if err != nil {
		return benchMsg{}, fmt.Errorf("bench milter: mutate: %w", err)
	}
	m := parseBench(raw, true)
	m.headers = append([][2]string{received(i)}, m.headers...)
	return m, nil
}

func received(i int) [2]string {
	return [2]string{"Received", fmt.Sprintf("from mx%d.example.net (mx%d.example.net [192.0.2.%d])\n\tby mail.example.org (Postfix) with ESMTP id Q%08X", i%50, i%50, i%250, i)}
}

func legitimate(v *vocab, rng *mrand.Rand, i int) benchMsg {
	raw := spamgen.NewMessage(strings.TrimSuffix(v.text(rng, 3+rng.IntN(6)), ".\n"), v.text(rng, 40+rng.IntN(400)), rng.IntN(4) == 0)
	m := parseBench(raw, false)
	// Legitimate mail comes from many senders, none of them the
	// campaigns' (whose domain would otherwise become one that sends
	// accepted mail: a graymail sign).
	for k := range m.headers {
		if strings.EqualFold(m.headers[k][0], "From") {
			m.headers[k][1] = fmt.Sprintf("News <news@site%d.example>", rng.IntN(500))
		}
	}
	m.headers = append([][2]string{received(i)}, m.headers...)
	return m
}

// mix returns the messages to send: a share spam of randomized copies of
// the templates, the rest legitimate, and the number of copies.
func mix(v *vocab, templates [][]byte, n int, spam float64, seed uint64) ([]benchMsg, int, error) {
	rng := mrand.New(mrand.NewPCG(seed, 7))
	msgs := make([]benchMsg, n)
	copies := 0
	for i := range msgs {
		if rng.Float64() < spam {
			m, err := campaignCopy(templates[rng.IntN(len(templates))], rng.Uint64(), i)
			if err != nil {
				return nil, 0, err
			}
			msgs[i] = m
			copies++
		} else {
			msgs[i] = legitimate(v, rng, i)
		}
	}
	return msgs, copies, nil
}
