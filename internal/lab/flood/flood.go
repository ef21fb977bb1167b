// Package flood measures a running milter under attack, for loopback only,
// every loop bounded in count and time.
//
// Run is the memory-exhaustion attack: many hostile sessions each send
// large headers, a large body and most of a maximal packet, then wait
// without ending the message, while ordinary messages keep being checked.
// It reports the daemon's resident memory (VmRSS from /proc) and the
// latency of the ordinary checks before and during the attack.
//
// RunHostile is the CPU attack of hostile content: copies of a reported
// campaign made costly to check, over parallel sessions. It reports what
// each copy got (every one must get a real verdict, none "unchecked"),
// the daemon's CPU time per MB scanned (/proc/PID/stat) and whether it is
// idle again right after the last reply.
package flood

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/lab/mtadial"
)

// Options configure a run. Zero values select the defaults.
type Options struct {
	// Network and Addr locate the milter (e.g. "tcp", "127.0.0.1:8899").
	Network, Addr string
	// PID is the daemon's process id, for VmRSS; 0: memory not measured.
	PID int
	// Sessions is the number of hostile sessions. Default 500; negative:
	// none (only ordinary messages, e.g. to see that a milter answers).
	Sessions int
	// HeaderBytes, BodyBytes and PacketBytes are what each hostile session
	// sends: headers, body, then that much of a maximal (1 MiB) body
	// packet. Defaults 1 MiB, 1 MiB, 900 KiB.
	HeaderBytes, BodyBytes, PacketBytes int
	// Checks is the number of ordinary messages sent before and again
	// during the attack, by Concurrency sessions. Defaults 200 and 4.
	Checks, Concurrency int
	// Timeout bounds the whole run. Default 2 minutes.
	Timeout time.Duration
	// Seed makes the ordinary messages reproducible. Default 1.
	Seed uint64
}

func (o Options) withDefaults() Options {
	if o.Network == "" {
		o.Network = "tcp"
	}
	if o.Sessions == 0 {
		o.Sessions = 500
	}
	if o.HeaderBytes <= 0 {
		o.HeaderBytes = 1 << 20
	}
	if o.BodyBytes <= 0 {
		o.BodyBytes = 1 << 20
	}
	if o.PacketBytes <= 0 {
		o.PacketBytes = 900 << 10
	}
	o.PacketBytes = min(o.PacketBytes, maxPacket-2)
	if o.Checks <= 0 {
		o.Checks = 200
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

// Latency summarizes the ordinary checks of one phase. Actions counts the
// final replies by name; "unchecked REASON" are messages the milter
// accepted without checking them (its verdict header says so).
type Latency struct {
	N        int
	Failed   int            // sessions that failed (connection, protocol)
	Actions  map[string]int // final replies: accept, reject, tempfail, ...
	P50, P99 time.Duration
	Max      time.Duration
}

// Result is what a run measured.
type Result struct {
	// Hostile is the number of hostile sessions that sent their whole
	// load and were left waiting; HostileFailed those that could not
	// (refused or closed by the milter).
	Hostile, HostileFailed int
	// RSSBefore is the daemon's VmRSS before the attack, RSSPeak the
	// highest sampled during it, RSSAttack the value once every hostile
	// session was waiting (bytes; 0 when PID is 0).
	RSSBefore, RSSPeak, RSSAttack int64
	// Before and During are the ordinary checks without and under attack.
	Before, During Latency
	// Load is the 1-minute load average at the end (from /proc/loadavg).
	Load string
}

// maxPacket is the milter's packet cap (internal/milter).
const maxPacket = 1 << 20

// Run performs the measurement: ordinary checks, then the hostile
// sessions, then ordinary checks again while they wait.
func Run(ctx context.Context, o Options) (Result, error) {
	o = o.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var res Result
	res.RSSBefore = rss(o.PID)

	var err error
	if res.Before, err = checks(ctx, o, 0); err != nil {
		return res, fmt.Errorf("ordinary checks before the attack: %w", err)
	}

	// Sample the daemon's memory for the whole attack.
	var peakMu sync.Mutex
	sampleDone := make(chan struct{})
	stopSample := make(chan struct{})
	go func() {
		defer close(sampleDone)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			r := rss(o.PID)
			peakMu.Lock()
			res.RSSPeak = max(res.RSSPeak, r)
			peakMu.Unlock()
			select {
			case <-stopSample:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	// Hostile sessions: open, send their load, wait until released.
	release := make(chan struct{})
	var conns []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32) // dial and send a few at a time
	var failed int
	for i := 0; i < o.Sessions && ctx.Err() == nil; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			c, err := hostile(ctx, o, i)
			<-sem
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			conns = append(conns, c)
		}(i)
	}
	wg.Wait()
	res.Hostile, res.HostileFailed = len(conns), failed
	defer func() {
		close(release)
		for _, c := range conns {
			c.Close()
		}
	}()
	// Let the daemon take in what was sent.
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	res.RSSAttack = rss(o.PID)

	res.During, err = checks(ctx, o, 1)
	close(stopSample)
	<-sampleDone
	res.RSSPeak = max(res.RSSPeak, res.RSSAttack)
	res.Load = loadAverage()
	if err != nil {
		return res, fmt.Errorf("ordinary checks during the attack: %w", err)
	}
	return res, ctx.Err()
}

// hostile opens one hostile session and sends its load; the returned
// connection is left open (mid-message) until closed.
func hostile(ctx context.Context, o Options, i int) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, o.Network, o.Addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	fail := func(err error) (net.Conn, error) {
		c.Close()
		return nil, fmt.Errorf("hostile session %d: %w", i, err)
	}
	var neg [12]byte
	binary.BigEndian.PutUint32(neg[0:], 6)
	binary.BigEndian.PutUint32(neg[4:], 0x1ff)
	binary.BigEndian.PutUint32(neg[8:], mtadial.PostfixProtocol)
	if _, err := c.Write(packet('O', neg[:])); err != nil {
		return fail(err)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return fail(fmt.Errorf("option negotiation: %w", err))
	}
	rep := make([]byte, min(binary.BigEndian.Uint32(hdr[:]), 1024))
	if _, err := io.ReadFull(c, rep); err != nil {
		return fail(fmt.Errorf("option negotiation: %w", err))
	}
	// Anything the milter sends later (it replies to nothing it was told
	// not to wait for) is read and dropped.
	go io.Copy(io.Discard, c)

	w := &writer{c: c}
	w.packet('M', []byte("<attacker@example.net>\x00"))
	w.packet('R', []byte("<victim@example.org>\x00"))
	chunk := strings.Repeat("x", 60000)
	for n, k := 0, 0; n < o.HeaderBytes; k++ {
		v := chunk[:min(len(chunk), o.HeaderBytes-n)]
		w.packet('L', []byte("X-Pad-"+strconv.Itoa(k)+"\x00"+v+"\x00"))
		n += len(v)
	}
	w.packet('N', nil)
	body := []byte(strings.Repeat("spam spam spam spam\r\n", 3300)[:65535])
	for n := 0; n < o.BodyBytes; n += len(body) {
		w.packet('B', body[:min(len(body), o.BodyBytes-n)])
	}
	// Most of a maximal body packet: the length says 1 MiB, less arrives.
	var ph [5]byte
	binary.BigEndian.PutUint32(ph[:4], maxPacket)
	ph[4] = 'B'
	w.write(ph[:])
	part := make([]byte, o.PacketBytes)
	for j := range part {
		part[j] = 'y'
	}
	w.write(part)
	if w.err != nil {
		return fail(w.err)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

type writer struct {
	c   net.Conn
	err error
}

func (w *writer) write(b []byte) {
	if w.err == nil {
		_, w.err = w.c.Write(b)
	}
}

func (w *writer) packet(cmd byte, data []byte) { w.write(packet(cmd, data)) }

func packet(cmd byte, data []byte) []byte {
	p := binary.BigEndian.AppendUint32(make([]byte, 0, 5+len(data)), uint32(1+len(data)))
	return append(append(p, cmd), data...)
}

// checks sends o.Checks ordinary messages over o.Concurrency sessions.
func checks(ctx context.Context, o Options, phase uint64) (Latency, error) {
	l := Latency{Actions: map[string]int{}}
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	next := make(chan int)
	go func() {
		defer close(next)
		for i := 0; i < o.Checks; i++ {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for w := 0; w < o.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := gomilter.NewClientWithOptions(o.Network, o.Addr, gomilter.ClientOptions{
				Dialer:       mtadial.Dialer{Timeout: 5 * time.Second},
				ReadTimeout:  10 * time.Second,
				WriteTimeout: 10 * time.Second,
				ActionMask:   gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
				ProtocolMask: gomilter.OptProtocol(mtadial.PostfixProtocol),
			})
			var s *gomilter.ClientSession
			defer func() {
				if s != nil {
					s.Close()
				}
			}()
			for i := range next {
				if s == nil {
					var err error
					if s, err = cl.Session(); err != nil {
						mu.Lock()
						l.Failed++
						mu.Unlock()
						s = nil
						continue
					}
				}
				rng := rand.New(rand.NewPCG(o.Seed, phase<<32|uint64(i)))
				t0 := time.Now()
				act, err := ordinary(s, rng, i)
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					l.Failed++
					s.Close()
					s = nil
				} else {
					lat = append(lat, d)
					l.Actions[act]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	l.N = len(lat)
	if l.N > 0 {
		l.P50 = lat[l.N/2]
		l.P99 = lat[min(l.N-1, l.N*99/100)]
		l.Max = lat[l.N-1]
	}
	if l.N == 0 {
		return l, errors.New("no ordinary message got a reply")
	}
	return l, nil
}

var words = strings.Fields(`the meeting agenda project report budget review
quarter team schedule update please find attached notes customer order
invoice delivery question answer thanks regards tomorrow morning office
release version document draft proposal contract payment account summary`)

// ordinary sends one ordinary message (a few KB of text) and returns the
// final reply's name.
func ordinary(s *gomilter.ClientSession, rng *rand.Rand, i int) (string, error) {
	var b strings.Builder
	for n := 0; n < 300+rng.IntN(500); n++ {
		b.WriteString(words[rng.IntN(len(words))])
		if n%12 == 11 {
			b.WriteString("\r\n")
		} else {
			b.WriteByte(' ')
		}
	}
	b.WriteString("\r\n")
	steps := []func() (*gomilter.Action, error){
		func() (*gomilter.Action, error) { return s.Mail("<colleague@example.net>", nil) },
		func() (*gomilter.Action, error) { return s.Rcpt("<user@example.org>", nil) },
		func() (*gomilter.Action, error) { return s.HeaderField("From", "Colleague <colleague@example.net>") },
		func() (*gomilter.Action, error) { return s.HeaderField("To", "user@example.org") },
		func() (*gomilter.Action, error) {
			return s.HeaderField("Subject", words[rng.IntN(len(words))]+" "+strconv.Itoa(i))
		},
		func() (*gomilter.Action, error) {
			return s.HeaderField("Message-ID", "<"+strconv.Itoa(i)+"."+strconv.FormatUint(rng.Uint64(), 36)+"@example.net>")
		},
		s.HeaderEnd,
		func() (*gomilter.Action, error) { return s.BodyChunk([]byte(b.String())) },
	}
	early, mods, a, err := play(s, steps)
	if err != nil || early != "" {
		return early, err
	}
	for _, m := range mods {
		if m.Code == gomilter.ActAddHeader && strings.HasSuffix(m.HeaderName, "-Verdict") &&
			strings.HasPrefix(m.HeaderValue, "unchecked") {
			// Accepted without a check: say why (e.g. overload-bytes).
			why, _ := strings.CutPrefix(m.HeaderValue, "unchecked; error=")
			return "unchecked " + why, nil
		}
	}
	return actionName(a), nil
}

// play sends a message's steps in order. When the milter answers a step
// with anything but continue, early names that answer; otherwise play
// ends the message and returns the milter's modifications and final
// action.
func play(s *gomilter.ClientSession, steps []func() (*gomilter.Action, error)) (early string, mods []gomilter.ModifyAction, final *gomilter.Action, err error) {
	for _, f := range steps {
		a, err := f()
		if err != nil {
			return "", nil, nil, err
		}
		if a.Code != gomilter.ActContinue {
			return actionName(a), nil, nil, nil
		}
	}
	mods, final, err = s.End()
	return "", mods, final, err
}

// actionName names a milter reply: accept, reject, tempfail, "reply CODE", …
func actionName(a *gomilter.Action) string {
	switch a.Code {
	case gomilter.ActAccept, gomilter.ActContinue:
		return "accept"
	case gomilter.ActReject:
		return "reject"
	case gomilter.ActTempFail:
		return "tempfail"
	case gomilter.ActReplyCode:
		return "reply " + strconv.Itoa(a.SMTPCode)
	case gomilter.ActDiscard:
		return "discard"
	}
	return string(rune(a.Code))
}

// rss returns the VmRSS of a process in bytes (0 if unknown).
func rss(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// Print writes the result in the form the docs quote.
func (r Result) Print(w io.Writer, o Options) {
	o = o.withDefaults()
	mb := func(n int64) string { return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + " MB" }
	if o.Sessions > 0 {
		fmt.Fprintf(w, "hostile sessions  %d waiting, %d failed (each %d B headers, %d B body, %d B of a 1 MiB packet)\n",
			r.Hostile, r.HostileFailed, o.HeaderBytes, o.BodyBytes, o.PacketBytes)
	}
	if o.PID > 0 {
		fmt.Fprintf(w, "daemon VmRSS      before %s, under attack %s, peak %s\n", mb(r.RSSBefore), mb(r.RSSAttack), mb(r.RSSPeak))
	}
	for _, p := range []struct {
		name string
		l    Latency
	}{{"before attack", r.Before}, {"during attack", r.During}} {
		fmt.Fprintf(w, "checks %s  n=%d failed=%d p50=%s p99=%s max=%s actions=%v\n", p.name, p.l.N, p.l.Failed,
			p.l.P50.Round(10*time.Microsecond), p.l.P99.Round(10*time.Microsecond), p.l.Max.Round(10*time.Microsecond), p.l.Actions)
	}
	fmt.Fprintf(w, "load average      %s\n", r.Load)
}
