// Package milter is the glue between a mail server (Postfix, Sendmail)
// speaking the milter protocol and the campaign engine: it rebuilds each
// message from the milter callbacks (headers in their original order, the
// body up to a size limit), asks the engine for a verdict under a deadline,
// and acts — verdict headers, quarantine (Postfix hold), reject or tempfail
// — while deleting forged copies of its own headers.
//
// It fails open: an engine error, a panic or a timeout gives the message
// the on_error treatment (accept by default), logged and counted. The engine
// and the options can be swapped at run time (Update) without dropping
// connections, and Shutdown lets sessions in flight finish.
package milter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/metrics"
)

// Checker decides on a raw message; *campaign.Checker implements it. The
// options carry the cap of the message's recipients (Options.Overrides),
// which the checker applies and explains in the verdict's rule.
type Checker interface {
	CheckWith(ctx context.Context, raw []byte, o campaign.CheckOptions) (campaign.Verdict, error)
}

// Options configure the milter. Zero values select the defaults, which
// are those of config/nddmilter.yaml.
type Options struct {
	// MaxBodyBytes is how many body bytes are scanned. Default 1 MiB;
	// negative: headers only.
	MaxBodyBytes int64
	// CheckTimeout bounds one check. Default 2s.
	CheckTimeout time.Duration
	// IdleTimeout closes a connection silent that long. Default 10m.
	IdleTimeout time.Duration
	// OnError is "accept" (default) or "tempfail". It is also the answer
	// to a message that a resource budget (MaxSessions, MaxBufferedBytes)
	// kept from being buffered.
	OnError string
	// MaxSessions bounds the connections that buffer messages. Default
	// DefaultMaxSessions (1000); negative: no limit. Connections beyond
	// it, up to as many again, are served without buffering (each message
	// gets the OnError treatment); beyond twice MaxSessions a new
	// connection is closed at once (the MTA applies its
	// milter_default_action). See limits.go.
	MaxSessions int
	// MaxBufferedBytes bounds the bytes all sessions (and checks in
	// flight) hold together beyond each connection's free allowance of
	// 128 KiB of message and 64 KiB of packet. A message that would go
	// over stops being buffered: its end gets the OnOverload treatment.
	// Default DefaultMaxBufferedBytes (128 MiB); negative: no limit.
	MaxBufferedBytes int64
	// OnOverload is what a message cut short by MaxBufferedBytes gets:
	// "check" (default) checks the part buffered before the budget ran
	// out (at least the free allowance: the headers and the head of the
	// body), as a message longer than MaxBodyBytes is checked from its
	// head; "tempfail" answers 4xx, and the MTA retries it later. Never
	// is such a message accepted unchecked.
	OnOverload string
	// HeaderPrefix starts the names of added headers. Default "X-NDD-".
	HeaderPrefix string
	// NoAcceptHeader leaves accepted messages without the verdict header.
	NoAcceptHeader bool
	// MaxAction caps verdicts: accept, tag, quarantine or reject (default).
	MaxAction string
	// RejectWith is "reject" (default, 5xx) or "tempfail" (4xx).
	RejectWith string
	// RejectText, TempfailText and QuarantineReason may use %c (campaign
	// id), %s (score), %r (rule) and %%. Defaults:
	// "550 5.7.1 Message rejected as spam campaign %c (nddmilter)",
	// "451 4.7.1 Message deferred as suspected spam campaign %c (nddmilter)",
	// "nddmilter: spam campaign %c (score %s)".
	RejectText       string
	TempfailText     string
	QuarantineReason string
	// Overrides maps a recipient address or domain (lower case) to the
	// MaxAction that applies to it instead of the global one. A message
	// gets the weakest cap among its recipients.
	Overrides map[string]string
	// SpamHeaders adds SpamAssassin-style headers to tagged and
	// quarantined messages, so that rules written for SpamAssassin work
	// unchanged: "X-Spam-Flag: YES" and "X-Spam-Status: Yes, score=P
	// required=R tests=NDD_CAMPAIGN_ID,NDD_ACTION autolearn=no
	// version=nddmilter" (P the campaign-spam probability, R
	// SpamRequired). Copies already in the message (an earlier filter's)
	// are replaced.
	SpamHeaders bool
	// SpamRequired is the required= value of X-Spam-Status: the
	// probability above which the policy tags.
	SpamRequired float64
	// SubjectTag, when set, is put before the Subject of tagged and
	// quarantined messages (e.g. "[SPAM] "), unless it is there already.
	SubjectTag string
	// HashAddresses logs the sender, the recipients and the client
	// address as "h:" and the first 16 hex digits of their SHA-256
	// (lower-cased) instead of in clear.
	HashAddresses bool
	// Reports configures reports by mail (report.go): report addresses
	// and feedback loops. The checker must be a Reporter to take them.
	Reports ReportOptions
	// Ledger, if not nil, records every message the milter lets through
	// (accepted or tagged) that has a signature, with its evidence, for
	// zero-hour purge (internal/zap). The checker must be an
	// EvidenceChecker (*campaign.Engine is); with another one nothing is
	// recorded. Default nil: nothing recorded.
	Ledger Recorder
	// Logger gets one line per message and the errors. Default slog.Default().
	Logger *slog.Logger
	// Metrics, if not nil, are updated for every message.
	Metrics *metrics.Metrics
}

func (o Options) withDefaults() Options {
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = 2 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.OnOverload == "" {
		o.OnOverload = OverloadCheck
	}
	if o.OnError == "" {
		o.OnError = action.Accept.String()
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxBufferedBytes == 0 {
		o.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if o.HeaderPrefix == "" {
		o.HeaderPrefix = "X-NDD-"
	}
	if o.MaxAction == "" {
		o.MaxAction = action.Reject.String()
	}
	if o.RejectWith == "" {
		o.RejectWith = action.Reject.String()
	}
	if o.RejectText == "" {
		o.RejectText = "550 5.7.1 Message rejected as spam campaign %c (nddmilter)"
	}
	if o.TempfailText == "" {
		o.TempfailText = "451 4.7.1 Message deferred as suspected spam campaign %c (nddmilter)"
	}
	if o.QuarantineReason == "" {
		o.QuarantineReason = "nddmilter: spam campaign %c (score %s)"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// actions are the action settings of Options, parsed.
type actions struct {
	onError action.Action // Accept or Tempfail
	// overloadTempfail: OnOverload is "tempfail".
	overloadTempfail bool
	rejectWith       action.Action // Reject or Tempfail
	maxAction        action.Action
	overrides        map[string]action.Action
}

// parse checks the options and parses their action settings.
func (o Options) parse() (actions, error) {
	var a actions
	var err error
	if a.onError, err = action.Parse(o.OnError, action.Accept, action.Tempfail); err != nil {
		return a, fmt.Errorf("milter: OnError: %w", err)
	}
	switch o.OnOverload {
	case OverloadCheck:
	case OverloadTempfail:
		a.overloadTempfail = true
	default:
		return a, fmt.Errorf("milter: OnOverload: %q is not %s or %s", o.OnOverload, OverloadCheck, OverloadTempfail)
	}
	if a.rejectWith, err = action.Parse(o.RejectWith, action.Reject, action.Tempfail); err != nil {
		return a, fmt.Errorf("milter: RejectWith: %w", err)
	}
	if a.maxAction, err = action.Parse(o.MaxAction); err != nil {
		return a, fmt.Errorf("milter: MaxAction: %w", err)
	}
	a.overrides = make(map[string]action.Action, len(o.Overrides))
	for k, v := range o.Overrides {
		if a.overrides[k], err = action.Parse(v); err != nil {
			return a, fmt.Errorf("milter: override %s: %w", k, err)
		}
	}
	return a, nil
}

// state is what Update swaps atomically: a message uses the state it saw
// at MAIL FROM from start to end.
type state struct {
	checker Checker
	opts    Options
	act     actions     // opts' action settings, parsed
	reports reportRules // opts.Reports, parsed
}

// newState checks and parses opts (with their defaults) for c.
func newState(c Checker, opts Options) (*state, error) {
	act, err := opts.parse()
	if err != nil {
		return nil, err
	}
	rr, err := opts.Reports.parse()
	if err != nil {
		return nil, err
	}
	return &state{checker: c, opts: opts, act: act, reports: rr}, nil
}

// Server is a milter server. Use New, then Serve; Update swaps the engine
// and options; Shutdown stops it.
type Server struct {
	state atomic.Pointer[state]

	mu        sync.Mutex
	conns     map[*conn]struct{}
	listeners []net.Listener
	wg        sync.WaitGroup
	closing   atomic.Bool
	grace     atomic.Int64 // idle timeout during shutdown, ns (0: normal)

	// bufs recycles the sessions' message buffers (*bytes.Buffer): a
	// message is assembled in one and handed to the checker without a copy.
	bufs sync.Pool

	// buffered is what the sessions reserved from MaxBufferedBytes; slots
	// counts the connections that may buffer (MaxSessions). See limits.go.
	buffered atomic.Int64
	slots    atomic.Int64
	// overLog limits the overload warnings to one per second.
	overLog atomic.Int64
	// checks runs the sessions' checks apart from them (so that a session
	// can give up on one at its deadline) on reused goroutines: a new
	// goroutine for every message grew a fresh stack each time. A check
	// never waits for one (the pool has no limit), so a check stuck past
	// its deadline holds only its own. The zero value is ready.
	checks     pool.Pool
	checksDone sync.Once // the pool's Wait, once
}

// maxPooledBuffer is the largest message buffer kept for reuse: the
// uncharged allowance (a pooled buffer is never charged to the budget);
// bigger ones are left to the garbage collector.
const maxPooledBuffer = freeMessageBytes

func (s *Server) getBuffer() *bytes.Buffer {
	if b, ok := s.bufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

func (s *Server) putBuffer(b *bytes.Buffer) {
	if b != nil && b.Cap() <= maxPooledBuffer {
		s.bufs.Put(b)
	}
}

// New returns a server checking messages with c.
func New(c Checker, opts Options) (*Server, error) {
	if c == nil {
		return nil, errors.New("milter: nil checker")
	}
	st, err := newState(c, opts.withDefaults())
	if err != nil {
		return nil, err
	}
	s := &Server{conns: map[*conn]struct{}{}}
	s.state.Store(st)
	return s, nil
}

// Update swaps the checker and the options; messages already past MAIL
// FROM finish with the old ones. A nil checker keeps the current one.
func (s *Server) Update(c Checker, opts Options) error {
	if c == nil {
		c = s.state.Load().checker
	}
	st, err := newState(c, opts.withDefaults())
	if err != nil {
		return err
	}
	s.state.Store(st)
	return nil
}

func (s *Server) current() *state { return s.state.Load() }

// Serve accepts milter connections on ln until Shutdown; it returns nil
// after Shutdown. Temporary accept errors (e.g. out of file descriptors)
// are retried.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	delay := 5 * time.Millisecond
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return nil
			}
			var ne net.Error
			if (errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, syscall.EMFILE) ||
				errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOBUFS) {
				st := s.current()
				st.opts.Logger.Warn("milter accept failed, retrying", "err", err, "delay", delay)
				st.opts.Metrics.Error("accept")
				time.Sleep(delay)
				delay = min(2*delay, time.Second)
				continue
			}
			return fmt.Errorf("milter: serve: %w", err)
		}
		delay = 5 * time.Millisecond
		c := s.track(nc)
		if c == nil {
			continue
		}
		go c.serve()
	}
}

// Shutdown stops accepting connections, closes connections idle for more
// than 2 seconds, lets sessions in flight finish and returns when all are
// closed, or when ctx ends, after closing the rest.
func (s *Server) Shutdown(ctx context.Context) error {
	// The grace period first: a reader that sees closing also sees it.
	s.grace.Store(int64(2 * time.Second))
	s.closing.Store(true)
	s.mu.Lock()
	for _, ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		// Wake up reads blocked on an idle connection: the new deadline
		// applies to the read in progress.
		c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		// No session is left to start a check: the idle goroutines
		// exit, and one still running a check when it returns.
		s.checksDone.Do(func() { go s.checks.Wait() })
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	n := len(s.conns)
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	<-done
	return fmt.Errorf("milter: shutdown: closed %d sessions still open: %w", n, ctx.Err())
}

// Sessions returns the number of open milter connections.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// track registers a new connection; nil (and the connection closed) when
// the server is shutting down.
func (s *Server) track(nc net.Conn) *conn {
	c := newConn(s, nc)
	o := s.current().opts
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		nc.Close()
		return nil
	}
	if o.MaxSessions > 0 && len(s.conns) >= 2*o.MaxSessions {
		n := len(s.conns)
		s.mu.Unlock()
		// Counted before the close, which the MTA (and a test) sees.
		o.Metrics.Overload(overConnections)
		nc.Close()
		s.warnOverload("milter connection closed: too many connections (twice milter.max_sessions); the MTA applies its milter_default_action",
			"connections", n, "max_sessions", o.MaxSessions)
		return nil
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	c.sess.slot = s.acquireSlot()
	o.Metrics.Session(1)
	return c
}

// warnOverload logs an overload at most once a second.
func (s *Server) warnOverload(msg string, args ...any) {
	now := time.Now().UnixNano()
	last := s.overLog.Load()
	if now-last < int64(time.Second) || !s.overLog.CompareAndSwap(last, now) {
		return
	}
	s.current().opts.Logger.Warn(msg, args...)
}

func (s *Server) untrack(c *conn) {
	if c.sess.slot {
		c.sess.slot = false
		s.releaseSlot()
	}
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.current().opts.Metrics.Session(-1)
	s.wg.Done()
}

// SocketOptions set the permissions of a unix milter socket.
type SocketOptions struct {
	// Mode is the socket file's mode. Default 0660: the owner and the
	// group may connect.
	Mode os.FileMode
	// Group, if set, is the group (name or number) the socket file is
	// given — the MTA's, e.g. "postfix" — so that it may connect. The
	// process must be a member of it (systemd: SupplementaryGroups=).
	// Default: the process's group.
	Group string
}

// Listen opens a milter socket given in Postfix syntax (inet:HOST:PORT,
// inet6:[ADDR]:PORT or unix:/path) with the default socket options.
func Listen(network, addr string) (net.Listener, error) {
	return ListenSocket(network, addr, SocketOptions{})
}

// ListenSocket opens a milter socket. A stale unix socket (nobody
// listening) is removed first; a new one gets so's mode and group.
func ListenSocket(network, addr string, so SocketOptions) (net.Listener, error) {
	if network == "unix" {
		if fi, err := os.Lstat(addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if c, err := net.DialTimeout("unix", addr, time.Second); err == nil {
				c.Close()
				return nil, fmt.Errorf("listen unix:%s: another process is listening", addr)
			}
			os.Remove(addr)
		}
		gid := -1
		if so.Group != "" {
			g, err := lookupGroup(so.Group)
			if err != nil {
				return nil, fmt.Errorf("listen unix:%s: socket group: %w", addr, err)
			}
			gid = g
		}
		mode := so.Mode
		if mode == 0 {
			mode = 0o660
		}
		ln, err := net.Listen("unix", addr)
		if err != nil {
			return nil, fmt.Errorf("listen unix:%s: %w%s", addr, err, listenHint(err))
		}
		if err := os.Chmod(addr, mode); err != nil {
			ln.Close()
			return nil, fmt.Errorf("listen unix:%s: %w", addr, err)
		}
		if gid >= 0 {
			if err := os.Lchown(addr, -1, gid); err != nil {
				ln.Close()
				return nil, fmt.Errorf("listen unix:%s: socket group %s: %w", addr, so.Group, err)
			}
		}
		return ln, nil
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s:%s: %w%s", network, addr, err, listenHint(err))
	}
	return ln, nil
}

// listenHint says what to do about the usual reasons a listen fails.
func listenHint(err error) string {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return " (another process listens there — a running nddmilter? Stop it, or choose another address with milter.listen or --listen)"
	case errors.Is(err, syscall.ENOENT):
		return " (the socket's directory does not exist: create it, owned by nddmilter's user)"
	case errors.Is(err, syscall.EACCES):
		return " (no permission to create the socket there: check the directory's owner and mode)"
	}
	return ""
}

// lookupGroup returns the id of a group given by name or number.
func lookupGroup(name string) (int, error) {
	if id, err := strconv.Atoi(name); err == nil && id >= 0 {
		return id, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	id, err := strconv.Atoi(g.Gid)
	if err != nil {
		return 0, fmt.Errorf("group %s: id %q is not a number", name, g.Gid)
	}
	return id, nil
}
