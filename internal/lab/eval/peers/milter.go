package peers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/lab/mtadial"
	"github.com/nddmilter/nddmilter/internal/milter"
)

// MilterCheck checks messages through a milter, the way an MTA does: one
// connection per message (connect, HELO, MAIL, RCPT, the header fields in
// order, end of headers, the body with CRLF line ends in chunks of at most
// 64 KB, end of message). Reports go to Learner; Check ignores Learner.
// This is the path whose latency the MTA waits for, and the same client
// code drives rspamd's milter (rspamd_proxy) and nddmilter's.
type MilterCheck struct {
	// Label names the tool in the tables.
	Label string
	// Addr is host:port of the milter.
	Addr string
	// Learner takes the reports and settles (the HTTP controller for
	// rspamd, the engine for nddmilter).
	Learner Detector
	// Flagged reads the milter's answer.
	Flagged func(mods []gomilter.ModifyAction, act *gomilter.Action) bool
	// Timeout bounds each read and write. Default 30 s.
	Timeout time.Duration
	// Closer, if set, is called by Close after Learner.Close (it stops an
	// in-process milter server).
	Closer func() error
}

// Name implements Detector.
func (m *MilterCheck) Name() string { return m.Label }

// Report implements Detector.
func (m *MilterCheck) Report(ctx context.Context, raw []byte) error {
	return m.Learner.Report(ctx, raw)
}

// Settle implements Detector.
func (m *MilterCheck) Settle(ctx context.Context) error { return m.Learner.Settle(ctx) }

// Close implements Detector.
func (m *MilterCheck) Close() error {
	err := m.Learner.Close()
	if m.Closer != nil {
		if cerr := m.Closer(); err == nil {
			err = cerr
		}
	}
	return err
}

// Check implements Detector: one milter session for raw.
func (m *MilterCheck) Check(ctx context.Context, raw []byte) (bool, error) {
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	c := gomilter.NewClientWithOptions("tcp", m.Addr, gomilter.ClientOptions{
		// As Postfix: a buffered connection, protocol 6 with every
		// protocol flag offered (each milter picks what it wants).
		Dialer:       mtadial.Dialer{Timeout: timeout},
		ProtocolMask: mtadial.PostfixProtocol,
		ReadTimeout:  timeout,
		WriteTimeout: timeout,
		ActionMask: gomilter.OptAddHeader | gomilter.OptChangeBody | gomilter.OptAddRcpt |
			gomilter.OptRemoveRcpt | gomilter.OptChangeHeader | gomilter.OptQuarantine,
	})
	s, err := c.Session()
	if err != nil {
		return false, fmt.Errorf("milter %s: %w", m.Addr, err)
	}
	defer s.Close()
	mods, act, err := sendMessage(s, raw)
	if err != nil {
		return false, fmt.Errorf("milter %s: %w", m.Addr, err)
	}
	return m.Flagged(mods, act), nil
}

// sendMessage runs one message through an open session. A non-continue
// answer before the end of message is returned as the final action.
func sendMessage(s *gomilter.ClientSession, raw []byte) ([]gomilter.ModifyAction, *gomilter.Action, error) {
	step := func(act *gomilter.Action, err error) (*gomilter.Action, bool, error) {
		if err != nil {
			return nil, true, err
		}
		return act, act.Code != gomilter.ActContinue, nil
	}
	var (
		act  *gomilter.Action
		done bool
		err  error
	)
	if act, done, err = step(s.Conn("mail.example.net", gomilter.FamilyInet, 25, "192.0.2.10")); done {
		return nil, act, err
	}
	if act, done, err = step(s.Helo("mail.example.net")); done {
		return nil, act, err
	}
	if act, done, err = step(s.Mail("<sender@example.net>", nil)); done {
		return nil, act, err
	}
	if act, done, err = step(s.Rcpt("<user@example.com>", nil)); done {
		return nil, act, err
	}
	fields, body := SplitMessage(raw)
	for _, f := range fields {
		if act, done, err = step(s.HeaderField(f[0], f[1])); done {
			return nil, act, err
		}
	}
	if act, done, err = step(s.HeaderEnd()); done {
		return nil, act, err
	}
	for len(body) > 0 {
		n := min(len(body), gomilter.MaxBodyChunk)
		act, err := s.BodyChunk(body[:n])
		if err != nil {
			return nil, nil, err
		}
		if act.Code == gomilter.ActSkip {
			break
		}
		if act.Code != gomilter.ActContinue {
			return nil, act, nil
		}
		body = body[n:]
	}
	return s.End()
}

// SplitMessage splits a raw message into header fields (name, value with
// folding kept as CRLF + whitespace, the space after the colon removed) and
// the body with CRLF line ends, as an MTA hands them to a milter. Lines
// without a colon in the header are skipped.
func SplitMessage(raw []byte) (fields [][2]string, body []byte) {
	head, rest := raw, []byte(nil)
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '\n')
		if j < 0 {
			break
		}
		line := raw[i : i+j]
		if len(bytes.TrimRight(line, "\r")) == 0 {
			head, rest = raw[:i], raw[i+j+1:]
			break
		}
		i += j + 1
	}
	var cur *[2]string
	for _, line := range strings.Split(string(head), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" {
			continue
		}
		if (line[0] == ' ' || line[0] == '\t') && cur != nil {
			cur[1] += "\r\n" + line
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(name, " \t") {
			cur = nil
			continue
		}
		fields = append(fields, [2]string{name, strings.TrimPrefix(value, " ")})
		cur = &fields[len(fields)-1]
	}
	// CRLF line ends, as on the wire.
	var b bytes.Buffer
	b.Grow(len(rest) + len(rest)/32)
	for len(rest) > 0 {
		j := bytes.IndexByte(rest, '\n')
		if j < 0 {
			b.Write(rest)
			break
		}
		b.Write(bytes.TrimSuffix(rest[:j], []byte("\r")))
		b.WriteString("\r\n")
		rest = rest[j+1:]
	}
	return fields, b.Bytes()
}

// RspamdFlagged reads rspamd's milter answer: flagged when the
// X-Spamd-Result header it adds lists symbol.
func RspamdFlagged(symbol string) func([]gomilter.ModifyAction, *gomilter.Action) bool {
	return func(mods []gomilter.ModifyAction, _ *gomilter.Action) bool {
		for _, m := range mods {
			if strings.EqualFold(m.HeaderName, "X-Spamd-Result") && strings.Contains(m.HeaderValue, symbol) {
				return true
			}
		}
		return false
	}
}

// NDDFlagged reads nddmilter's milter answer: flagged when it rejects or
// defers, quarantines, or tags the message with a campaign header.
func NDDFlagged(mods []gomilter.ModifyAction, act *gomilter.Action) bool {
	if act != nil {
		switch act.Code {
		case gomilter.ActReplyCode, gomilter.ActReject, gomilter.ActTempFail, gomilter.ActDiscard:
			return true
		}
	}
	for _, m := range mods {
		if m.Code == gomilter.ActQuarantine {
			return true
		}
		if m.Code == gomilter.ActAddHeader && strings.EqualFold(m.HeaderName, "X-NDD-Campaign") {
			return true
		}
	}
	return false
}

// ServeNDDMilter starts nddmilter's milter (internal/milter, default
// options, logging discarded) over n's engine on a free loopback port and
// returns its address and a function that stops it.
func ServeNDDMilter(n *NDD) (string, func() error, error) {
	srv, err := milter.New(n.eng.Checker, milter.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", nil, fmt.Errorf("nddmilter milter: %w", err)
	}
	ln, err := milter.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("nddmilter milter: %w", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		if serr := <-errc; err == nil && serr != nil && serr != io.EOF {
			err = serr
		}
		return err
	}
	return ln.Addr().String(), stop, nil
}
