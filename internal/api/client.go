package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nddmilter/nddmilter/internal/store"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/campaign"
)

// Client talks to a running daemon's API (used by the command line when
// the daemon holds the store's lock).
type Client struct {
	// BaseURL is the daemon's HTTP listener, e.g. http://127.0.0.1:8898.
	BaseURL string
	// Token is the bearer token.
	Token string
	// HTTP is the client used. Default: a client with a 60 s timeout.
	HTTP *http.Client
}

// Error is an error answered by the API.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("API: %s (HTTP %d)", e.Message, e.Status)
}

// IsNotFound tells whether err is an API 404 (unknown campaign).
func IsNotFound(err error) bool {
	var ae *Error
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body []byte, out any) error {
	resp, err := c.send(ctx, method, path, q, body, false)
	if err != nil {
		return err
	}
	return decode(resp, method, path, out)
}

// doLong is do for a request whose answer may take longer than the
// default client timeout (a verification); ctx bounds it.
func (c *Client) doLong(ctx context.Context, method, path string, out any) error {
	resp, err := c.send(ctx, method, path, nil, nil, true)
	if err != nil {
		return err
	}
	return decode(resp, method, path, out)
}

// send makes a request and returns the answer when it is a success (its
// body to be closed by the caller), else an *Error. Without long, the
// default client has a 60 s timeout; with long, only ctx bounds it.
func (c *Client) send(ctx context.Context, method, path string, q url.Values, body []byte, long bool) (*http.Response, error) {
	base := strings.TrimRight(c.BaseURL, "/")
	if base == "" {
		return nil, errors.New("API: no URL")
	}
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("API request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "message/rfc822")
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
		if long {
			hc = &http.Client{}
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("API %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return nil, &Error{Status: resp.StatusCode, Message: e.Error}
	}
	return resp, nil
}

// decode reads a successful JSON answer into out (nil: discard it).
func decode(resp *http.Response, method, path string, out any) error {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("API %s %s: read answer: %w", method, path, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("API %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// Report sends a junk or not-junk report.
func (c *Client) Report(ctx context.Context, raw []byte, kind store.Kind, reporter string) (Outcome, error) {
	q := url.Values{"kind": {KindName(kind)}}
	if reporter != "" {
		q.Set("reporter", reporter)
	}
	var out Outcome
	err := c.do(ctx, http.MethodPost, "/v1/reports", q, raw, &out)
	return out, err
}

// Check asks for a verdict; record counts the message in the matched
// campaign's statistics, as the milter does (otherwise a dry run).
func (c *Client) Check(ctx context.Context, raw []byte, record bool) (campaign.Verdict, error) {
	var v campaign.Verdict
	q := url.Values{"dry_run": {"1"}}
	if record {
		q = url.Values{"record": {"1"}}
	}
	err := c.do(ctx, http.MethodPost, "/v1/check", q, raw, &v)
	return v, err
}

// List lists a page of campaigns.
func (c *Client) List(ctx context.Context, lq ListQuery) ([]Summary, error) {
	q := url.Values{}
	if lq.Since > 0 {
		q.Set("since", lq.Since.String())
	}
	if lq.Sort != "" {
		q.Set("sort", lq.Sort)
	}
	q.Set("limit", strconv.Itoa(lq.Limit)) // 0: the most
	if lq.Offset > 0 {
		q.Set("offset", strconv.Itoa(lq.Offset))
	}
	var out []Summary
	err := c.do(ctx, http.MethodGet, "/v1/campaigns", q, nil, &out)
	return out, err
}

// Watch returns a page of the false-positive watch (GET /v1/watch).
func (c *Client) Watch(ctx context.Context, limit, offset int) ([]Watched, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	var out []Watched
	err := c.do(ctx, http.MethodGet, "/v1/watch", q, nil, &out)
	return out, err
}

// Now returns the now view.
func (c *Client) Now(ctx context.Context, nq campaign.NowQuery) (Now, error) {
	q := url.Values{}
	if nq.Sort != "" {
		q.Set("sort", nq.Sort)
	}
	if nq.Limit > 0 {
		q.Set("limit", strconv.Itoa(nq.Limit))
	}
	if nq.Offset > 0 {
		q.Set("offset", strconv.Itoa(nq.Offset))
	}
	if nq.Hours > 0 {
		q.Set("hours", strconv.Itoa(nq.Hours))
	}
	var n Now
	err := c.do(ctx, http.MethodGet, "/v1/now", q, nil, &n)
	return n, err
}

// Get returns one campaign with its timeline and signatures.
func (c *Client) Get(ctx context.Context, id store.CampaignID) (Detail, error) {
	var d Detail
	err := c.do(ctx, http.MethodGet, "/v1/campaigns/"+strconv.FormatUint(uint64(id), 10), nil, nil, &d)
	return d, err
}

// Delete deletes a campaign.
func (c *Client) Delete(ctx context.Context, id store.CampaignID) error {
	return c.do(ctx, http.MethodDelete, "/v1/campaigns/"+strconv.FormatUint(uint64(id), 10), nil, nil, nil)
}

// Allow marks a campaign allowed (never acted on), or active again with undo.
func (c *Client) Allow(ctx context.Context, id store.CampaignID, undo bool) (Summary, error) {
	var q url.Values
	if undo {
		q = url.Values{"undo": {"1"}}
	}
	var s Summary
	err := c.do(ctx, http.MethodPost, "/v1/campaigns/"+strconv.FormatUint(uint64(id), 10)+"/allow", q, nil, &s)
	return s, err
}
