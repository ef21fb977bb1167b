package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gomilter "github.com/emersion/go-milter"
	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/eval/djmilter"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/milter"
	"github.com/nddmilter/nddmilter/internal/milter/mtadial"
	"github.com/nddmilter/nddmilter/internal/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

type benchMilterFlags struct {
	sessions  int
	messages  int
	campaigns int
	templates int
	spam      float64
	dir       string
	addr      string
	seed      uint64
	profile   string
	memprof   string
	network   string
	replyEach bool
	server    string
}

func newBenchMilterCmd(gf *globalFlags) *cobra.Command {
	f := &benchMilterFlags{}
	cmd := &cobra.Command{
		Use:   "milter",
		Short: "Drive the milter with concurrent go-milter sessions and measure throughput and latency",
		Long: `Starts the milter in-process over a store of --campaigns campaigns (or drives
a running daemon with --addr), and sends --messages messages over --sessions
concurrent milter sessions on loopback, the way Postfix does (MAIL, RCPT,
each header, body chunks, end of message with the queue id macro).

The store holds --templates real campaigns, each reported by five users
(so that the default policy rejects their copies), and synthetic campaigns
(one spam report, 6 I-Match keys and 5 ANDD band keys each) up to
--campaigns, built with the store's bulk ReportBatch and cached in --dir for
the next run. The message mix is --spam randomized copies of the real
campaigns (words replaced, text appended, paragraphs shuffled) and
legitimate messages of random text.

Prints messages/s, latency percentiles (MAIL FROM to the final reply),
the actions taken and the resident memory of the process (VmRSS, VmHWM).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchMilter(cmd.Context(), gf, f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.sessions, "sessions", 8, "concurrent milter sessions (the SMTP sessions receiving mail at once)")
	fl.IntVar(&f.messages, "messages", 20000, "messages to send")
	fl.IntVar(&f.campaigns, "campaigns", 1_000_000, "campaigns in the store")
	fl.IntVar(&f.templates, "templates", 50, "real campaigns whose copies are sent")
	fl.Float64Var(&f.spam, "spam", 0.2, "fraction of messages that are campaign copies")
	fl.StringVar(&f.dir, "dir", "", "store directory, reused when it holds the same shape (default .cache/bench-milter-CAMPAIGNS)")
	fl.StringVar(&f.addr, "addr", "", "drive a running milter at inet:HOST:PORT or unix:/path instead (its store is used as is)")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed of the message mix")
	fl.StringVar(&f.profile, "cpuprofile", "", "write a CPU profile of the measured run to this file")
	fl.StringVar(&f.memprof, "memprofile", "", "write an allocation profile (allocations of the whole process) to this file")
	fl.BoolVar(&f.replyEach, "reply-each-step", false, "offer no milter protocol flags, so that the milter replies to every step (an MTA at protocol version 2)")
	fl.StringVar(&f.network, "network", "tcp", `socket of the in-process milter: "tcp" (loopback) or "unix"`)
	fl.StringVar(&f.server, "server", "own", `milter protocol server of the in-process milter: "own" (internal/milter, the daemon's), "d--j" (github.com/d--j/go-milter over the same message logic, for comparison) or "d--j-buffered" (the same with buffered socket I/O)`)
	return cmd
}

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
	m.headers = append([][2]string{received(i)}, m.headers...)
	return m
}

// benchStore builds (or reuses) the store: templates real campaigns
// reported by five users each, then synthetic campaigns up to campaigns.
func benchStore(ctx context.Context, gf *globalFlags, f *benchMilterFlags, templates [][]byte, out io.Writer) (*runtimeEnv, error) {
	cfg, err := loadConfig(gf)
	if err != nil {
		return nil, err
	}
	dir := f.dir
	if dir == "" {
		dir = filepath.Join(".cache", fmt.Sprintf("bench-milter-v2-%d-%d", f.campaigns, f.templates))
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := os.Stat(filepath.Join(dir, "BENCH-COMPLETE")); err == nil {
		cfg.Store.Dir = dir
		rt, err := openRuntimeWith(cfg, log)
		if err != nil {
			return nil, err
		}
		s, err := rt.Store.Stats(ctx)
		if err != nil {
			rt.Close()
			return nil, err
		}
		fmt.Fprintf(out, "store           %s (reused: %d campaigns, %d keys)\n", dir, s.Campaigns, s.Keys)
		return rt, nil
	}
	// Build in a private directory and move it into place when complete,
	// so that concurrent or interrupted runs never share or reuse a
	// half-built store.
	build := fmt.Sprintf("%s.building-%d", dir, os.Getpid())
	if err := os.MkdirAll(build, 0o755); err != nil {
		return nil, fmt.Errorf("bench milter: %w", err)
	}
	cfg.Store.Dir = build
	rt, err := openRuntimeWith(cfg, log)
	if err != nil {
		os.RemoveAll(build)
		return nil, err
	}
	fail := func(err error) (*runtimeEnv, error) {
		rt.Close()
		os.RemoveAll(build)
		return nil, err
	}
	t0 := time.Now()
	for i, tmpl := range templates {
		for j, user := range []string{"alice", "bob", "carol", "dave", "erin"} {
			m, err := campaignCopy(tmpl, uint64(1_000_000+i*10+j), i)
			if err != nil {
				return fail(err)
			}
			if _, err := rt.Engine.Report(ctx, m.raw(), store.KindSpam, user+"@example.org"); err != nil {
				return fail(fmt.Errorf("bench milter: report: %w", err))
			}
		}
	}
	synthetic := f.campaigns - len(templates)
	const batch = 2000
	ins := make([]store.ReportInput, 0, batch)
	at := time.Now().Add(-time.Hour)
	for c := 0; c < synthetic; c += batch {
		ins = ins[:0]
		for j := c; j < min(c+batch, synthetic); j++ {
			keys := make([][]byte, 0, 11)
			for k := 0; k < 11; k++ {
				key := make([]byte, 22)
				if k >= 6 {
					key = key[:12]
				}
				rand.Read(key)
				key[0] = 0xbe // not a real signature version: never matched
				keys = append(keys, key)
			}
			ins = append(ins, store.ReportInput{
				Time: at, Kind: store.KindSpam, Reporter: fmt.Sprintf("user%d@example.org", j%5000),
				Keys: keys, Create: true, Index: true, Subject: fmt.Sprintf("synthetic campaign %d", j), From: "spam@example.com",
			})
		}
		if _, err := rt.Store.ReportBatch(ctx, ins); err != nil {
			return fail(fmt.Errorf("bench milter: build store: %w", err))
		}
		if (c/batch)%50 == 0 {
			fmt.Fprintf(os.Stderr, "\rbuilding store: %d/%d campaigns", c+len(ins)+len(templates), f.campaigns)
		}
	}
	fmt.Fprintln(os.Stderr)
	if err := rt.Close(); err != nil {
		os.RemoveAll(build)
		return nil, fmt.Errorf("bench milter: build store: %w", err)
	}
	if err := os.WriteFile(filepath.Join(build, "BENCH-COMPLETE"), []byte("complete\n"), 0o644); err != nil {
		os.RemoveAll(build)
		return nil, err
	}
	if err := os.Rename(build, dir); err != nil {
		fmt.Fprintf(os.Stderr, "bench milter: %v; using %s\n", err, build)
		dir = build
	}
	fmt.Fprintf(out, "store           %s (built %d campaigns in %s)\n", dir, f.campaigns, time.Since(t0).Round(time.Second))
	cfg.Store.Dir = dir
	return openRuntimeWith(cfg, log)
}

func runBenchMilter(ctx context.Context, gf *globalFlags, f *benchMilterFlags, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if f.sessions < 1 || f.messages < 1 || f.templates < 1 || f.campaigns < f.templates || f.spam < 0 || f.spam > 1 {
		return errors.New("bench milter: need --sessions ≥ 1, --messages ≥ 1, --templates ≥ 1, --campaigns ≥ --templates, 0 ≤ --spam ≤ 1")
	}
	rng := mrand.New(mrand.NewPCG(f.seed, 7))
	voc, err := newVocab()
	if err != nil {
		return err
	}
	tr := mrand.New(mrand.NewPCG(1234, 5678)) // templates are fixed: the cached store depends on them
	templates := make([][]byte, f.templates)
	for i := range templates {
		templates[i] = spamgen.NewMessage(strings.TrimSuffix(voc.text(tr, 4+tr.IntN(5)), ".\n"), voc.text(tr, 80+tr.IntN(220)), tr.IntN(3) == 0)
	}

	network, addr := "", ""
	var cacheStats func() campaign.CacheStats // in-process runs only
	if f.addr != "" {
		var err error
		network, addr, err = config.SplitListen(f.addr)
		if err != nil {
			return fmt.Errorf("--addr: %w", err)
		}
	} else {
		rt, err := benchStore(ctx, gf, f, templates, out)
		if err != nil {
			return err
		}
		defer rt.Close()
		cacheStats = rt.Engine.CacheStats
		srv, err := milter.New(rt.Engine, milter.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		var serve func(net.Listener) error = srv.Serve
		var shutdown func(context.Context) error = srv.Shutdown
		switch f.server {
		case "own":
		case "d--j", "d--j-buffered":
			dsrv := djmilter.New(srv, djmilter.Options{Buffered: f.server == "d--j-buffered"})
			serve, shutdown = dsrv.Serve, dsrv.Shutdown
		default:
			return fmt.Errorf("bench milter: --server %q: want own, d--j or d--j-buffered", f.server)
		}
		var ln net.Listener
		switch f.network {
		case "tcp":
			ln, err = milter.Listen("tcp", "127.0.0.1:0")
		case "unix":
			sockDir, derr := os.MkdirTemp("", "nddmilter-bench-")
			if derr != nil {
				return fmt.Errorf("bench milter: %w", derr)
			}
			defer os.RemoveAll(sockDir)
			ln, err = milter.Listen("unix", filepath.Join(sockDir, "milter.sock"))
		default:
			return fmt.Errorf("bench milter: --network %q: want tcp or unix", f.network)
		}
		if err != nil {
			return err
		}
		go serve(ln)
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			shutdown(sctx)
		}()
		network, addr = f.network, ln.Addr().String()
	}

	serverName := f.server
	if f.addr != "" {
		serverName = "at " + f.addr
	}
	msgs := make([]benchMsg, f.messages)
	spamCount := 0
	for i := range msgs {
		if rng.Float64() < f.spam {
			m, err := campaignCopy(templates[rng.IntN(len(templates))], rng.Uint64(), i)
			if err != nil {
				return err
			}
			msgs[i] = m
			spamCount++
		} else {
			msgs[i] = legitimate(voc, rng, i)
		}
	}
	fmt.Fprintf(out, "mix             %d messages: %d campaign copies, %d legitimate; %d sessions; server %s\n", f.messages, spamCount, f.messages-spamCount, f.sessions, serverName)

	type result struct {
		lat     time.Duration
		action  string
		spam    bool
		verdict string // X-NDD-Verdict, when added
	}
	results := make([]result, f.messages)
	var wg sync.WaitGroup
	errs := make(chan error, f.sessions)
	next := make(chan int, f.messages)
	for i := range msgs {
		next <- i
	}
	close(next)
	client := gomilter.NewClientWithOptions(network, addr, gomilter.ClientOptions{
		Dialer:      mtadial.Dialer{},
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		ActionMask: gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
		// What Postfix offers at milter protocol 6: every step may go
		// without a reply (the milter chooses). --reply-each-step offers
		// none, as an MTA speaking protocol 2 would.
		ProtocolMask: mtaProtocol(f.replyEach),
	})
	runtime.GC()
	if f.profile != "" {
		pf, err := os.Create(f.profile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var cache0 campaign.CacheStats
	if cacheStats != nil {
		cache0 = cacheStats()
	}
	start, cpu0 := time.Now(), cpuTime()
	for s := 0; s < f.sessions; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess, err := client.Session()
			if err != nil {
				errs <- err
				return
			}
			defer sess.Close()
			if _, err := sess.Conn("mx.example.net", gomilter.FamilyInet, 25, "192.0.2.1"); err != nil {
				errs <- err
				return
			}
			for i := range next {
				m := msgs[i]
				t0 := time.Now()
				var verdict string
				act, err := benchSend(sess, m, i, &verdict)
				if err != nil {
					errs <- fmt.Errorf("message %d: %w", i, err)
					return
				}
				results[i] = result{lat: time.Since(t0), action: act, spam: m.spam, verdict: verdict}
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	if f.memprof != "" {
		if err := writeHeapProfile(f.memprof); err != nil {
			return err
		}
	}
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("bench milter: %w", err)
	}
	lats := make([]time.Duration, len(results))
	actions := map[string]int{}
	caught := 0
	falsePos := 0
	samples := map[string]string{}
	for i, r := range results {
		lats[i] = r.lat
		actions[r.action]++
		if _, ok := samples[r.action]; !ok && r.verdict != "" && r.action != "accept" {
			samples[r.action] = r.verdict
		}
		if r.spam && r.action != "accept" {
			caught++
		}
		if !r.spam && r.action != "accept" {
			falsePos++
		}
	}
	slices.Sort(lats)
	fmt.Fprintf(out, "throughput      %.0f messages/s (%d in %s, CPU %.0f%% of %d cores)\n",
		float64(f.messages)/elapsed.Seconds(), f.messages, elapsed.Round(time.Millisecond),
		100*cpu.Seconds()/elapsed.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU())
	who := "whole process: milter server, engine, store and the go-milter clients"
	if f.addr != "" {
		who = "this process: the go-milter clients only"
	}
	fmt.Fprintf(out, "cpu             %.0f µs per message (%s)\n", float64(cpu.Microseconds())/float64(f.messages), who)
	fmt.Fprintf(out, "latency         p50 %s  p90 %s  p99 %s  max %s (MAIL FROM to final reply)\n",
		pct(lats, 0.50), pct(lats, 0.90), pct(lats, 0.99), lats[len(lats)-1].Round(time.Microsecond))
	var acts []string
	for a, n := range actions {
		acts = append(acts, fmt.Sprintf("%s %d", a, n))
	}
	slices.Sort(acts)
	fmt.Fprintf(out, "actions         %s; campaign copies acted on %d/%d, legitimate acted on %d/%d\n",
		strings.Join(acts, ", "), caught, spamCount, falsePos, f.messages-spamCount)
	if f.addr != "" && caught == 0 && spamCount > 0 {
		fmt.Fprintln(out, "note            no campaign copy was acted on: the daemon's store does not hold the benchmark's campaigns (run the daemon on a store built by bench milter --dir DIR)")
	}
	for _, a := range []string{"tag", "quarantine"} {
		if v, ok := samples[a]; ok {
			fmt.Fprintf(out, "sample %-10s X-NDD-Verdict: %s\n", a, v)
		}
	}
	if cacheStats != nil {
		c := cacheStats()
		c.Hits -= cache0.Hits
		c.Misses -= cache0.Misses
		fmt.Fprintf(out, "record cache    %d hits, %d misses (hit rate %.1f%%)\n", c.Hits, c.Misses, 100*c.HitRate())
	}
	if f.addr == "" {
		rss, hwm := procMemory()
		fmt.Fprintf(out, "memory          VmRSS %s, VmHWM %s (whole process: store, engine, clients)\n", rss, hwm)
	}
	return nil
}

func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted)-1) * p)
	return sorted[i].Round(time.Microsecond)
}

// benchSend sends one message as Postfix does and returns the action.
func benchSend(s *gomilter.ClientSession, m benchMsg, i int, verdict *string) (string, error) {
	check := func(a *gomilter.Action, err error) error {
		if err != nil {
			return err
		}
		if a.Code != gomilter.ActContinue {
			return fmt.Errorf("unexpected early action %c", a.Code)
		}
		return nil
	}
	if err := s.Macros(gomilter.CodeMail, "{mail_addr}", "sender@example.net"); err != nil {
		return "", err
	}
	if err := check(s.Mail("sender@example.net", nil)); err != nil {
		return "", err
	}
	if err := check(s.Rcpt("user"+strconv.Itoa(i%500)+"@example.org", nil)); err != nil {
		return "", err
	}
	for _, h := range m.headers {
		if err := check(s.HeaderField(h[0], h[1])); err != nil {
			return "", err
		}
	}
	if err := check(s.HeaderEnd()); err != nil {
		return "", err
	}
	for b := m.body; len(b) > 0; {
		n := min(len(b), gomilter.MaxBodyChunk)
		if err := check(s.BodyChunk(b[:n])); err != nil {
			return "", err
		}
		b = b[n:]
	}
	if err := s.Macros(gomilter.CodeEOB, "i", fmt.Sprintf("Q%08X", i)); err != nil {
		return "", err
	}
	mods, act, err := s.End()
	if err != nil {
		return "", err
	}
	switch act.Code {
	case gomilter.ActReplyCode:
		if act.SMTPCode >= 500 {
			return "reject", nil
		}
		return "tempfail", nil
	case gomilter.ActTempFail:
		return "tempfail", nil
	}
	for _, m := range mods {
		if m.Code == gomilter.ActQuarantine {
			return "quarantine", nil
		}
	}
	for _, m := range mods {
		if m.Code == gomilter.ActAddHeader && strings.HasSuffix(m.HeaderName, "Verdict") {
			a, _, _ := strings.Cut(m.HeaderValue, ";")
			*verdict = m.HeaderValue
			return a, nil
		}
	}
	return "accept", nil
}

// writeHeapProfile writes the allocation profile (go tool pprof
// -sample_index=alloc_space shows what the run allocated).
func writeHeapProfile(path string) error {
	mf, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	defer mf.Close()
	if err := pprof.Lookup("allocs").WriteTo(mf, 0); err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	return mf.Close()
}

// mtaProtocol is the protocol mask the driver offers: Postfix 3's at
// version 6, or none.
func mtaProtocol(replyEach bool) gomilter.OptProtocol {
	if replyEach {
		return 0
	}
	return mtadial.PostfixProtocol
}

// procMemory reads VmRSS and VmHWM from /proc/self/status.
func procMemory() (rss, hwm string) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "?", "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	rss, hwm = "?", "?"
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
	}
	return rss, hwm
}
