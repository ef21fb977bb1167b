// Package doveadm is the Dovecot backend of zero-hour purge
// (internal/zap): Dovecot's doveadm HTTP API (POST /doveadm/v1, Dovecot
// 2.3 and 2.4: doveadm_api_key or doveadm_password, and an http listener
// of service doveadm). A move is a "fetch" of the candidates that a
// header search finds in the source mailboxes (UID, flags, received
// date, Message-ID), move.Choose, a "move" of the one chosen by UID (and
// still unseen, when only unread messages move), then a "fetch" in Junk
// to learn its new UID and the mailbox's GUID. An undo moves that UID
// back if it is still there, with the same Message-ID.
package doveadm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/zap/move"
)

// Options configure a Client.
type Options struct {
	// URL is the API's address, e.g. http://127.0.0.1:8080/doveadm/v1.
	URL string
	// APIKey (doveadm_api_key) or Password (doveadm_password, user
	// "doveadm"): one of them.
	APIKey, Password string
	// Timeout bounds one request. Default 10 s.
	Timeout time.Duration
	// HTTP is the client used (default: one of its own).
	HTTP *http.Client
}

// Client talks to doveadm's HTTP API. It is safe for concurrent use.
type Client struct {
	url  string
	auth string
	http *http.Client
}

var _ move.Mover = (*Client)(nil)

// New returns a client.
func New(o Options) (*Client, error) {
	if o.URL == "" || !(strings.HasPrefix(o.URL, "http://") || strings.HasPrefix(o.URL, "https://")) {
		return nil, fmt.Errorf("%w: doveadm url %q: want http(s)://host:port/doveadm/v1", move.ErrConfig, o.URL)
	}
	c := &Client{url: o.URL, http: o.HTTP}
	switch {
	case o.APIKey != "":
		c.auth = "X-Dovecot-API " + base64.StdEncoding.EncodeToString([]byte(o.APIKey))
	case o.Password != "":
		c.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte("doveadm:"+o.Password))
	default:
		return nil, fmt.Errorf("%w: doveadm needs an API key or a password", move.ErrConfig)
	}
	if c.http == nil {
		t := o.Timeout
		if t <= 0 {
			t = 10 * time.Second
		}
		c.http = &http.Client{Timeout: t}
	}
	return c, nil
}

// Exit codes of doveadm (sysexits.h) that are final answers.
const (
	exitNoUser   = 67 // EX_NOUSER
	exitNotFound = 68 // EX_NOTFOUND (doveadm: mailbox not found)
)

// cmdError is a command's error answer.
type cmdError struct {
	Type     string `json:"type"`
	ExitCode int    `json:"exitCode"`
}

func (e *cmdError) Error() string {
	return fmt.Sprintf("doveadm: %s, exit code %d", e.Type, e.ExitCode)
}

// call runs one command and decodes its answer into out.
func (c *Client) call(ctx context.Context, cmd string, params map[string]any, out any) error {
	body, err := json.Marshal([]any{[]any{cmd, params, "c"}})
	if err != nil {
		return fmt.Errorf("doveadm %s: %w", cmd, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("doveadm %s: %w", cmd, err)
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("doveadm %s: %w", cmd, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("doveadm %s: %w", cmd, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("doveadm %s: HTTP %s: %s", cmd, resp.Status, strings.TrimSpace(string(b[:min(len(b), 200)])))
	}
	var answers [][]json.RawMessage
	if err := json.Unmarshal(b, &answers); err != nil || len(answers) != 1 || len(answers[0]) < 2 {
		return fmt.Errorf("doveadm %s: unreadable answer %.200q", cmd, b)
	}
	var kind string
	if err := json.Unmarshal(answers[0][0], &kind); err != nil {
		return fmt.Errorf("doveadm %s: unreadable answer %.200q", cmd, b)
	}
	switch kind {
	case "doveadmResponse":
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(answers[0][1], out); err != nil {
			return fmt.Errorf("doveadm %s: unreadable answer: %w", cmd, err)
		}
		return nil
	case "error":
		var e cmdError
		if err := json.Unmarshal(answers[0][1], &e); err != nil {
			return fmt.Errorf("doveadm %s: unreadable error %.200q", cmd, b)
		}
		return fmt.Errorf("doveadm %s: %w", cmd, &e)
	}
	return fmt.Errorf("doveadm %s: answer %q", cmd, kind)
}

// final turns a command's error into a final result when it is one (an
// unknown user or mailbox); other errors are transient.
func final(err error) (move.Result, bool) {
	var e *cmdError
	if errors.As(err, &e) {
		switch e.ExitCode {
		case exitNoUser:
			return move.Result{Outcome: move.Failed, Reason: move.ReasonNoUser}, true
		case exitNotFound:
			return move.Result{Outcome: move.Failed, Reason: move.ReasonNoMailbox}, true
		}
	}
	return move.Result{}, false
}

type fetched struct {
	UID      string `json:"uid"`
	Flags    string `json:"flags"`
	Received string `json:"date.received.unixtime"`
	MsgID    string `json:"hdr.message-id"`
	GUID     string `json:"mailbox-guid"`
}

func (f fetched) candidate(mailbox string) (move.Candidate, bool) {
	uid, err := strconv.ParseUint(f.UID, 10, 32)
	if err != nil || uid == 0 {
		return move.Candidate{}, false
	}
	c := move.Candidate{Mailbox: mailbox, UID: uint32(uid), MessageID: move.ParseMessageID(f.MsgID)}
	for _, fl := range strings.Fields(f.Flags) {
		c.Seen = c.Seen || strings.EqualFold(fl, `\Seen`)
	}
	if s, err := strconv.ParseInt(f.Received, 10, 64); err == nil && s > 0 {
		c.Received = time.Unix(s, 0)
	}
	return c, true
}

// search fetches the messages of a user's mailbox whose Message-ID
// header contains <id> (more, when uid is set: that UID only).
func (c *Client) search(ctx context.Context, user, mailbox, id string, uid uint32) ([]move.Candidate, string, error) {
	q := []string{"mailbox", mailbox, "header", "message-id", "<" + id + ">"}
	if uid != 0 {
		q = append(q, "uid", strconv.FormatUint(uint64(uid), 10))
	}
	var rows []fetched
	err := c.call(ctx, "fetch", map[string]any{
		"user":  user,
		"field": []string{"uid", "flags", "date.received.unixtime", "hdr.message-id", "mailbox-guid"},
		"query": q,
	}, &rows)
	if err != nil {
		return nil, "", err
	}
	var out []move.Candidate
	guid := ""
	for _, r := range rows {
		if cand, ok := r.candidate(mailbox); ok {
			out = append(out, cand)
			guid = r.GUID
		}
	}
	return out, guid, nil
}

func (c *Client) moveUID(ctx context.Context, user, from string, uid uint32, unseen bool, to string) error {
	q := []string{"mailbox", from, "uid", strconv.FormatUint(uint64(uid), 10)}
	if unseen {
		q = append(q, "unseen")
	}
	return c.call(ctx, "move", map[string]any{"user": user, "destinationMailbox": to, "query": q}, nil)
}

// Move moves the one copy r names to Junk.
func (c *Client) Move(ctx context.Context, r move.Request) (move.Result, error) {
	var cands []move.Candidate
	for _, src := range r.Sources {
		cs, _, err := c.search(ctx, r.User, src, r.MessageID, 0)
		if err != nil {
			if res, ok := final(err); ok {
				return res, nil
			}
			return move.Result{}, err
		}
		cands = append(cands, cs...)
	}
	chosen, res, ok := move.Choose(r, cands)
	if !ok {
		return res, nil
	}
	if err := c.moveUID(ctx, r.User, chosen.Mailbox, chosen.UID, r.UnreadOnly, r.Junk); err != nil {
		if res, ok := final(err); ok {
			return res, nil
		}
		return move.Result{}, err
	}
	// Where it went: the newest message of Junk with that Message-ID
	// (UIDs only grow).
	cs, guid, err := c.search(ctx, r.User, r.Junk, r.MessageID, 0)
	if err != nil {
		return move.Result{}, fmt.Errorf("doveadm: moved, not found in %s: %w", r.Junk, err)
	}
	var best move.Candidate
	for _, cand := range cs {
		if cand.MessageID == r.MessageID && cand.UID > best.UID {
			best = cand
		}
	}
	if best.UID == 0 {
		// Nothing moved: the user read it (or moved it) in between.
		if r.UnreadOnly {
			return move.Result{Outcome: move.Skipped, Reason: move.ReasonRead, From: chosen.Mailbox}, nil
		}
		return move.Result{Outcome: move.Skipped, Reason: move.ReasonNotFound, From: chosen.Mailbox}, nil
	}
	return move.Result{Outcome: move.Moved, From: chosen.Mailbox,
		To: move.Location{Mailbox: r.Junk, Validity: guid, UID: best.UID}}, nil
}

// Undo moves back the message a Move put at r.At, if it is still there.
func (c *Client) Undo(ctx context.Context, r move.UndoRequest) (move.Result, error) {
	if r.At.UID == 0 {
		return move.Result{Outcome: move.Skipped, Reason: move.ReasonGone}, nil
	}
	cs, guid, err := c.search(ctx, r.User, r.At.Mailbox, r.MessageID, r.At.UID)
	if err != nil {
		if res, ok := final(err); ok {
			return res, nil
		}
		return move.Result{}, err
	}
	if len(cs) != 1 || cs[0].MessageID != r.MessageID || (r.At.Validity != "" && guid != r.At.Validity) {
		return move.Result{Outcome: move.Skipped, Reason: move.ReasonGone}, nil
	}
	if err := c.moveUID(ctx, r.User, r.At.Mailbox, r.At.UID, false, r.To); err != nil {
		if res, ok := final(err); ok {
			return res, nil
		}
		return move.Result{}, err
	}
	return move.Result{Outcome: move.Moved, From: r.At.Mailbox, To: move.Location{Mailbox: r.To}}, nil
}
