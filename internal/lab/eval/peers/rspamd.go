package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Rspamd talks to a running rspamd over its HTTP protocol, exactly as rspamc
// does: `rspamc fuzzy_add` is POST /fuzzyadd on the controller with Flag
// and Weight headers, `rspamc symbols` is POST /checkv2 on the scanner.
// A message is flagged when the fuzzy symbol of the "reported spam" flag is
// among its symbols, whatever its score.
type Rspamd struct {
	// Scanner is host:port of the normal worker (RSPAMD_NORMAL).
	Scanner string
	// Controller is host:port of the controller worker (RSPAMD_CONTROLLER).
	Controller string
	// Symbol is the fuzzy symbol of reported spam. Default "LOCAL_FUZZY_DENIED".
	Symbol string
	// Flag is the fuzzy flag reports are stored under. Default 11.
	Flag int
	// Weight of each report. Default 10.
	Weight int
	// SettleTime is how long reports take to become visible (the fuzzy
	// storage's sync period, plus margin). Default 2.5 s.
	SettleTime time.Duration
	// Timeout bounds one request. Default 30 s.
	Timeout time.Duration
	// Settings, if set, is sent as the Settings header of every check
	// (rspamd's per-request settings), e.g. FuzzyOnly.
	Settings string
	// Label overrides Name. Default "rspamd (HTTP)".
	Label string

	client *http.Client
}

// NewRspamd returns a client with defaults applied; conns is the number of
// connections kept open per worker (the client parallelism).
func NewRspamd(r Rspamd, conns int) *Rspamd {
	if r.Symbol == "" {
		r.Symbol = "LOCAL_FUZZY_DENIED"
	}
	if r.Flag == 0 {
		r.Flag = 11
	}
	if r.Weight == 0 {
		r.Weight = 10
	}
	if r.SettleTime == 0 {
		r.SettleTime = 2500 * time.Millisecond
	}
	if r.Timeout == 0 {
		r.Timeout = 30 * time.Second
	}
	if conns < 1 {
		conns = 1
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConnsPerHost = conns
	r.client = &http.Client{Transport: tr, Timeout: r.Timeout}
	return &r
}

// Name implements Detector.
func (r *Rspamd) Name() string {
	if r.Label != "" {
		return r.Label
	}
	return "rspamd (HTTP)"
}

// FuzzyOnly is a Settings value that restricts a scan to the fuzzy group:
// rspamd then does what nddmilter does and nothing else (no regexp rules,
// no header and MIME heuristics).
const FuzzyOnly = `{groups_enabled = ["fuzzy"]}`

// ErrNotHashable is returned by Rspamd.Report when rspamd computed no fuzzy
// hash for the message (all text parts shorter than fuzzy_check's
// min_bytes, no attachments): the report is lost.
var ErrNotHashable = errors.New("no fuzzy hash for this message")

// Report implements Detector: fuzzy_add with the configured flag and weight.
func (r *Rspamd) Report(ctx context.Context, raw []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.Controller+"/fuzzyadd", bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("rspamd fuzzyadd: %w", err)
	}
	req.Header.Set("Flag", strconv.Itoa(r.Flag))
	req.Header.Set("Weight", strconv.Itoa(r.Weight))
	body, status, err := r.do(req)
	if err != nil {
		return fmt.Errorf("rspamd fuzzyadd: %w", err)
	}
	return parseFuzzyAdd(status, body)
}

// parseFuzzyAdd interprets the controller's answer to /fuzzyadd.
func parseFuzzyAdd(status int, body []byte) error {
	var res struct {
		Success bool     `json:"success"`
		Hashes  []string `json:"hashes"`
		Error   string   `json:"error"`
	}
	_ = json.Unmarshal(body, &res)
	switch {
	case status == http.StatusOK && res.Success:
		return nil
	case status == http.StatusNotFound || (status == http.StatusOK && !res.Success):
		// rspamd answers 404 "No fuzzy rules matched" / no hashes.
		return ErrNotHashable
	default:
		msg := res.Error
		if msg == "" {
			msg = string(truncate(body, 200))
		}
		return fmt.Errorf("rspamd fuzzyadd: HTTP %d: %s", status, msg)
	}
}

// Check implements Detector: a full scan; flagged when Symbol is present.
func (r *Rspamd) Check(ctx context.Context, raw []byte) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.Scanner+"/checkv2", bytes.NewReader(raw))
	if err != nil {
		return false, fmt.Errorf("rspamd checkv2: %w", err)
	}
	if r.Settings != "" {
		req.Header.Set("Settings", r.Settings)
	}
	body, status, err := r.do(req)
	if err != nil {
		return false, fmt.Errorf("rspamd checkv2: %w", err)
	}
	if status != http.StatusOK {
		return false, fmt.Errorf("rspamd checkv2: HTTP %d: %s", status, truncate(body, 200))
	}
	return hasSymbol(body, r.Symbol)
}

// hasSymbol reports whether a /checkv2 answer lists symbol.
func hasSymbol(body []byte, symbol string) (bool, error) {
	var res struct {
		Symbols map[string]json.RawMessage `json:"symbols"`
		Error   string                     `json:"error"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return false, fmt.Errorf("rspamd checkv2: bad answer: %w", err)
	}
	if res.Error != "" {
		return false, fmt.Errorf("rspamd checkv2: %s", res.Error)
	}
	_, ok := res.Symbols[symbol]
	return ok, nil
}

// Settle implements Detector: waits for the fuzzy storage to apply the
// reports (it writes them in batches every `sync` period).
func (r *Rspamd) Settle(ctx context.Context) error {
	t := time.NewTimer(r.SettleTime)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Close implements Detector.
func (r *Rspamd) Close() error {
	r.client.CloseIdleConnections()
	return nil
}

func (r *Rspamd) do(req *http.Request) ([]byte, int, error) {
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, 0, fmt.Errorf("read answer: %w", err)
	}
	return body, resp.StatusCode, nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
