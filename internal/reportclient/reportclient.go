// Package reportclient hands one user report to the local daemon over its
// report socket (api.socket), and spools it (internal/spool) when the
// daemon does not take it. It is what the IMAPSieve pipe program of
// contrib/dovecot runs for every Junk move, so it links only the standard
// library and the spool (and golang.org/x/sys/unix): a process starts,
// reports and exits in a few milliseconds of CPU.
package reportclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/spool"
)

// DefaultTimeout bounds a report over the socket before it is spooled:
// well below Dovecot's sieve_pipe_exec_timeout (10 s).
const DefaultTimeout = 3 * time.Second

// Options say where and as whom to report.
type Options struct {
	Socket   string // the daemon's report socket (api.socket); required
	SpoolDir string // api.spool_dir; "" means a report the daemon does not take is lost
	Reporter string // the reporter id (the IMAP user); required
	Kind     string // "spam" or "ham"; "" is spam
	// Timeout bounds the whole exchange with the daemon. Default
	// DefaultTimeout.
	Timeout time.Duration
	// MaxBytes is the largest message reported. Default
	// spool.DefaultMaxMessage.
	MaxBytes int64
}

// Status is what became of a report.
type Status int

const (
	Reported    Status = iota // the daemon took it
	Spooled                   // the daemon did not answer; it waits in the spool
	Refused                   // the daemon refused it (not allowed, malformed): spooling would not help
	NotReported               // unusable message, or neither the daemon nor the spool took it
)

func (s Status) String() string {
	switch s {
	case Reported:
		return "reported"
	case Spooled:
		return "spooled"
	case Refused:
		return "refused"
	}
	return "not reported"
}

// ErrUsage is wrapped by the errors of a caller's mistake (no socket, no
// reporter, an unknown kind): the only errors Send returns.
var ErrUsage = errors.New("usage")

// Result is the outcome of Send: its status, and a line for the log
// saying why (the daemon's answer, or what failed).
type Result struct {
	Status Status
	Detail string
}

// Kind normalizes a report kind as the daemon's API names it: "spam"
// (also "junk", "") or "ham" (also "not-spam", "notspam", "not-junk").
func Kind(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "spam", "junk":
		return "spam", nil
	case "ham", "not-spam", "notspam", "not-junk":
		return "ham", nil
	}
	return "", fmt.Errorf("%w: unknown report kind %q (want spam or ham)", ErrUsage, s)
}

// Send reads one message from r and reports it. Only a caller's mistake
// is an error (ErrUsage); every other problem is in the Result, so that
// the caller (a user's Junk move) never fails because of the daemon.
func Send(ctx context.Context, o Options, r io.Reader) (Result, error) {
	if o.Socket == "" {
		return Result{}, fmt.Errorf("%w: no report socket (--socket)", ErrUsage)
	}
	if o.Reporter == "" {
		return Result{}, fmt.Errorf("%w: --reporter is required (the IMAP user)", ErrUsage)
	}
	kind, err := Kind(o.Kind)
	if err != nil {
		return Result{}, err
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = spool.DefaultMaxMessage
	}
	raw, err := io.ReadAll(io.LimitReader(r, o.MaxBytes+1))
	switch {
	case err != nil:
		return Result{NotReported, fmt.Sprintf("read message: %v", err)}, nil
	case int64(len(raw)) > o.MaxBytes:
		return Result{NotReported, fmt.Sprintf("message larger than %d bytes", o.MaxBytes)}, nil
	case len(bytes.TrimSpace(raw)) == 0:
		return Result{NotReported, "empty message"}, nil
	}
	status, answer, err := post(ctx, o, kind, raw)
	if err == nil {
		return Result{Reported, answer}, nil
	}
	if status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests {
		return Result{Refused, err.Error()}, nil
	}
	if o.SpoolDir == "" {
		return Result{NotReported, fmt.Sprintf("%v (no spool)", err)}, nil
	}
	sp, serr := spool.Open(o.SpoolDir, spool.Options{MaxMessage: o.MaxBytes})
	if serr == nil {
		_, serr = sp.Put(spool.Report{Kind: kind, Reporter: o.Reporter, Raw: raw})
	}
	if serr != nil {
		return Result{NotReported, fmt.Sprintf("%v; and could not spool it: %v", err, serr)}, nil
	}
	return Result{Spooled, fmt.Sprintf("spooled in %s (daemon unavailable: %v)", o.SpoolDir, err)}, nil
}

// post sends the report and returns the HTTP status (0 when there was no
// answer) and the daemon's answer, or an error for anything but a 2xx.
func post(ctx context.Context, o Options, kind string, raw []byte) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var d net.Dialer
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", o.Socket)
		},
		DisableKeepAlives: true,
	}}
	q := url.Values{"kind": {kind}, "reporter": {o.Reporter}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://nddmilter-report-socket/v1/reports?"+q.Encode(), bytes.NewReader(raw))
	if err != nil {
		return 0, "", fmt.Errorf("API request: %w", err)
	}
	req.Header.Set("Content-Type", "message/rfc822")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("API POST /v1/reports: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, "", fmt.Errorf("refused by the daemon: %s (HTTP %d)", apiMessage(body), resp.StatusCode)
	}
	return resp.StatusCode, strings.TrimSpace(string(body)), nil
}

// apiMessage is the error text of an API answer ({"error": "..."}), or
// its first line.
func apiMessage(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	s := strings.TrimSpace(string(body))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
