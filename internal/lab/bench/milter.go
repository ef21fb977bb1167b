package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/lab/cputime"
	"github.com/nddmilter/nddmilter/internal/lab/djmilter"
	"github.com/nddmilter/nddmilter/internal/lab/mtadial"
	"github.com/nddmilter/nddmilter/internal/milter"
)

// MilterOptions configure Milter (the flags of `nddlab bench milter`,
// whose defaults are documented there).
type MilterOptions struct {
	Sessions  int     // concurrent milter sessions
	Messages  int     // messages to send
	Campaigns int     // campaigns in the store
	Templates int     // real campaigns whose copies are sent
	Spam      float64 // share of messages that are campaign copies
	// Dir is the store directory, reused when complete. Default
	// .cache/bench-milter-v3-CAMPAIGNS-TEMPLATES.
	Dir string
	// Addr drives a running milter (inet:HOST:PORT or unix:/path) instead
	// of one in this process.
	Addr string
	// DaemonPID is the process id of the running milter of Addr, whose
	// own CPU time per message and memory are then printed (read from
	// /proc): the daemon's cost without this program's clients and
	// message pool.
	DaemonPID int
	Seed      uint64 // of the message mix
	// CPUProfile and MemProfile are files for a CPU profile of the
	// measured run and an allocation profile of the process.
	CPUProfile, MemProfile string
	// Network is the in-process milter's socket: "tcp" (default) or "unix".
	Network string
	// ReplyEachStep offers no protocol flags, as an MTA at protocol 2.
	ReplyEachStep bool
	// Server is the in-process milter's protocol server: "own" (default,
	// internal/milter's, the daemon's), "d--j" (github.com/d--j/go-milter
	// over the same message logic, eval/djmilter) or "d--j-buffered" (the
	// same with buffered socket I/O).
	Server string
	// Config is the daemon's configuration (engine options, lexicon,
	// model); its store directory is replaced by Dir.
	Config *config.Config
}

func (o *MilterOptions) validate() error {
	if o.Sessions < 1 || o.Messages < 1 || o.Templates < 1 || o.Campaigns < o.Templates || o.Spam < 0 || o.Spam > 1 {
		return errors.New("bench milter: need --sessions ≥ 1, --messages ≥ 1, --templates ≥ 1, --campaigns ≥ --templates, 0 ≤ --spam ≤ 1")
	}
	if o.Network == "" {
		o.Network = "tcp"
	}
	switch o.Server {
	case "":
		o.Server = "own"
	case "own", "d--j", "d--j-buffered":
	default:
		return fmt.Errorf("bench milter: --server %q: want own, d--j or d--j-buffered", o.Server)
	}
	if o.Config == nil {
		o.Config = config.Default()
	}
	return nil
}

// result is what happened to one message.
type result struct {
	lat     time.Duration
	action  string
	spam    bool
	verdict string // X-NDD-Verdict, when added
}

// target is the milter driven: its address and, in process, its record
// cache statistics.
type target struct {
	network, addr string
	cacheStats    func() campaign.CacheStats // nil for a running daemon
	close         func()
}

// Milter drives the milter with concurrent go-milter sessions, the way
// Postfix does, and prints throughput, CPU, latency, actions and memory
// to out.
func Milter(ctx context.Context, o MilterOptions, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := o.validate(); err != nil {
		return err
	}
	voc, err := newVocab()
	if err != nil {
		return err
	}
	templates := voc.templates(o.Templates)
	tg, err := startTarget(ctx, &o, templates, out)
	if err != nil {
		return err
	}
	defer tg.close()
	msgs, spamCount, err := mix(voc, templates, o.Messages, o.Spam, o.Seed)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "mix             %d messages: %d campaign copies, %d legitimate; %d sessions; %s\n", o.Messages, spamCount, o.Messages-spamCount, o.Sessions, serverName(&o))

	runtime.GC()
	if o.CPUProfile != "" {
		stop, err := startCPUProfile(o.CPUProfile, "--cpuprofile")
		if err != nil {
			return err
		}
		defer stop()
	}
	var cache0 campaign.CacheStats
	if tg.cacheStats != nil {
		cache0 = tg.cacheStats()
	}
	var dcpu0 time.Duration
	if o.DaemonPID > 0 {
		if dcpu0, err = procCPU(o.DaemonPID); err != nil {
			return fmt.Errorf("bench milter: --daemon-pid: %w", err)
		}
	}
	start, cpu0 := time.Now(), cputime.Process()
	results, err := drive(&o, tg, msgs)
	elapsed, cpu := time.Since(start), cputime.Process()-cpu0
	if o.MemProfile != "" {
		if err := writeHeapProfile(o.MemProfile); err != nil {
			return err
		}
	}
	if err != nil {
		return fmt.Errorf("bench milter: %w", err)
	}
	printMilter(out, &o, results, spamCount, elapsed, cpu)
	if tg.cacheStats != nil {
		c := tg.cacheStats()
		c.Hits -= cache0.Hits
		c.Misses -= cache0.Misses
		fmt.Fprintf(out, "record cache    %d hits, %d misses (hit rate %.1f%%)\n", c.Hits, c.Misses, 100*c.HitRate())
	}
	if o.Addr == "" {
		rss, hwm := procMemory("self")
		fmt.Fprintf(out, "memory          VmRSS %s, VmHWM %s (whole process: store, engine, clients)\n", rss, hwm)
	}
	if o.DaemonPID > 0 {
		dcpu, err := procCPU(o.DaemonPID)
		if err != nil {
			return fmt.Errorf("bench milter: --daemon-pid: %w", err)
		}
		dcpu -= dcpu0
		rss, hwm := procMemory(strconv.Itoa(o.DaemonPID))
		fmt.Fprintf(out, "daemon          %.0f µs CPU per message (%.0f%% of 2 cores); VmRSS %s, VmHWM %s (process %d alone)\n",
			float64(dcpu.Microseconds())/float64(len(results)), 100*dcpu.Seconds()/elapsed.Seconds()/2, rss, hwm, o.DaemonPID)
	}
	return nil
}

// serverName says which milter server is driven.
func serverName(o *MilterOptions) string {
	if o.Addr != "" {
		return "milter at " + o.Addr
	}
	return "server " + o.Server
}

// startTarget returns the running milter of o.Addr, or starts one in
// process over the benchmark's store.
func startTarget(ctx context.Context, o *MilterOptions, templates [][]byte, out io.Writer) (*target, error) {
	if o.Addr != "" {
		network, addr, err := config.SplitListen(o.Addr)
		if err != nil {
			return nil, fmt.Errorf("--addr: %w", err)
		}
		return &target{network: network, addr: addr, close: func() {}}, nil
	}
	cfg := *o.Config
	rt, err := milterStore(ctx, &cfg, o, templates, out)
	if err != nil {
		return nil, err
	}
	srv, err := milter.New(rt.Engine.Checker, milter.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		rt.Close()
		return nil, err
	}
	ln, cleanup, err := listen(o.Network)
	if err != nil {
		rt.Close()
		return nil, err
	}
	serve, shutdown := srv.Serve, srv.Shutdown
	if o.Server != "own" {
		dsrv := djmilter.New(srv, djmilter.Options{Buffered: o.Server == "d--j-buffered"})
		serve, shutdown = dsrv.Serve, dsrv.Shutdown
	}
	go serve(ln)
	return &target{
		network: o.Network, addr: ln.Addr().String(), cacheStats: rt.Engine.Checker.CacheStats,
		close: func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			shutdown(sctx)
			cleanup()
			rt.Close()
		},
	}, nil
}

// listen opens the in-process milter's socket on loopback or in a
// temporary directory.
func listen(network string) (net.Listener, func(), error) {
	switch network {
	case "tcp":
		ln, err := milter.Listen("tcp", "127.0.0.1:0")
		return ln, func() {}, err
	case "unix":
		sockDir, err := os.MkdirTemp("", "nddmilter-bench-")
		if err != nil {
			return nil, nil, fmt.Errorf("bench milter: %w", err)
		}
		ln, err := milter.Listen("unix", filepath.Join(sockDir, "milter.sock"))
		if err != nil {
			os.RemoveAll(sockDir)
			return nil, nil, err
		}
		return ln, func() { os.RemoveAll(sockDir) }, nil
	}
	return nil, nil, fmt.Errorf("bench milter: --network %q: want tcp or unix", network)
}

// drive sends the messages over o.Sessions concurrent sessions.
func drive(o *MilterOptions, tg *target, msgs []benchMsg) ([]result, error) {
	results := make([]result, len(msgs))
	var wg sync.WaitGroup
	errs := make(chan error, o.Sessions)
	next := make(chan int, len(msgs))
	for i := range msgs {
		next <- i
	}
	close(next)
	client := gomilter.NewClientWithOptions(tg.network, tg.addr, gomilter.ClientOptions{
		Dialer:      mtadial.Dialer{},
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		ActionMask: gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
		// What Postfix offers at milter protocol 6: every step may go
		// without a reply (the milter chooses). ReplyEachStep offers
		// none, as an MTA speaking protocol 2 would.
		ProtocolMask: mtaProtocol(o.ReplyEachStep),
	})
	for s := 0; s < o.Sessions; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := session(client, msgs, next, results); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return results, <-errs
}

// session sends the messages it takes from next over one milter session.
func session(client *gomilter.Client, msgs []benchMsg, next <-chan int, results []result) error {
	sess, err := client.Session()
	if err != nil {
		return err
	}
	defer sess.Close()
	if _, err := sess.Conn("mx.example.net", gomilter.FamilyInet, 25, "192.0.2.1"); err != nil {
		return err
	}
	for i := range next {
		m := msgs[i]
		t0 := time.Now()
		var verdict string
		act, err := send(sess, m, i, &verdict)
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		results[i] = result{lat: time.Since(t0), action: act, spam: m.spam, verdict: verdict}
	}
	return nil
}

// printMilter prints the throughput, CPU, latency and action lines.
func printMilter(out io.Writer, o *MilterOptions, results []result, spamCount int, elapsed, cpu time.Duration) {
	lats := make([]time.Duration, len(results))
	actions := map[string]int{}
	caught, falsePos := 0, 0
	samples := map[string]string{}
	for i, r := range results {
		lats[i] = r.lat
		actions[r.action]++
		if _, ok := samples[r.action]; !ok && r.verdict != "" && r.action != "accept" {
			samples[r.action] = r.verdict
		}
		if r.action != "accept" {
			if r.spam {
				caught++
			} else {
				falsePos++
			}
		}
	}
	slices.Sort(lats)
	fmt.Fprintf(out, "throughput      %.0f messages/s (%d in %s, CPU %.0f%% of %d cores)\n",
		float64(o.Messages)/elapsed.Seconds(), o.Messages, elapsed.Round(time.Millisecond),
		100*cpu.Seconds()/elapsed.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU())
	who := "whole process: milter server, engine, store and the go-milter clients"
	if o.Addr != "" {
		who = "this process: the go-milter clients only"
	}
	fmt.Fprintf(out, "cpu             %.0f µs per message (%s)\n", float64(cpu.Microseconds())/float64(o.Messages), who)
	fmt.Fprintf(out, "latency         p50 %s  p90 %s  p99 %s  max %s (MAIL FROM to final reply)\n",
		pct(lats, 0.50), pct(lats, 0.90), pct(lats, 0.99), lats[len(lats)-1].Round(time.Microsecond))
	var acts []string
	for a, n := range actions {
		acts = append(acts, fmt.Sprintf("%s %d", a, n))
	}
	slices.Sort(acts)
	fmt.Fprintf(out, "actions         %s; campaign copies acted on %d/%d, legitimate acted on %d/%d\n",
		strings.Join(acts, ", "), caught, spamCount, falsePos, o.Messages-spamCount)
	if o.Addr != "" && caught == 0 && spamCount > 0 {
		fmt.Fprintln(out, "note            no campaign copy was acted on: the daemon's store does not hold the benchmark's campaigns (run the daemon on a store built by bench milter --dir DIR)")
	}
	for _, a := range []string{"tag", "quarantine"} {
		if v, ok := samples[a]; ok {
			fmt.Fprintf(out, "sample %-10s X-NDD-Verdict: %s\n", a, v)
		}
	}
}

func pct(sorted []time.Duration, p float64) time.Duration {
	return percentile(sorted, p).Round(time.Microsecond)
}

// send sends one message as Postfix does and returns the action.
func send(s *gomilter.ClientSession, m benchMsg, i int, verdict *string) (string, error) {
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
	return actionOf(mods, act, verdict), nil
}

// actionOf names what the milter did with a message.
func actionOf(mods []gomilter.ModifyAction, act *gomilter.Action, verdict *string) string {
	switch act.Code {
	case gomilter.ActReplyCode:
		if act.SMTPCode >= 500 {
			return "reject"
		}
		return "tempfail"
	case gomilter.ActTempFail:
		return "tempfail"
	}
	for _, m := range mods {
		if m.Code == gomilter.ActQuarantine {
			return "quarantine"
		}
	}
	for _, m := range mods {
		if m.Code == gomilter.ActAddHeader && strings.HasSuffix(m.HeaderName, "Verdict") {
			a, _, _ := strings.Cut(m.HeaderValue, ";")
			*verdict = m.HeaderValue
			return a
		}
	}
	return "accept"
}

// mtaProtocol is the protocol mask the driver offers: Postfix 3's at
// version 6, or none.
func mtaProtocol(replyEach bool) gomilter.OptProtocol {
	if replyEach {
		return 0
	}
	return mtadial.PostfixProtocol
}
