package milter

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/textproto"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/campaign"
)

// maxHeaderBytes caps the headers kept for the check (the MTA enforces its
// own header limit; Postfix's default header_size_limit is 100 KiB per
// header). Headers beyond it are not scanned.
const maxHeaderBytes = 1 << 20

// session is one milter connection's handler. go-milter creates a new one
// after each final reply (accept, reject, tempfail) but keeps it after a
// reply-code reject, so message state is reset in MailFrom and Abort.
type session struct {
	srv *Server
	st  *state // snapshot taken at MAIL FROM

	// Connection data (lost when go-milter replaces the handler after a
	// final reply; only for logs).
	client string

	// Message data.
	queueID   string
	from      string
	rcpts     []string
	raw       *bytes.Buffer // headers then body, CRLF line ends; from srv.bufs
	headerLen int
	eoh       bool  // the end of headers was seen
	bodyLen   int64 // all body bytes seen, scanned or not
	forged    []forgedHeader
}

type forgedHeader struct {
	name  string // as it arrived
	count int    // occurrences, for ChangeHeader's per-name index
}

func (s *session) reset() {
	s.st = s.srv.current()
	s.queueID, s.from = "", ""
	s.rcpts = s.rcpts[:0]
	if s.raw != nil {
		s.raw.Reset()
	}
	s.headerLen = 0
	s.eoh = false
	s.bodyLen = 0
	s.forged = s.forged[:0]
}

// buf is the message buffer, taken from the server's pool when the
// session has none (at the start, and after a check handed its buffer to
// the checker).
func (s *session) buf() *bytes.Buffer {
	if s.raw == nil {
		s.raw = s.srv.getBuffer()
	}
	return s.raw
}

func (s *session) state() *state {
	if s.st == nil {
		s.reset()
	}
	return s.st
}

func (s *session) macros(m *gomilter.Modifier) {
	if m == nil {
		return
	}
	if v := m.Macros["i"]; v != "" {
		s.queueID = v
	}
}

func (s *session) Connect(host, family string, port uint16, addr net.IP, m *gomilter.Modifier) (gomilter.Response, error) {
	if addr != nil {
		s.client = addr.String()
	} else {
		s.client = host
	}
	return gomilter.RespContinue, nil
}

func (s *session) Helo(name string, m *gomilter.Modifier) (gomilter.Response, error) {
	return gomilter.RespContinue, nil
}

func (s *session) MailFrom(from string, m *gomilter.Modifier) (gomilter.Response, error) {
	s.reset()
	s.from = from
	s.macros(m)
	return gomilter.RespContinue, nil
}

func (s *session) RcptTo(rcpt string, m *gomilter.Modifier) (gomilter.Response, error) {
	s.state()
	s.macros(m)
	if len(s.rcpts) < 1000 {
		s.rcpts = append(s.rcpts, rcpt)
	}
	return gomilter.RespContinue, nil
}

func (s *session) Header(name, value string, m *gomilter.Modifier) (gomilter.Response, error) {
	st := s.state()
	s.macros(m)
	if hasPrefixFold(name, st.opts.HeaderPrefix) {
		// A copy of our own headers from outside: remember it for deletion
		// and keep it out of the check.
		for i := range s.forged {
			if strings.EqualFold(s.forged[i].name, name) {
				s.forged[i].count++
				return gomilter.RespContinue, nil
			}
		}
		s.forged = append(s.forged, forgedHeader{name: name, count: 1})
		return gomilter.RespContinue, nil
	}
	if s.headerLen+len(name)+len(value)+4 > maxHeaderBytes {
		return gomilter.RespContinue, nil
	}
	b := s.buf()
	n := b.Len()
	b.WriteString(name)
	b.WriteString(": ")
	writeCRLF(b, value)
	b.WriteString("\r\n")
	s.headerLen += b.Len() - n
	return gomilter.RespContinue, nil
}

// writeCRLF writes v with every line end as CRLF (the MTA sends folded
// header lines with LF or CRLF).
func writeCRLF(b *bytes.Buffer, v string) {
	for {
		i := strings.IndexByte(v, '\n')
		if i < 0 {
			b.WriteString(v)
			return
		}
		b.WriteString(strings.TrimSuffix(v[:i], "\r"))
		b.WriteString("\r\n")
		v = v[i+1:]
	}
}

func (s *session) Headers(h textproto.MIMEHeader, m *gomilter.Modifier) (gomilter.Response, error) {
	s.state()
	s.macros(m)
	s.buf().WriteString("\r\n")
	s.eoh = true
	return gomilter.RespContinue, nil
}

func (s *session) BodyChunk(chunk []byte, m *gomilter.Modifier) (gomilter.Response, error) {
	st := s.state()
	s.bodyLen += int64(len(chunk))
	room := st.opts.MaxBodyBytes - (int64(s.buf().Len()) - int64(s.headerLen) - 2)
	if room > 0 {
		if int64(len(chunk)) > room {
			chunk = chunk[:room]
		}
		s.buf().Write(chunk)
	}
	return gomilter.RespContinue, nil
}

func (s *session) Abort(m *gomilter.Modifier) error {
	s.reset()
	return nil
}

// Body is the end of the message: check it and act.
func (s *session) Body(m *gomilter.Modifier) (gomilter.Response, error) {
	st := s.state()
	s.macros(m)
	o := st.opts
	if s.headerLen == 0 && s.buf().Len() == 0 {
		// Nothing arrived (e.g. the MTA skipped headers): nothing to judge.
		return gomilter.RespAccept, nil
	}
	if b := s.buf(); b.Len() > 0 && !s.eoh {
		// No end-of-headers callback (protocol step skipped).
		b.WriteString("\r\n")
	}
	truncated := s.bodyLen > o.MaxBodyBytes

	t0 := time.Now()
	v, stage, err := s.check(st)
	elapsed := time.Since(t0)
	checkTime := elapsed
	if err != nil {
		o.Metrics.Error(stage)
		o.Metrics.FailOpen()
		o.Metrics.Message(o.OnError, nil, checkTime, s.bodyLen, 0)
		o.Logger.Error("check failed", "queue_id", s.queueID, "from", s.from, "stage", stage,
			"err", err, "action", o.OnError, "duration_ms", ms(elapsed))
		if o.OnError == ActTempfail {
			return gomilter.RespTempFail, nil
		}
		if err := s.deleteForged(m); err != nil {
			return nil, err
		}
		if !o.NoAcceptHeader {
			// Say that the message passed unchecked, and why.
			if err := m.AddHeader(o.HeaderPrefix+"Verdict", "unchecked; error="+stage); err != nil {
				return nil, fmt.Errorf("add header: %w", err)
			}
		}
		return gomilter.RespAccept, nil
	}

	verdictAction := actionName(v.Action)
	action := s.capAction(o, verdictAction)
	reply := action
	if action == ActReject && o.RejectWith == ActTempfail {
		reply = ActTempfail
	}
	families := familiesOf(v.Evidence)
	o.Metrics.Message(reply, families, checkTime, s.bodyLen, len(v.Warnings))
	evidence := evidenceShort(v.Evidence)
	if o.Logger.Enabled(context.Background(), slog.LevelInfo) {
		// Typed attributes: no boxing of each value into an interface,
		// and nothing at all is built when info is off.
		attrs := make([]slog.Attr, 0, 15)
		attrs = append(attrs,
			slog.String("queue_id", s.queueID), slog.String("from", s.from), slog.Int("rcpts", len(s.rcpts)),
			slog.String("action", reply), slog.Uint64("campaign", uint64(v.Campaign)),
			slog.Float64("score", round3(v.Score)), slog.String("rule", v.Rule),
			slog.String("evidence", evidence), slog.Int64("body_bytes", s.bodyLen),
			slog.Float64("duration_ms", ms(elapsed)))
		if s.client != "" {
			attrs = append(attrs, slog.String("client", s.client))
		}
		if reply != verdictAction {
			attrs = append(attrs, slog.String("verdict", verdictAction))
		}
		if truncated {
			attrs = append(attrs, slog.Bool("truncated", true))
		}
		if len(v.Warnings) > 0 {
			attrs = append(attrs, slog.Int("warnings", len(v.Warnings)))
		}
		o.Logger.LogAttrs(context.Background(), slog.LevelInfo, "message", attrs...)
	}

	switch reply {
	case ActReject:
		return gomilter.NewResponseStr(byte(gomilter.ActReplyCode), expand(o.RejectText, v)), nil
	case ActTempfail:
		return gomilter.NewResponseStr(byte(gomilter.ActReplyCode), expand(o.TempfailText, v)), nil
	}
	if err := s.deleteForged(m); err != nil {
		return nil, err
	}
	if action != ActAccept || !o.NoAcceptHeader {
		if err := m.AddHeader(o.HeaderPrefix+"Verdict", verdictHeader(action, v)); err != nil {
			return nil, fmt.Errorf("add header: %w", err)
		}
	}
	if action != ActAccept && v.Campaign != 0 {
		if err := m.AddHeader(o.HeaderPrefix+"Campaign", strconv.FormatUint(uint64(v.Campaign), 10)); err != nil {
			return nil, fmt.Errorf("add header: %w", err)
		}
		if evidence != "" {
			if err := m.AddHeader(o.HeaderPrefix+"Evidence", evidence); err != nil {
				return nil, fmt.Errorf("add header: %w", err)
			}
		}
	}
	if action == ActQuarantine {
		if err := m.Quarantine(expand(o.QuarantineReason, v)); err != nil {
			return nil, fmt.Errorf("quarantine: %w", err)
		}
	}
	return gomilter.RespAccept, nil
}

// check runs the checker under the deadline, recovering from panics. The
// stage of a failure is "check", "timeout" or "panic".
func (s *session) check(st *state) (v campaign.Verdict, stage string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), st.opts.CheckTimeout)
	defer cancel()
	type result struct {
		v     campaign.Verdict
		err   error
		panic bool
	}
	ch := make(chan result, 1)
	// The checker owns the message buffer until it returns, then gives it
	// back to the pool: one that times out keeps running on it while the
	// session goes on with a fresh buffer.
	buf := s.buf()
	s.raw = nil // the next message takes another one (see buf)
	go func() {
		defer s.srv.putBuffer(buf)
		defer func() {
			if p := recover(); p != nil {
				ch <- result{err: fmt.Errorf("panic: %v\n%s", p, debug.Stack()), panic: true}
			}
		}()
		v, err := st.checker.Check(ctx, buf.Bytes())
		ch <- result{v: v, err: err}
	}()
	select {
	case r := <-ch:
		switch {
		case r.panic:
			return v, "panic", r.err
		case r.err != nil:
			if ctx.Err() != nil {
				return v, "timeout", fmt.Errorf("check: %w", r.err)
			}
			return v, "check", fmt.Errorf("check: %w", r.err)
		}
		return r.v, "", nil
	case <-ctx.Done():
		return v, "timeout", fmt.Errorf("check: no verdict within %s", st.opts.CheckTimeout)
	}
}

// deleteForged deletes every incoming header with our prefix, last
// occurrence first so that indexes stay valid whatever the MTA's
// renumbering.
func (s *session) deleteForged(m *gomilter.Modifier) error {
	for _, f := range s.forged {
		for i := f.count; i >= 1; i-- {
			if err := m.ChangeHeader(i, f.name, ""); err != nil {
				return fmt.Errorf("delete forged header %s: %w", f.name, err)
			}
		}
	}
	return nil
}

// capAction applies MaxAction and the recipients' overrides.
func (s *session) capAction(o Options, action string) string {
	limit := o.MaxAction
	if len(o.Overrides) > 0 && len(s.rcpts) > 0 {
		weakest := ""
		for _, r := range s.rcpts {
			c := override(o.Overrides, r)
			if c == "" {
				c = o.MaxAction
			}
			if weakest == "" || rank(c) < rank(weakest) {
				weakest = c
			}
		}
		limit = weakest
	}
	if rank(action) > rank(limit) {
		return limit
	}
	return action
}

// override finds the cap for a recipient: the address, then its domain
// and parent domains.
func override(ov map[string]string, rcpt string) string {
	r := strings.ToLower(strings.Trim(rcpt, "<> "))
	if c, ok := ov[r]; ok {
		return c
	}
	_, d, ok := strings.Cut(r, "@")
	if !ok {
		return ""
	}
	for d != "" {
		if c, ok := ov[d]; ok {
			return c
		}
		_, d, _ = strings.Cut(d, ".")
	}
	return ""
}

func rank(a string) int {
	switch a {
	case ActAccept:
		return 0
	case ActTag:
		return 1
	case ActQuarantine:
		return 2
	case ActReject:
		return 3
	}
	return -1
}

func actionName(a campaign.Action) string {
	switch a {
	case campaign.Tag:
		return ActTag
	case campaign.Quarantine:
		return ActQuarantine
	case campaign.Reject:
		return ActReject
	}
	return ActAccept
}

func familiesOf(ev []campaign.Evidence) []string {
	var fams []string
	for _, e := range ev {
		found := false
		for _, f := range fams {
			if f == e.Family {
				found = true
			}
		}
		if !found && e.Family != "" {
			fams = append(fams, e.Family)
		}
	}
	return fams
}

// evidenceShort summarizes the evidence: "imatch bags=0,3,7; andd cos=0.93".
func evidenceShort(ev []campaign.Evidence) string {
	var bags []string
	best := -1.0
	other := map[string]int{}
	for _, e := range ev {
		switch e.Family {
		case "imatch":
			bags = append(bags, strconv.Itoa(e.Bag))
		case "andd":
			if e.Similarity > best {
				best = e.Similarity
			}
		default:
			other[e.Family]++
		}
	}
	var parts []string
	if len(bags) > 0 {
		parts = append(parts, "imatch bags="+strings.Join(bags, ","))
	}
	if best >= 0 {
		parts = append(parts, "andd cos="+strconv.FormatFloat(best, 'f', 2, 64))
	}
	for f, n := range other {
		parts = append(parts, fmt.Sprintf("%s n=%d", sanitize(f), n))
	}
	return strings.Join(parts, "; ")
}

func verdictHeader(action string, v campaign.Verdict) string {
	h := action + "; score=" + strconv.FormatFloat(v.Score, 'f', 3, 64)
	if v.Rule != "" {
		h += "; rule=" + sanitize(v.Rule)
	}
	return h
}

// expand substitutes %c, %s, %r and %% in a reply or reason template.
func expand(tmpl string, v campaign.Verdict) string {
	var b strings.Builder
	for i := 0; i < len(tmpl); i++ {
		if tmpl[i] != '%' || i+1 >= len(tmpl) {
			b.WriteByte(tmpl[i])
			continue
		}
		i++
		switch tmpl[i] {
		case 'c':
			b.WriteString(strconv.FormatUint(uint64(v.Campaign), 10))
		case 's':
			b.WriteString(strconv.FormatFloat(v.Score, 'f', 2, 64))
		case 'r':
			b.WriteString(sanitize(v.Rule))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(tmpl[i])
		}
	}
	return b.String()
}

// sanitize keeps printable ASCII (no '%', which some MTAs interpret in
// reply texts), so that a value can go into a header or an SMTP reply.
func sanitize(s string) string {
	s = asciiReplacer.Replace(s)
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 200 {
			break
		}
		if r >= ' ' && r <= '~' && r != '%' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// asciiReplacer spells out the symbols the policy's rules use.
var asciiReplacer = strings.NewReplacer("×", "x", "≥", ">=", "≤", "<=", "≈", "~", "→", "->", "…", "...", "−", "-")

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func round3(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 3, 64), 64)
	return v
}

// ms is d in milliseconds with microsecond precision, for logs.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
