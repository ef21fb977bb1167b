package flood

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/lab/mtadial"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

// HostileOptions configure RunHostile: the CPU attack of hostile content.
// Zero values select the defaults.
type HostileOptions struct {
	// Network and Addr locate the milter (e.g. "tcp", "127.0.0.1:8899").
	Network, Addr string
	// APIURL and Token reach the daemon's API, through which the campaign
	// is reported (and the API is attacked). Required.
	APIURL, Token string
	// PID is the daemon's process id, for its CPU time (/proc/PID/stat);
	// 0: CPU not measured.
	PID int
	// Reporters is the number of accounts that report the campaign.
	// Default 5 (the default policy rejects from 3 with I-Match evidence).
	Reporters int
	// Sessions is the number of parallel milter sessions. Default 16.
	Sessions int
	// Copies is the number of hostile copies sent over Sessions, the
	// kinds taken in turn; Ordinary the copies of the campaign as
	// reported, interleaved with them. Defaults 48 and 16.
	Copies, Ordinary int
	// Kinds are the hostile kinds used. Default spamgen.HostileKinds.
	Kinds []spamgen.Hostile
	// BodyBytes is the hostile content of a body kind (default 1,020,000:
	// 340,000 × U+FDFA), HeaderBytes that of a header kind (default
	// 512 KiB). Body kinds stay under MaxBodyBytes, header kinds under the
	// milter's 1 MiB of headers: what an MTA with its usual limits passes.
	BodyBytes, HeaderBytes int
	// MaxBodyBytes is the milter's milter.max_body_bytes, to count the
	// bytes it scans. Default 1 MiB.
	MaxBodyBytes int
	// APIBytes is the size of the encoded-word message posted to
	// /v1/check and /v1/reports. Default 4.2 MB; negative: not posted.
	APIBytes int
	// Alone is how many times each kind is sent alone, one copy after
	// the other, before the attack, to measure its CPU time by itself
	// (the kernel counts it in 10 ms ticks). Default 0: not sent alone.
	Alone int
	// IdleWindow is how long after the last reply the daemon's CPU time
	// is watched: it must not grow in the second half. Default 1 s.
	IdleWindow time.Duration
	// Timeout bounds the whole run. Default 3 minutes.
	Timeout time.Duration
}

func (o HostileOptions) withDefaults() HostileOptions {
	if o.Network == "" {
		o.Network = "tcp"
	}
	if o.Reporters <= 0 {
		o.Reporters = 5
	}
	if o.Sessions <= 0 {
		o.Sessions = 16
	}
	if o.Copies <= 0 {
		o.Copies = 48
	}
	if o.Ordinary < 0 {
		o.Ordinary = 0
	} else if o.Ordinary == 0 {
		o.Ordinary = 16
	}
	if len(o.Kinds) == 0 {
		o.Kinds = spamgen.HostileKinds()
	}
	if o.BodyBytes <= 0 {
		o.BodyBytes = 340_000 * 3
	}
	if o.HeaderBytes <= 0 {
		o.HeaderBytes = 512 << 10
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.APIBytes == 0 {
		o.APIBytes = 4_200_000
	}
	if o.IdleWindow <= 0 {
		o.IdleWindow = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Minute
	}
	return o
}

// Campaign is the spam campaign the attack reports and then sends in
// hostile copies: long enough for I-Match and ANDD signatures.
const (
	CampaignSubject = "Your pharmacy order is ready for pickup"
	CampaignText    = `Dear valued customer,

We are pleased to inform you that our online pharmacy now offers the lowest
prices on all prescription medicines, with discreet packaging and fast
worldwide delivery. No prescription is required and every order is shipped
within twenty four hours from our certified warehouse.

This week only you can save up to eighty percent on the most popular brands.
Our licensed doctors review every order free of charge, and our friendly
support team answers your questions by phone or email around the clock.

Thousands of satisfied customers already trust us with their health. Join
them today and receive a free bonus package with your first order, together
with a voucher for your next purchase. Payment is safe and secure with all
major credit cards.

Visit our store now and enter your personal discount code at checkout to
claim this exclusive offer before it expires at the end of the month.
Unsubscribe from our mailing list at any time by replying to this message.
`
)

// KindResult is what the milter answered to the copies of one kind.
type KindResult struct {
	Kind string
	// Bytes is the size of one copy (headers + body); Scanned what the
	// milter scans of it (its body up to MaxBodyBytes).
	Bytes, Scanned int
	// Actions counts the replies: reject, tempfail, quarantine, tag,
	// accept, "unchecked REASON", "failed" (no reply: session error).
	Actions map[string]int
	// AloneCPU and AloneWall are the daemon's CPU time and the reply time
	// per copy sent alone (Options.Alone), AloneAction the last answer.
	AloneCPU, AloneWall time.Duration
	AloneAction         string
}

// APIResult is one API request with the large encoded-word message.
type APIResult struct {
	Route  string
	Status int
	Answer string // the action, outcome or error
	Wall   time.Duration
}

// HostileResult is what RunHostile measured.
type HostileResult struct {
	// Before is the action a copy of the campaign got before the attack
	// (checked through the API, dry run).
	Before string
	// Kinds are the hostile copies by kind, Ordinary the plain copies.
	Kinds    []KindResult
	Ordinary KindResult
	// Sent is the number of copies sent during the attack, Scanned the
	// bytes the milter scans of them, HostileScanned those of the hostile
	// copies.
	Sent                    int
	Scanned, HostileScanned int64
	// Wall is the time from the first connection to the last reply; CPU
	// the daemon's CPU time over it.
	Wall, CPU time.Duration
	// CPUAfter is the daemon's CPU time in the first IdleWindow after the
	// last reply, CPUIdle in the second.
	CPUAfter, CPUIdle time.Duration
	// API are the API requests with the large message.
	API []APIResult
	// Load is the 1-minute load average at the end (from /proc/loadavg).
	Load string
}

// Unchecked counts the copies answered without a check, or not answered.
func (r HostileResult) Unchecked() int {
	n := 0
	for _, k := range append(slices.Clone(r.Kinds), r.Ordinary) {
		for a, c := range k.Actions {
			if strings.HasPrefix(a, "unchecked") || a == "failed" {
				n += c
			}
		}
	}
	return n
}

// RunHostile reports the campaign from o.Reporters accounts, sends the
// hostile and ordinary copies over o.Sessions parallel milter sessions,
// watches the daemon's CPU time until it is idle again, then posts the
// large encoded-word message to the API.
func RunHostile(ctx context.Context, o HostileOptions) (HostileResult, error) {
	o = o.withDefaults()
	var res HostileResult
	if o.APIURL == "" {
		return res, errors.New("hostile: the daemon's API URL is required (the campaign is reported through it)")
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cl := &api.Client{BaseURL: o.APIURL, Token: o.Token}
	plain := spamgen.NewMessage(CampaignSubject, CampaignText, false)
	for i := range o.Reporters {
		if _, err := cl.Report(ctx, plain, store.KindSpam, "reporter"+strconv.Itoa(i+1)); err != nil {
			return res, fmt.Errorf("hostile: report the campaign: %w", err)
		}
	}
	v, err := cl.Check(ctx, plain, false)
	if err != nil {
		return res, fmt.Errorf("hostile: check the campaign: %w", err)
	}
	res.Before = v.Action.String()

	type job struct {
		kind int // index in res.Kinds; -1: ordinary
		raw  []byte
	}
	copies := make([][]byte, len(o.Kinds))
	for i, k := range o.Kinds {
		size := o.BodyBytes
		if spamgen.HostileHeader(k) {
			size = o.HeaderBytes
		}
		copies[i] = spamgen.HostileCopy(k, size, CampaignSubject, CampaignText)
		res.Kinds = append(res.Kinds, KindResult{Kind: string(k), Bytes: len(copies[i]),
			Scanned: scanned(copies[i], o.MaxBodyBytes), Actions: map[string]int{}})
	}
	res.Ordinary = KindResult{Kind: "ordinary copy", Bytes: len(plain), Scanned: scanned(plain, o.MaxBodyBytes), Actions: map[string]int{}}

	for i := range o.Kinds {
		if o.Alone <= 0 {
			break
		}
		c0, t0 := cpuOf(o.PID), time.Now()
		for range o.Alone {
			act, err := sendOne(o, copies[i], i)
			if err != nil {
				act = "failed"
			}
			res.Kinds[i].AloneAction = act
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
		}
		k := &res.Kinds[i]
		k.AloneWall, k.AloneCPU = time.Since(t0)/time.Duration(o.Alone), (cpuOf(o.PID)-c0)/time.Duration(o.Alone)
	}

	// The attack: hostile copies, an ordinary copy after every few.
	var jobs []job
	every := 0
	if o.Ordinary > 0 {
		every = max(1, o.Copies/o.Ordinary)
	}
	ord := 0
	for i := range o.Copies {
		k := i % len(o.Kinds)
		jobs = append(jobs, job{k, copies[k]})
		if every > 0 && (i+1)%every == 0 && ord < o.Ordinary {
			jobs = append(jobs, job{-1, plain})
			ord++
		}
	}
	for ; ord < o.Ordinary; ord++ {
		jobs = append(jobs, job{-1, plain})
	}
	res.Sent = len(jobs)
	for _, j := range jobs {
		n := int64(res.Ordinary.Scanned)
		if j.kind >= 0 {
			n = int64(res.Kinds[j.kind].Scanned)
			res.HostileScanned += n
		}
		res.Scanned += n
	}

	next := make(chan int)
	var mu sync.Mutex
	var last time.Time
	var wg sync.WaitGroup
	c0, t0 := cpuOf(o.PID), time.Now()
	for range o.Sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				act, err := sendOne(o, jobs[i].raw, i)
				if err != nil {
					act = "failed"
				}
				mu.Lock()
				last = time.Now()
				if k := jobs[i].kind; k >= 0 {
					res.Kinds[k].Actions[act]++
				} else {
					res.Ordinary.Actions[act]++
				}
				mu.Unlock()
			}
		}()
	}
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	c1 := cpuOf(o.PID)
	res.Wall, res.CPU = last.Sub(t0), c1-c0
	// Is the daemon idle again? Its CPU time over two windows after the
	// last reply.
	sleep(ctx, time.Until(last.Add(o.IdleWindow)))
	c2 := cpuOf(o.PID)
	sleep(ctx, o.IdleWindow)
	c3 := cpuOf(o.PID)
	res.CPUAfter, res.CPUIdle = c2-c1, c3-c2

	if o.APIBytes > 0 {
		big := spamgen.HostileCopy(spamgen.EncodedWordFlood, o.APIBytes, CampaignSubject, CampaignText)
		for _, route := range []string{"/v1/check", "/v1/reports"} {
			r := APIResult{Route: route}
			t := time.Now()
			var err error
			if route == "/v1/check" {
				var v campaign.Verdict
				v, err = cl.Check(ctx, big, false)
				r.Answer = v.Action.String()
			} else {
				var out api.Outcome
				out, err = cl.Report(ctx, big, store.KindSpam, "attacker")
				r.Answer = fmt.Sprintf("campaign %d", out.Campaign)
				if out.Skipped != "" {
					r.Answer = "skipped: " + out.Skipped
				}
			}
			r.Wall, r.Status = time.Since(t), 200
			var ae *api.Error
			switch {
			case errors.As(err, &ae):
				r.Status, r.Answer = ae.Status, ae.Message
			case err != nil:
				r.Status, r.Answer = 0, err.Error()
			}
			res.API = append(res.API, r)
		}
	}
	res.Load = loadAverage()
	return res, ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// scanned is what the milter scans of a message: its header and up to
// maxBody bytes of its body.
func scanned(raw []byte, maxBody int) int {
	i := strings.Index(string(raw), "\r\n\r\n")
	if i < 0 {
		return len(raw)
	}
	return i + 4 + min(len(raw)-i-4, maxBody)
}

// sendOne sends one message over a new milter session, as Postfix does,
// and names the milter's answer: reject, tempfail, quarantine, the
// verdict header's action (tag, accept), "unchecked REASON".
func sendOne(o HostileOptions, raw []byte, i int) (string, error) {
	cl := gomilter.NewClientWithOptions(o.Network, o.Addr, gomilter.ClientOptions{
		Dialer:       mtadial.Dialer{Timeout: 5 * time.Second},
		ReadTimeout:  30 * time.Second,
		WriteTimeout: 30 * time.Second,
		ActionMask:   gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
		ProtocolMask: gomilter.OptProtocol(mtadial.PostfixProtocol),
	})
	s, err := cl.Session()
	if err != nil {
		return "", err
	}
	defer s.Close()
	head, body, _ := strings.Cut(string(raw), "\r\n\r\n")
	steps := []func() (*gomilter.Action, error){
		func() (*gomilter.Action, error) { return s.Mail("<sender@campaign.example>", nil) },
		func() (*gomilter.Action, error) { return s.Rcpt("<user"+strconv.Itoa(i)+"@example.org>", nil) },
	}
	for _, f := range spamgen.HeaderFields(head) {
		name, value, _ := strings.Cut(f, ":")
		value = strings.ReplaceAll(strings.TrimLeft(value, " "), "\r\n", "\n")
		steps = append(steps, func() (*gomilter.Action, error) { return s.HeaderField(name, value) })
	}
	steps = append(steps, s.HeaderEnd)
	for b := body; len(b) > 0; {
		chunk := b[:min(len(b), gomilter.MaxBodyChunk)]
		b = b[len(chunk):]
		steps = append(steps, func() (*gomilter.Action, error) { return s.BodyChunk([]byte(chunk)) })
	}
	early, mods, a, err := play(s, steps)
	if err != nil || early != "" {
		return early, err
	}
	for _, m := range mods {
		if m.Code == gomilter.ActQuarantine {
			return "quarantine", nil
		}
	}
	for _, m := range mods {
		if m.Code == gomilter.ActAddHeader && strings.HasSuffix(m.HeaderName, "-Verdict") {
			if why, ok := strings.CutPrefix(m.HeaderValue, "unchecked; error="); ok {
				return "unchecked " + why, nil
			}
			act, _, _ := strings.Cut(m.HeaderValue, ";")
			return act, nil
		}
	}
	if a.Code == gomilter.ActReplyCode && a.SMTPCode >= 500 {
		return "reject", nil
	}
	if a.Code == gomilter.ActReplyCode && a.SMTPCode >= 400 {
		return "tempfail", nil
	}
	return actionName(a), nil
}

// cpuOf returns the user + system CPU time of a process from
// /proc/PID/stat (0 if unknown). Linux reports it in ticks of 1/100 s.
func cpuOf(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces) in ")".
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// Print writes the result in the form the docs quote.
func (r HostileResult) Print(w io.Writer, o HostileOptions) {
	o = o.withDefaults()
	fmt.Fprintf(w, "campaign          reported by %d accounts; a copy of it: %s\n", o.Reporters, r.Before)
	fmt.Fprintf(w, "%-22s %9s %9s", "kind", "bytes", "scanned")
	if o.Alone > 0 {
		fmt.Fprintf(w, " %9s %9s %8s %-10s", "alone-cpu", "MB/s-cpu", "wall", "alone")
	}
	fmt.Fprintf(w, "  under attack (%d sessions)\n", o.Sessions)
	for _, k := range append(slices.Clone(r.Kinds), r.Ordinary) {
		fmt.Fprintf(w, "%-22s %9d %9d", k.Kind, k.Bytes, k.Scanned)
		switch {
		case o.Alone <= 0:
		case k.AloneAction == "":
			fmt.Fprintf(w, " %9s %9s %8s %-10s", "-", "-", "-", "-")
		default:
			rate := ">" + strconv.FormatFloat(float64(k.Scanned*o.Alone)/1e6/0.01, 'f', 0, 64) // under a tick
			if k.AloneCPU > 0 {
				rate = strconv.FormatFloat(float64(k.Scanned)/1e6/k.AloneCPU.Seconds(), 'f', 0, 64)
			}
			fmt.Fprintf(w, " %9s %9s %8s %-10s", k.AloneCPU.Round(100*time.Microsecond), rate, k.AloneWall.Round(100*time.Microsecond), k.AloneAction)
		}
		fmt.Fprintf(w, "  %s\n", fmtActions(k.Actions))
	}
	mb := float64(r.Scanned) / 1e6
	fmt.Fprintf(w, "attack            %d copies (%.1f MB scanned, %.1f MB hostile) over %d sessions: last reply after %s\n",
		r.Sent, mb, float64(r.HostileScanned)/1e6, o.Sessions, r.Wall.Round(time.Millisecond))
	if o.PID > 0 {
		rate := "-"
		if r.CPU > 0 {
			rate = strconv.FormatFloat(mb/r.CPU.Seconds(), 'f', 1, 64)
		}
		fmt.Fprintf(w, "daemon CPU        %s for the attack: %.1f ms per MB scanned, %s MB/s on one core\n",
			r.CPU, float64(r.CPU.Milliseconds())/mb, rate)
		fmt.Fprintf(w, "after last reply  CPU %d ms in the first %s, %d ms in the next\n", r.CPUAfter.Milliseconds(), o.IdleWindow, r.CPUIdle.Milliseconds())
	}
	fmt.Fprintf(w, "unchecked         %d of %d copies\n", r.Unchecked(), r.Sent)
	for _, a := range r.API {
		fmt.Fprintf(w, "API %-13s %d B encoded-word message: status %d in %.3f s: %s\n", a.Route, o.APIBytes, a.Status, a.Wall.Seconds(), a.Answer)
	}
	fmt.Fprintf(w, "load average      %s\n", r.Load)
}

func fmtActions(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	var b strings.Builder
	for i, k := range ks {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", strings.ReplaceAll(k, " ", ":"), m[k])
	}
	return b.String()
}
