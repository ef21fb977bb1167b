package eval

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/lab/stats"
	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/nddmilter/nddmilter/internal/zap"
	"github.com/nddmilter/nddmilter/internal/zap/move"
)

// ZapOptions configure RunZap. Zero values select the defaults.
type ZapOptions struct {
	// Users is the number of recipients, one copy each. Default 1,000.
	Users int
	// Span is how long the copies take to arrive (uniformly). Default
	// 30 min.
	Span time.Duration
	// End is when the mailboxes are counted, from the first copy.
	// Default 2 h.
	End time.Duration
	// ReportShare is the share of recipients who report their copy (move
	// it to Junk), ReportMean the mean of their delay after delivery
	// (exponential). Defaults 3% and 10 min.
	ReportShare float64
	ReportMean  time.Duration
	// ReadMean is the mean delay before a recipient reads a copy
	// (exponential); a read copy is not purged. Default 1 h.
	ReadMean time.Duration
	// Rate is the purge's moves per second (zap.rate). Default 10.
	Rate float64
	// Seed selects the copies and the users' delays. Default 1.
	Seed uint64
	// TempDir holds the stores and ledgers. Default the system's.
	TempDir string
	Log     *slog.Logger
}

func (o *ZapOptions) defaults() {
	if o.Users <= 0 {
		o.Users = 1000
	}
	if o.Span <= 0 {
		o.Span = 30 * time.Minute
	}
	if o.End <= 0 {
		o.End = 2 * time.Hour
	}
	if o.ReportShare <= 0 {
		o.ReportShare = 0.03
	}
	if o.ReportMean <= 0 {
		o.ReportMean = 10 * time.Minute
	}
	if o.ReadMean <= 0 {
		o.ReadMean = time.Hour
	}
	if o.Rate <= 0 {
		o.Rate = 10
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// ZapResult is the zero-hour purge scenario measured without and with
// the purge.
type ZapResult struct {
	Users       int     `json:"users"`
	Span        string  `json:"span"`
	End         string  `json:"end"`
	ReportShare float64 `json:"report_share"`
	ReportMean  string  `json:"report_mean"`
	ReadMean    string  `json:"read_mean"`
	Rate        float64 `json:"rate"`
	Off         ZapRun  `json:"off"`
	On          ZapRun  `json:"on"`
	// LedgerBytesPerMessage is the ledger's bytes (keys, values, index)
	// per message recorded.
	LedgerBytesPerMessage float64 `json:"ledger_bytes_per_message"`
	// RecordMicros is the milter path's CPU per message recorded (the
	// evidence encoded and handed to the ledger), WriteMicros the ledger
	// writer's (the batches written).
	RecordMicros float64 `json:"record_cpu_micros"`
	WriteMicros  float64 `json:"write_cpu_micros"`
	Elapsed      string  `json:"elapsed"`
}

// ZapRun is one run of the scenario.
type ZapRun struct {
	Delivered int `json:"delivered"` // copies let through (accepted or tagged)
	Blocked   int `json:"blocked"`   // quarantined or rejected at delivery
	Reports   int `json:"reports"`
	// Escalated is when the campaign reached the trigger (zap.trigger,
	// quarantine), from the first copy; negative: never.
	Escalated time.Duration `json:"escalated_ns"`
	// LeftUnread and LeftRead count the copies in INBOX at the end.
	LeftUnread int `json:"left_unread"`
	LeftRead   int `json:"left_read"`
	// Moved counts the copies the purge moved to Junk; Skipped those it
	// found read or gone.
	Moved   int `json:"moved"`
	Skipped int `json:"skipped"`
	// ToMoved are the p50, p99 and last of escalation → moved.
	ToMovedP50  time.Duration `json:"to_moved_p50_ns"`
	ToMovedP99  time.Duration `json:"to_moved_p99_ns"`
	ToMovedLast time.Duration `json:"to_moved_last_ns"`
}

const zapCampaignText = `Dear friend, we are pleased to announce that your account has been selected
for an exclusive investment opportunity with guaranteed monthly returns. Our
financial advisors have prepared a personal portfolio proposal for you.

Please confirm your participation by visiting our secure website and entering your
banking details before the offer expires at the end of this week. Thousands of
satisfied customers have already doubled their savings with our program.

Remember that this invitation is strictly personal and cannot be transferred.
Kind regards, the international investment department.`

// zapCopy is one user's copy and what the user does with it, in time
// from the first copy (negative: never).
type zapCopy struct {
	user      string
	raw       []byte
	delivered time.Duration
	read      time.Duration
	report    time.Duration
}

// RunZap is the scenario of docs/ZAP.md's measure: a campaign of Users
// randomized copies, one per user, arriving over Span; a share of the
// users report theirs after an exponential delay (if it is still in
// their INBOX), the others read theirs after another. Each copy goes
// through the real engine as the milter checks it, and, let through,
// into the real delivery ledger; reports go to the engine. Once without
// the purge, once with the real purger over a model of the mailboxes
// (moves at Rate per second; a read copy stays). The clock is simulated.
func RunZap(ctx context.Context, o ZapOptions) (*ZapResult, error) {
	start := time.Now()
	o.defaults()
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed*0x9e3779b97f4a7c15))
	base := spamgen.NewMessage("Exclusive investment opportunity for you", zapCampaignText, false)
	copies := make([]zapCopy, o.Users)
	exp := func(mean time.Duration) time.Duration { return time.Duration(rng.ExpFloat64() * float64(mean)) }
	for i := range copies {
		raw, err := spamgen.Mutate(base, spamgen.Options{Kinds: []spamgen.Kind{spamgen.HashBuster}, Seed: o.Seed*1_000_003 + uint64(i)})
		if err != nil {
			return nil, fmt.Errorf("eval zap: copy %d: %w", i, err)
		}
		c := zapCopy{user: fmt.Sprintf("user%04d", i), raw: raw, delivered: time.Duration(rng.Float64() * float64(o.Span)), report: -1}
		c.read = c.delivered + exp(o.ReadMean)
		if rng.Float64() < o.ReportShare {
			c.report = c.delivered + exp(o.ReportMean)
			c.read = c.report
		}
		copies[i] = c
	}
	slices.SortFunc(copies, func(a, b zapCopy) int { return int(a.delivered - b.delivered) })
	res := &ZapResult{Users: o.Users, Span: o.Span.String(), End: o.End.String(), ReportShare: o.ReportShare,
		ReportMean: o.ReportMean.String(), ReadMean: o.ReadMean.String(), Rate: o.Rate}
	for _, purge := range []bool{false, true} {
		o.Log.Info("zap scenario", "purge", purge)
		run, m, err := runZap(ctx, o, copies, purge)
		if err != nil {
			return nil, err
		}
		if purge {
			res.On = run
		} else {
			res.Off = run
			res.LedgerBytesPerMessage, res.RecordMicros, res.WriteMicros = m.bytesPer, m.recordMicros, m.writeMicros
		}
	}
	res.Elapsed = time.Since(start).Round(time.Second).String()
	return res, nil
}

// zapCost is what recording cost in one run.
type zapCost struct{ bytesPer, recordMicros, writeMicros float64 }

// simClock is the scenario's clock.
type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *simClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// zapScanInterval is how often the purger runs (zap.Options.ScanInterval's
// default).
const zapScanInterval = 2 * time.Second

func runZap(ctx context.Context, o ZapOptions, copies []zapCopy, purge bool) (ZapRun, zapCost, error) {
	run := ZapRun{Escalated: -1}
	var cost zapCost
	dir, err := os.MkdirTemp(o.TempDir, "nddmilter-eval-zap-")
	if err != nil {
		return run, cost, fmt.Errorf("eval zap: %w", err)
	}
	defer os.RemoveAll(dir)
	t0 := time.Date(2025, 1, 6, 9, 0, 0, 0, time.UTC)
	clk := &simClock{t: t0}
	quiet := slog.New(slog.DiscardHandler)
	st, err := store.Open(filepath.Join(dir, "store"), store.Options{Now: clk.now, Logger: quiet})
	if err != nil {
		return run, cost, fmt.Errorf("eval zap: %w", err)
	}
	defer st.Close()
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		return run, cost, err
	}
	model, err := andd.DefaultModel()
	if err != nil {
		return run, cost, err
	}
	eng, err := campaign.New(st, lex, model, campaign.Options{Clock: clk.now}, nil)
	if err != nil {
		return run, cost, fmt.Errorf("eval zap: engine: %w", err)
	}
	l, err := ledger.Open(filepath.Join(dir, "ledger"), ledger.Options{Clock: clk.now, FlushInterval: time.Hour, EvictInterval: time.Hour, Logger: quiet})
	if err != nil {
		return run, cost, fmt.Errorf("eval zap: %w", err)
	}
	defer l.Close()
	box := &mailboxes{clk: clk, t0: t0, rate: o.Rate, copies: map[string]*zapCopy{}, moved: map[string]time.Duration{}}
	var p *zap.Purger
	if purge {
		// The model of the mailboxes spaces the moves at Rate; the
		// purger's own limiter, which waits in real time, is let loose.
		um, _ := zap.ParseUserMap("local-part")
		p, err = zap.New(l, zapCampaigns{eng}, box, zap.Options{Clock: clk.now, Rate: 1e9, UserMap: um, Logger: quiet})
		if err != nil {
			return run, cost, err
		}
	}

	// The milter path's recording is timed on one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var recordCPU, writeCPU time.Duration
	recorded := 0
	reports := make([]*zapCopy, 0, len(copies))
	for i := range copies {
		if copies[i].report >= 0 {
			reports = append(reports, &copies[i])
		}
	}
	slices.SortFunc(reports, func(a, b *zapCopy) int { return int(a.report - b.report) })
	next, nextReport := 0, 0
	for at := time.Duration(0); at <= o.End; at += zapScanInterval {
		if err := ctx.Err(); err != nil {
			return run, cost, err
		}
		// Deliveries and reports of the last interval, in time order.
		for next < len(copies) || nextReport < len(reports) {
			deliver := next < len(copies) && copies[next].delivered <= at &&
				(nextReport >= len(reports) || copies[next].delivered <= reports[nextReport].report)
			report := !deliver && nextReport < len(reports) && reports[nextReport].report <= at
			switch {
			case deliver:
				c := &copies[next]
				next++
				clk.set(t0.Add(c.delivered))
				v, m, err := eng.Checker.CheckEvidence(ctx, c.raw, campaign.CheckOptions{})
				if err != nil {
					return run, cost, fmt.Errorf("eval zap: check: %w", err)
				}
				if v.Action > action.Tag {
					run.Blocked++
					continue
				}
				run.Delivered++
				box.deliver(c)
				if m == nil || m.Skip != pipeline.NoSkip {
					continue
				}
				// As the milter records (internal/milter's keep and record).
				c0 := threadCPU()
				m.Excerpt, m.Warnings = "", nil
				ev, err := m.MarshalEvidence(pipeline.EvidenceOptions{})
				if err != nil {
					return run, cost, err
				}
				l.Record(ledger.Delivery{Time: clk.now(), MessageID: m.MessageID, Rcpts: []string{c.user + "@example.org"}, RcptCount: 1, Evidence: ev})
				recordCPU += threadCPU() - c0
				recorded++
			case report:
				c := reports[nextReport]
				nextReport++
				if box.gone(c, c.report) {
					continue // the purge took it before the user saw it
				}
				clk.set(t0.Add(c.report))
				if _, err := eng.Ingester.Report(ctx, c.raw, store.KindSpam, c.user); err != nil {
					return run, cost, fmt.Errorf("eval zap: report: %w", err)
				}
				run.Reports++
			}
			if !deliver && !report {
				break
			}
		}
		clk.set(t0.Add(at))
		if run.Escalated < 0 {
			// When the campaign's verdict for its copies reached the
			// trigger (as the purger sees it, every scan).
			cs, err := eng.Reader.List(ctx, store.Query{Sort: store.SortRecent, Limit: 10})
			if err != nil {
				return run, cost, err
			}
			for i := range cs {
				if cs[i].State == store.StateActive && eng.Reader.ExactCopy(&cs[i]).Action >= action.Quarantine {
					run.Escalated = at
				}
			}
		}
		c0 := threadCPU()
		if err := l.Flush(); err != nil {
			return run, cost, err
		}
		writeCPU += threadCPU() - c0
		if p != nil {
			if err := p.Scan(ctx); err != nil {
				return run, cost, err
			}
			if _, err := p.Work(ctx); err != nil {
				return run, cost, err
			}
		}
	}
	if recorded > 0 {
		s := l.Stats()
		cost.bytesPer = float64(s.Bytes) / float64(s.Entries)
		cost.recordMicros = recordCPU.Seconds() * 1e6 / float64(recorded)
		cost.writeMicros = writeCPU.Seconds() * 1e6 / float64(recorded)
	}
	end := o.End
	var toMoved []time.Duration
	for _, c := range copies {
		if !box.delivered(c.user) {
			continue
		}
		switch mv, moved := box.moved[c.user]; {
		case moved && mv <= end:
			run.Moved++
			toMoved = append(toMoved, mv-run.Escalated)
		case c.report >= 0 && c.report <= end:
		case c.read <= end:
			run.LeftRead++
		default:
			run.LeftUnread++
		}
	}
	run.Skipped = box.skipped
	if len(toMoved) > 0 {
		ps := stats.Percentiles(toMoved, 0.5, 0.99, 1)
		run.ToMovedP50, run.ToMovedP99, run.ToMovedLast = ps[0], ps[1], ps[2]
	}
	return run, cost, nil
}

// mailboxes models the users' INBOX and Junk for the purge (a
// move.Mover): a copy is in INBOX from its delivery until the user
// reports it (moves it to Junk) or the purge moves it; it is read from
// its read time. Moves happen one per 1/rate seconds of the simulated
// clock, in order, from the time the purger asks.
type mailboxes struct {
	clk     *simClock
	t0      time.Time
	rate    float64
	mu      sync.Mutex
	copies  map[string]*zapCopy // by user, delivered
	moved   map[string]time.Duration
	last    time.Duration // the last move's time
	skipped int
}

func (b *mailboxes) deliver(c *zapCopy) {
	b.mu.Lock()
	b.copies[c.user] = c
	b.mu.Unlock()
}

func (b *mailboxes) delivered(user string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.copies[user] != nil
}

// gone reports whether the purge moved c before at.
func (b *mailboxes) gone(c *zapCopy, at time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	mv, ok := b.moved[c.user]
	return ok && mv <= at
}

// Move moves the user's copy at the next free slot of the rate.
func (b *mailboxes) Move(ctx context.Context, r move.Request) (move.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at := max(b.clk.now().Sub(b.t0), b.last+time.Duration(float64(time.Second)/b.rate))
	b.last = at
	c := b.copies[r.User]
	switch {
	case c == nil:
		b.skipped++
		return move.Result{Outcome: move.Skipped, Reason: move.ReasonNotFound}, nil
	case c.report >= 0 && c.report <= at:
		b.skipped++
		return move.Result{Outcome: move.Skipped, Reason: move.ReasonNotFound}, nil
	case r.UnreadOnly && c.read <= at:
		b.skipped++
		return move.Result{Outcome: move.Skipped, Reason: move.ReasonRead, From: "INBOX"}, nil
	}
	b.moved[r.User] = at
	return move.Result{Outcome: move.Moved, From: "INBOX", To: move.Location{Mailbox: r.Junk, Validity: "1", UID: uint32(len(b.moved))}}, nil
}

// Undo is not part of the scenario.
func (b *mailboxes) Undo(ctx context.Context, r move.UndoRequest) (move.Result, error) {
	return move.Result{Outcome: move.Skipped, Reason: move.ReasonGone}, nil
}

// zapCampaigns is the engine's jobs the purger reads (as the daemon's).
type zapCampaigns struct{ e *campaign.Engine }

func (c zapCampaigns) List(ctx context.Context, q store.Query) ([]store.Campaign, error) {
	return c.e.Reader.List(ctx, q)
}

func (c zapCampaigns) Get(ctx context.Context, id store.CampaignID) (*store.Campaign, error) {
	return c.e.Reader.Get(ctx, id)
}

func (c zapCampaigns) ExactCopy(cp *store.Campaign) campaign.Decision {
	return c.e.Reader.ExactCopy(cp)
}

func (c zapCampaigns) MatchEvidence(ctx context.Context, ev, signs []byte) (campaign.Verdict, error) {
	return c.e.Checker.MatchEvidence(ctx, ev, signs)
}

// WriteMarkdown prints the scenario's table.
func (r *ZapResult) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "A campaign of %d randomized copies (`hashbuster`), one per user, arriving over %s; %.0f%% of the recipients report theirs after an exponential delay (mean %s) if it is still in their INBOX, the others read theirs after another (mean %s). The real engine checks every copy as the milter does, the real ledger records those let through, the real purger moves them through a model of the mailboxes at %g moves/s (unread copies only); simulated clock, mailboxes counted %s after the first copy.\n\n",
		r.Users, r.Span, 100*r.ReportShare, r.ReportMean, r.ReadMean, r.Rate, r.End)
	fmt.Fprintln(w, "| | purge off | purge on |")
	fmt.Fprintln(w, "| --- | ---: | ---: |")
	row := func(name string, f func(ZapRun) string) {
		fmt.Fprintf(w, "| %s | %s | %s |\n", name, f(r.Off), f(r.On))
	}
	n := func(f func(ZapRun) int) func(ZapRun) string { return func(z ZapRun) string { return fmt.Sprint(f(z)) } }
	row("copies delivered (accepted or tagged)", n(func(z ZapRun) int { return z.Delivered }))
	row("copies quarantined or rejected at delivery", n(func(z ZapRun) int { return z.Blocked }))
	row("reports", n(func(z ZapRun) int { return z.Reports }))
	row("campaign at the trigger (quarantine), after the first copy", func(z ZapRun) string { return minutes(z.Escalated) })
	row("**left in INBOX unread at the end**", n(func(z ZapRun) int { return z.LeftUnread }))
	row("left in INBOX read at the end", n(func(z ZapRun) int { return z.LeftRead }))
	row("moved to Junk by the purge", n(func(z ZapRun) int { return z.Moved }))
	row("escalation → moved, p50 / p99 / last", func(z ZapRun) string {
		if z.Moved == 0 {
			return "—"
		}
		return fmt.Sprintf("%s / %s / %s", secs(z.ToMovedP50), secs(z.ToMovedP99), secs(z.ToMovedLast))
	})
	fmt.Fprintln(w)
	fmt.Fprintf(w, "The ledger keeps %.0f bytes per message (keys, evidence and index). Recording costs the milter's path %.1f µs of CPU per message (the evidence encoded and queued) and the ledger's writer %.1f µs (its batches, one per %s of the simulated clock). Run time: %s.\n",
		r.LedgerBytesPerMessage, r.RecordMicros, r.WriteMicros, zapScanInterval, r.Elapsed)
}

func minutes(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f min", d.Minutes())
}

func secs(d time.Duration) string { return fmt.Sprintf("%.0f s", math.Round(d.Seconds())) }
