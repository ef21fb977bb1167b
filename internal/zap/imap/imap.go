// Package imap is the IMAP backend of zero-hour purge (internal/zap): an
// administrator's login into each user's mailboxes (Dovecot's master
// user, "user*master"; Cyrus's and others' proxy logins work the same
// way when their separator is set), then UID SEARCH HEADER MESSAGE-ID in
// the source mailboxes, UID FETCH of the candidates (flags, internal
// date, the Message-ID header), move.Choose, UID MOVE of the one chosen
// (after a last check that it is still unseen, when only unread messages
// move); COPYUID (UIDPLUS) says where it went. An undo moves that UID
// back if the mailbox's UIDVALIDITY is the same and the UID still holds
// the same Message-ID.
package imap

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/nddmilter/nddmilter/internal/zap/move"
)

// TLS modes of Options.TLS.
const (
	TLSNone     = "none"     // plain text (loopback only)
	TLSImplicit = "tls"      // IMAPS
	TLSStartTLS = "starttls" // STARTTLS after the greeting
)

// Options configure a Client.
type Options struct {
	Addr string // host:port
	// TLS is TLSNone, TLSImplicit or TLSStartTLS. Default TLSStartTLS.
	TLS string
	// TLSConfig is used for TLSImplicit and TLSStartTLS (default: the
	// system's roots, the server name from Addr).
	TLSConfig *tls.Config
	// MasterUser and Password are the administrator's login.
	MasterUser, Password string
	// Separator joins the user and the master user in the login.
	// Default "*" (Dovecot's auth_master_user_separator).
	Separator string
	// Timeout bounds one session. Default 30 s.
	Timeout time.Duration
}

// Client moves messages over IMAP, one session per request. It is safe
// for concurrent use.
type Client struct{ o Options }

var _ move.Mover = (*Client)(nil)

// New returns a client.
func New(o Options) (*Client, error) {
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return nil, fmt.Errorf("%w: imap addr %q: %v", move.ErrConfig, o.Addr, err)
	}
	if o.TLS == "" {
		o.TLS = TLSStartTLS
	}
	switch o.TLS {
	case TLSNone, TLSImplicit, TLSStartTLS:
	default:
		return nil, fmt.Errorf("%w: imap tls %q is not none, tls or starttls", move.ErrConfig, o.TLS)
	}
	if o.MasterUser == "" || o.Password == "" {
		return nil, fmt.Errorf("%w: imap needs a master user and a password", move.ErrConfig)
	}
	if o.Separator == "" {
		o.Separator = "*"
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	return &Client{o: o}, nil
}

// session logs in as user through the master user.
func (c *Client) session(ctx context.Context, user string) (*imapclient.Client, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	d := &net.Dialer{Timeout: c.o.Timeout}
	opts := &imapclient.Options{Dialer: d, TLSConfig: c.o.TLSConfig}
	if opts.TLSConfig == nil {
		host, _, _ := net.SplitHostPort(c.o.Addr)
		opts.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	var cl *imapclient.Client
	var err error
	switch c.o.TLS {
	case TLSNone:
		cl, err = imapclient.DialInsecure(c.o.Addr, opts)
	case TLSImplicit:
		cl, err = imapclient.DialTLS(c.o.Addr, opts)
	default:
		cl, err = imapclient.DialStartTLS(c.o.Addr, opts)
	}
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("imap: connect %s: %w", c.o.Addr, err)
	}
	// The context ends the session: a cancelled purge or a stuck server.
	stop := context.AfterFunc(ctx, func() { cl.Close() })
	done := func() {
		stop()
		cl.Logout().Wait()
		cl.Close()
		cancel()
	}
	if err := cl.Login(user+c.o.Separator+c.o.MasterUser, c.o.Password).Wait(); err != nil {
		done()
		// A refused login is transient: a wrong master password is
		// fixed by the administrator, an unknown user runs out of
		// retries.
		return nil, nil, fmt.Errorf("imap: login %s%s%s: %w", user, c.o.Separator, c.o.MasterUser, err)
	}
	return cl, done, nil
}

// no reports whether err is the server's NO (a final answer about a
// mailbox), as against a broken connection.
func no(err error) bool {
	var e *imap.Error
	return errors.As(err, &e) && e.Type == imap.StatusResponseTypeNo
}

var idSection = &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"Message-ID"}, Peek: true}

// candidates fetches the messages of the selected mailbox among uids.
func candidates(cl *imapclient.Client, mailbox string, uids []imap.UID) ([]move.Candidate, error) {
	if len(uids) == 0 {
		return nil, nil
	}
	msgs, err := cl.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, Flags: true, InternalDate: true,
		BodySection: []*imap.FetchItemBodySection{idSection}}).Collect()
	if err != nil {
		return nil, fmt.Errorf("imap: fetch in %s: %w", mailbox, err)
	}
	var out []move.Candidate
	for _, m := range msgs {
		c := move.Candidate{Mailbox: mailbox, UID: uint32(m.UID), Received: m.InternalDate}
		if b := m.FindBodySection(idSection); b != nil {
			c.MessageID = headerID(b)
		}
		for _, f := range m.Flags {
			c.Seen = c.Seen || f == imap.FlagSeen
		}
		out = append(out, c)
	}
	return out, nil
}

// headerID is the Message-ID of a "Message-ID: <id>" header block.
func headerID(b []byte) string {
	s := strings.TrimRight(string(b), "\r\n")
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[i+1:]
	}
	return move.ParseMessageID(s)
}

func searchID(cl *imapclient.Client, id string, extra *imap.SearchCriteria) ([]imap.UID, error) {
	crit := &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: "<" + id + ">"}}}
	if extra != nil {
		crit.And(extra)
	}
	sd, err := cl.UIDSearch(crit, nil).Wait()
	if err != nil {
		return nil, err
	}
	return sd.AllUIDs(), nil
}

// Move moves the one copy r names to Junk.
func (c *Client) Move(ctx context.Context, r move.Request) (move.Result, error) {
	cl, done, err := c.session(ctx, r.User)
	if err != nil {
		return move.Result{}, err
	}
	defer done()
	var cands []move.Candidate
	for _, src := range r.Sources {
		if _, err := cl.Select(src, nil).Wait(); err != nil {
			if no(err) {
				continue // no such mailbox for this user
			}
			return move.Result{}, fmt.Errorf("imap: select %s: %w", src, err)
		}
		uids, err := searchID(cl, r.MessageID, nil)
		if err != nil {
			return move.Result{}, fmt.Errorf("imap: search %s: %w", src, err)
		}
		cs, err := candidates(cl, src, uids)
		if err != nil {
			return move.Result{}, err
		}
		cands = append(cands, cs...)
	}
	chosen, res, ok := move.Choose(r, cands)
	if !ok {
		return res, nil
	}
	if _, err := cl.Select(chosen.Mailbox, nil).Wait(); err != nil {
		return move.Result{}, fmt.Errorf("imap: select %s: %w", chosen.Mailbox, err)
	}
	if r.UnreadOnly {
		// The user may have read it since the fetch.
		uids, err := searchID(cl, r.MessageID, &imap.SearchCriteria{UID: []imap.UIDSet{imap.UIDSetNum(imap.UID(chosen.UID))}, NotFlag: []imap.Flag{imap.FlagSeen}})
		if err != nil {
			return move.Result{}, fmt.Errorf("imap: search %s: %w", chosen.Mailbox, err)
		}
		if len(uids) == 0 {
			return move.Result{Outcome: move.Skipped, Reason: move.ReasonRead, From: chosen.Mailbox}, nil
		}
	}
	md, err := cl.Move(imap.UIDSetNum(imap.UID(chosen.UID)), r.Junk).Wait()
	if err != nil {
		if no(err) {
			return move.Result{Outcome: move.Failed, Reason: move.ReasonNoMailbox + ": " + err.Error(), From: chosen.Mailbox}, nil
		}
		return move.Result{}, fmt.Errorf("imap: move to %s: %w", r.Junk, err)
	}
	to := move.Location{Mailbox: r.Junk}
	if set, ok := md.DestUIDs.(imap.UIDSet); ok && md.UIDValidity != 0 {
		if uids, ok := set.Nums(); ok && len(uids) == 1 {
			to.Validity, to.UID = strconv.FormatUint(uint64(md.UIDValidity), 10), uint32(uids[0])
		}
	}
	if to.UID == 0 {
		// No COPYUID: the newest message of Junk with the id.
		if sd, err := cl.Select(r.Junk, &imap.SelectOptions{ReadOnly: true}).Wait(); err == nil {
			if uids, err := searchID(cl, r.MessageID, nil); err == nil && len(uids) > 0 {
				to.Validity, to.UID = strconv.FormatUint(uint64(sd.UIDValidity), 10), uint32(uids[len(uids)-1])
			}
		}
	}
	return move.Result{Outcome: move.Moved, From: chosen.Mailbox, To: to}, nil
}

// Undo moves back the message a Move put at r.At, if it is still there.
func (c *Client) Undo(ctx context.Context, r move.UndoRequest) (move.Result, error) {
	if r.At.UID == 0 {
		return move.Result{Outcome: move.Skipped, Reason: move.ReasonGone}, nil
	}
	cl, done, err := c.session(ctx, r.User)
	if err != nil {
		return move.Result{}, err
	}
	defer done()
	sd, err := cl.Select(r.At.Mailbox, nil).Wait()
	if err != nil {
		if no(err) {
			return move.Result{Outcome: move.Skipped, Reason: move.ReasonGone}, nil
		}
		return move.Result{}, fmt.Errorf("imap: select %s: %w", r.At.Mailbox, err)
	}
	if r.At.Validity != "" && r.At.Validity != strconv.FormatUint(uint64(sd.UIDValidity), 10) {
		return move.Result{Outcome: move.Skipped, Reason: move.ReasonGone}, nil
	}
	cs, err := candidates(cl, r.At.Mailbox, []imap.UID{imap.UID(r.At.UID)})
	if err != nil {
		return move.Result{}, err
	}
	if len(cs) != 1 || cs[0].UID != r.At.UID || cs[0].MessageID != r.MessageID {
		return move.Result{Outcome: move.Skipped, Reason: move.ReasonGone}, nil
	}
	if _, err := cl.Move(imap.UIDSetNum(imap.UID(r.At.UID)), r.To).Wait(); err != nil {
		if no(err) {
			return move.Result{Outcome: move.Failed, Reason: move.ReasonNoMailbox + ": " + err.Error()}, nil
		}
		return move.Result{}, fmt.Errorf("imap: move back to %s: %w", r.To, err)
	}
	return move.Result{Outcome: move.Moved, From: r.At.Mailbox, To: move.Location{Mailbox: r.To}}, nil
}
