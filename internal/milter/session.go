package milter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
)

// maxHeaderBytes caps the headers kept for the check (the MTA enforces its
// own header limit; Postfix's default header_size_limit is 100 KiB per
// header). Headers beyond it are not scanned.
const maxHeaderBytes = 1 << 20

// session is the message state of one milter connection. Message data is
// reset at MAIL FROM, abort, and after each end of message.
type session struct {
	srv *Server
	st  *state // snapshot taken at MAIL FROM

	// Connection data.
	client string // address or host name of the SMTP client, for logs
	warned uint32 // actions the MTA did not allow, already logged
	slot   bool   // holds one of the MaxSessions buffering slots

	// Message data.
	queueID   string
	from      string
	rcpts     int           // recipients seen
	capLimit  action.Action // weakest override among the recipients (when capBy is set)
	capBy     string        // the override that set capLimit ("" none)
	raw       *bytes.Buffer // headers then body, CRLF line ends; from srv.bufs
	headerLen int
	eoh       bool  // the end of headers was seen
	bodyLen   int64 // all body bytes seen, scanned or not
	forged    []forgedHeader
	rcptList  []string // the first maxLoggedRcpts recipients, for the log
	// ledgerRcpts are the first maxLedgerRcpts recipients (Options.Ledger
	// set); kept, the evidence the ledger keeps if the message passes.
	ledgerRcpts []string
	kept        kept
	subject     string // the first Subject (for milter.subject_tag)
	subjects    int    // Subject headers seen
	spamFlags   int    // X-Spam-Flag headers seen
	spamStats   int    // X-Spam-Status headers seen
	// Reports by mail (report.go): the SASL login (macro {auth_authen})
	// and the recipients that are spam or ham report addresses, or not.
	auth                            string
	spamRcpts, hamRcpts, otherRcpts int
	reportRcpts                     []string // the report addresses as the MTA sent them (the first maxLoggedRcpts)
	// reserved is the part of raw's capacity charged to the budget;
	// over, when set, is why the message is not buffered (overSessions):
	// its end gets the OnError treatment; cut, that the budget stopped
	// the buffering (overBytes): its end gets the OnOverload treatment.
	// See limits.go.
	reserved int64
	over     string
	cut      bool
}

// maxLoggedRcpts bounds the recipients named in a message's log line (the
// line also has their count).
const maxLoggedRcpts = 16

// maxSubjectBytes bounds the Subject kept for milter.subject_tag; a longer
// one is left untagged.
const maxSubjectBytes = 4096

// The SpamAssassin headers of Options.SpamHeaders.
const (
	spamFlagHeader   = "X-Spam-Flag"
	spamStatusHeader = "X-Spam-Status"
)

// maxForged bounds the forged copies of one of our headers that are
// deleted; a message with more is rejected (no MTA or hop adds more than
// one, and each deletion costs the MTA a pass over its queue file).
const maxForged = 32

// ownHeader reports whether suffix (a header name after the prefix) is
// one of the headers nddmilter adds.
func ownHeader(suffix []byte) bool {
	for _, n := range []string{"Verdict", "Campaign", "Evidence", "Report"} {
		if bytes.EqualFold(suffix, []byte(n)) {
			return true
		}
	}
	return false
}

type forgedHeader struct {
	name  string // as it arrived
	count int    // occurrences, for SMFIR_CHGHEADER's per-name index
}

func (s *session) reset() {
	s.st = s.srv.current()
	s.queueID, s.from = "", ""
	s.rcpts, s.capLimit, s.capBy = 0, action.Accept, ""
	s.rcptList, s.subject, s.subjects, s.spamFlags, s.spamStats = s.rcptList[:0], "", 0, 0, 0
	s.ledgerRcpts, s.kept = s.ledgerRcpts[:0], kept{}
	s.auth, s.spamRcpts, s.hamRcpts, s.otherRcpts, s.reportRcpts = "", 0, 0, 0, s.reportRcpts[:0]
	if s.reserved > 0 {
		// A large buffer is not kept between messages.
		s.dropBuf()
	}
	if s.raw != nil {
		s.raw.Reset()
	}
	s.over, s.cut = "", false
	if !s.slot {
		s.slot = s.srv.acquireSlot()
	}
	if !s.slot {
		s.over = overSessions
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

// release gives the message buffer back to the pool (connection closed).
func (s *session) release() { s.dropBuf() }

func (s *session) state() *state {
	if s.st == nil {
		s.reset()
	}
	return s.st
}

// macros takes what it needs from an SMFIC_MACRO packet's name\0value\0
// pairs: the queue id (macro i, sent by Postfix at end of message) and
// the SASL login (macro {auth_authen}, sent with MAIL FROM when the SMTP
// client authenticated; the MTA sends the macros of a step just before
// it, and they hold until the end of the message).
func (s *session) macros(pairs []byte) {
	for len(pairs) > 0 {
		var name, value []byte
		name, pairs = cstring(pairs)
		value, pairs = cstring(pairs)
		switch string(name) {
		case "i", "{i}":
			s.queueID = string(printable(value))
		case "{auth_authen}":
			s.auth = string(printable(bytes.TrimSpace(value)))
		}
	}
}

func (s *session) connect(client string) { s.client = client }

// mailFrom starts a message; args are the sender and ESMTP arguments.
func (s *session) mailFrom(args []byte) {
	// Sendmail sends the queue id (macro i) with MAIL, in the macro
	// packet just before it: keep it. (The previous message's was cleared
	// at its end or abort.)
	q, a := s.queueID, s.auth
	s.reset()
	s.queueID, s.auth = q, a
	from, _ := cstring(args)
	s.from = string(printable(from))
}

func (s *session) rcptTo(args []byte) {
	st := s.state()
	s.rcpts++
	// The cap of each recipient is applied as it arrives: there may be
	// more recipients than are worth keeping.
	r, _ := cstring(args)
	if len(s.rcptList) < maxLoggedRcpts {
		s.rcptList = append(s.rcptList, strings.Trim(string(printable(r)), "<> "))
	}
	s.ledgerRcpt(st, r)
	if st.reports.enabled() {
		s.reportRcpt(&st.reports, string(printable(r)))
	}
	if c, key, ok := override(st.act.overrides, string(r)); ok && (s.capBy == "" || c < s.capLimit) {
		s.capLimit, s.capBy = c, "milter.overrides "+sanitize(key)
	}
}

// header adds one header field (SMFIC_HEADER: name\0value\0).
func (s *session) header(data []byte) {
	st := s.state()
	name, rest := cstring(data)
	value, _ := cstring(rest)
	if len(name) >= len(st.opts.HeaderPrefix) && bytes.EqualFold(name[:len(st.opts.HeaderPrefix)], []byte(st.opts.HeaderPrefix)) {
		// A header with our prefix from outside: kept out of the check.
		// Copies of the headers nddmilter adds are remembered for
		// deletion; other names are harmless and left alone (deleting
		// each costs the MTA a pass over the queue file).
		if !ownHeader(name[len(st.opts.HeaderPrefix):]) {
			return
		}
		for i := range s.forged {
			if strings.EqualFold(s.forged[i].name, string(name)) {
				s.forged[i].count++
				return
			}
		}
		s.forged = append(s.forged, forgedHeader{name: string(name), count: 1})
		return
	}
	switch {
	case bytes.EqualFold(name, []byte("Subject")):
		if s.subjects++; s.subjects == 1 && len(value) <= maxSubjectBytes {
			s.subject = string(value)
		}
	case bytes.EqualFold(name, []byte(spamFlagHeader)):
		s.spamFlags++
	case bytes.EqualFold(name, []byte(spamStatusHeader)):
		s.spamStats++
	}
	if s.over != "" || s.cut || s.headerLen+len(name)+len(value)+4 > maxHeaderBytes {
		return
	}
	if !s.grow(len(name) + len(value) + bytes.Count(value, []byte{'\n'}) + 4) {
		s.overload(overBytes)
		return
	}
	b := s.buf()
	n := b.Len()
	b.Write(name)
	b.WriteString(": ")
	writeCRLF(b, value)
	b.WriteString("\r\n")
	s.headerLen += b.Len() - n
}

// writeCRLF writes v with every line end as CRLF (the MTA sends folded
// header lines with LF or CRLF).
func writeCRLF(b *bytes.Buffer, v []byte) {
	for {
		i := bytes.IndexByte(v, '\n')
		if i < 0 {
			b.Write(v)
			return
		}
		b.Write(bytes.TrimSuffix(v[:i], []byte("\r")))
		b.WriteString("\r\n")
		v = v[i+1:]
	}
}

func (s *session) endOfHeaders() {
	s.state()
	if !s.eoh {
		s.eoh = true
		if s.over != "" || s.cut {
			return
		}
		if !s.grow(2) {
			s.overload(overBytes)
			return
		}
		s.buf().WriteString("\r\n")
	}
}

func (s *session) body(chunk []byte) {
	st := s.state()
	if !s.eoh {
		// Body before the end of headers (SMFIP_NOEOH, or a confused
		// MTA): close the header block first.
		s.endOfHeaders()
	}
	s.bodyLen += int64(len(chunk))
	if s.over != "" || s.cut {
		return
	}
	room := st.opts.MaxBodyBytes - (int64(s.buf().Len()) - int64(s.headerLen) - 2)
	if room > 0 {
		if int64(len(chunk)) > room {
			chunk = chunk[:room]
		}
		if !s.grow(len(chunk)) {
			s.overload(overBytes)
			return
		}
		s.buf().Write(chunk)
	}
}

func (s *session) abort() { s.reset() }

// reply collects the end-of-message modifications and the final reply,
// skipping (and logging once per connection) the actions the MTA did not
// allow.
type reply struct {
	s       *session
	neg     negotiation
	out     []byte
	skipped uint32
}

func (r *reply) allowed(act uint32) bool {
	if r.neg.actions&act != 0 {
		return true
	}
	r.skipped |= act
	return false
}

func (r *reply) addHeader(name, value string) {
	if r.allowed(actAddHeaders) {
		r.out = appendPacket(r.out, repAddHeader, nil, true, name, value)
	}
}

func (r *reply) deleteHeader(index int, name string) { r.changeHeader(index, name, "") }

// changeHeader replaces the index-th (from 1) header called name with
// value ("" deletes it).
func (r *reply) changeHeader(index int, name, value string) {
	if r.allowed(actChgHeaders) {
		var idx [4]byte
		binary.BigEndian.PutUint32(idx[:], uint32(index))
		r.out = appendPacket(r.out, repChgHeader, idx[:], true, name, value)
	}
}

// setHeader replaces the first of the n headers called name with value,
// or adds it when there is none.
func (r *reply) setHeader(n int, name, value string) {
	if n > 0 {
		r.changeHeader(1, name, value)
		return
	}
	r.addHeader(name, value)
}

// delRcpt removes a recipient (as the MTA sent it at RCPT TO).
func (r *reply) delRcpt(rcpt string) {
	if r.allowed(actDelRcpt) {
		r.out = appendPacket(r.out, repDelRcpt, nil, true, rcpt)
	}
}

func (r *reply) quarantine(reason string) {
	if r.allowed(actQuarantine) {
		r.out = appendPacket(r.out, repQuarantine, nil, true, reason)
	}
}

func (r *reply) final(code byte) { r.out = appendPacket(r.out, code, nil, false) }

// replyCode sends an SMTP reply. Sendmail uses it as a format string and
// Postfix removes single '%' characters, so a literal '%' is doubled.
func (r *reply) replyCode(text string) {
	r.out = appendPacket(r.out, repReplyCode, nil, true, strings.ReplaceAll(text, "%", "%%"))
}

// end is the end of the message: check it, act, and append the
// modifications and the final reply to dst. The message state is reset.
func (s *session) end(dst []byte, neg negotiation) []byte {
	r := &reply{s: s, neg: neg, out: dst}
	s.decide(r)
	if miss := r.skipped &^ s.warned; miss != 0 {
		s.warned |= miss
		s.st.opts.Logger.Warn("the MTA does not allow a milter action; enable it (Sendmail: the filter's flags; Postfix allows all)",
			"actions", actionNames(miss), "client", s.logAddr(s.client))
	}
	s.reset()
	return r.out
}

func actionNames(a uint32) string {
	var names []string
	if a&actAddHeaders != 0 {
		names = append(names, "add header")
	}
	if a&actChgHeaders != 0 {
		names = append(names, "change header")
	}
	if a&actQuarantine != 0 {
		names = append(names, "quarantine")
	}
	if a&actDelRcpt != 0 {
		names = append(names, "delete recipient")
	}
	return strings.Join(names, ", ")
}

func (s *session) decide(r *reply) {
	st := s.state()
	o := st.opts
	if s.over != "" {
		s.overloaded(r)
		return
	}
	if s.headerLen == 0 && s.buf().Len() == 0 {
		// Nothing arrived (e.g. the MTA skipped headers): nothing to judge.
		r.final(repAccept)
		return
	}
	if !s.eoh {
		// No end-of-headers command (protocol step skipped).
		s.endOfHeaders()
	}
	for _, f := range s.forged {
		if f.count > maxForged {
			o.Metrics.Message(action.Reject, nil, 0, s.bodyLen, 0)
			o.Logger.Warn("message rejected: too many forged headers", "queue_id", s.queueID, "from", s.logAddr(s.from),
				"header", sanitize(f.name), "count", f.count, "client", s.logAddr(s.client))
			r.replyCode(fmt.Sprintf("550 5.7.1 Message rejected: %d %s headers (nddmilter)", f.count, sanitize(f.name)))
			return
		}
	}
	if s.report(r) {
		return
	}
	if s.cutShort(r) {
		return
	}
	// A message longer than MaxBodyBytes, or cut short by the byte
	// budget, is checked from its head.
	truncated := s.bodyLen > o.MaxBodyBytes || s.cut

	t0 := time.Now()
	limit, capBy := s.limit(st.act)
	v, stage, err := s.check(st, limit, capBy)
	elapsed := time.Since(t0)
	if err != nil {
		o.Metrics.Error(stage)
		o.Metrics.FailOpen()
		o.Metrics.Message(st.act.onError, nil, elapsed, s.bodyLen, 0)
		o.Logger.Error("check failed", "queue_id", s.queueID, "from", s.logAddr(s.from), "stage", stage,
			"err", err, "action", st.act.onError.String(), "duration_ms", ms(elapsed))
		if st.act.onError == action.Tempfail {
			r.final(repTempfail)
			return
		}
		s.deleteForged(r)
		if !o.NoAcceptHeader {
			// Say that the message passed unchecked, and why.
			r.addHeader(o.HeaderPrefix+"Verdict", "unchecked; error="+stage)
		}
		r.final(repAccept)
		return
	}

	verdictAction := v.Action
	// The checker applies the cap itself (its rule says so and the
	// campaign counts the action taken); capping again here keeps the
	// promise with a checker that does not.
	act := verdictAction.Cap(limit)
	reply := act
	if act == action.Reject && st.act.rejectWith == action.Tempfail {
		reply = action.Tempfail
	}
	families := familiesOf(v.Evidence)
	o.Metrics.Message(reply, families, elapsed, s.bodyLen, len(v.Warnings))
	evidence := evidenceShort(v.Evidence)
	if o.Logger.Enabled(context.Background(), slog.LevelInfo) {
		// Typed attributes: no boxing of each value into an interface,
		// and nothing at all is built when info is off.
		attrs := make([]slog.Attr, 0, 15)
		attrs = append(attrs,
			slog.String("queue_id", s.queueID), slog.String("from", s.logAddr(s.from)), slog.Int("rcpts", s.rcpts),
			slog.String("rcpt", s.logRcpts()),
			slog.String("action", reply.String()), slog.Uint64("campaign", uint64(v.Campaign)),
			slog.Float64("score", round3(v.Score)), slog.String("rule", v.Rule),
			slog.String("evidence", evidence), slog.Int64("body_bytes", s.bodyLen),
			slog.Float64("duration_ms", ms(elapsed)))
		if s.client != "" {
			attrs = append(attrs, slog.String("client", s.logAddr(s.client)))
		}
		if reply != verdictAction {
			attrs = append(attrs, slog.String("verdict", verdictAction.String()))
		}
		if truncated {
			attrs = append(attrs, slog.Bool("truncated", true))
		}
		if s.cut {
			attrs = append(attrs, slog.String("cut_by", "milter.max_buffered_bytes"), slog.Int("checked_bytes", s.buf().Len()))
		}
		if len(v.Warnings) > 0 {
			attrs = append(attrs, slog.Int("warnings", len(v.Warnings)))
		}
		o.Logger.LogAttrs(context.Background(), slog.LevelInfo, "message", attrs...)
	}

	switch reply {
	case action.Reject:
		r.replyCode(expand(o.RejectText, v))
		return
	case action.Tempfail:
		r.replyCode(expand(o.TempfailText, v))
		return
	}
	s.deleteForged(r)
	if act != action.Accept || !o.NoAcceptHeader {
		r.addHeader(o.HeaderPrefix+"Verdict", verdictHeader(act, v))
	}
	if act != action.Accept && v.Campaign != 0 {
		r.addHeader(o.HeaderPrefix+"Campaign", strconv.FormatUint(uint64(v.Campaign), 10))
		if evidence != "" {
			r.addHeader(o.HeaderPrefix+"Evidence", evidence)
		}
	}
	if act == action.Tag || act == action.Quarantine {
		s.markSpam(r, act, v)
	}
	if act == action.Quarantine {
		r.quarantine(expand(o.QuarantineReason, v))
	} else {
		s.record(st, s.kept)
	}
	r.final(repAccept)
}

// markSpam adds the SpamAssassin-style headers and the Subject tag the
// options ask for to a tagged or quarantined message.
func (s *session) markSpam(r *reply, act action.Action, v campaign.Verdict) {
	o := s.state().opts
	if o.SpamHeaders {
		r.setHeader(s.spamFlags, spamFlagHeader, "YES")
		r.setHeader(s.spamStats, spamStatusHeader, spamStatus(act, v, o.SpamRequired))
	}
	if o.SubjectTag != "" && len(s.subject) <= maxSubjectBytes {
		subj := strings.TrimLeft(s.subject, " \t")
		if !strings.HasPrefix(subj, o.SubjectTag) && !strings.HasPrefix(subj, strings.TrimSpace(o.SubjectTag)) {
			r.setHeader(s.subjects, "Subject", o.SubjectTag+subj)
		}
	}
}

// spamStatus is the X-Spam-Status value of SpamAssassin's default
// template ("_YESNO_, score=_SCORE_ required=_REQD_ tests=_TESTS_
// autolearn=_AUTOLEARN_ version=_VERSION_").
func spamStatus(act action.Action, v campaign.Verdict, required float64) string {
	tests := "NDD_" + strings.ToUpper(act.String())
	if v.Campaign != 0 {
		tests = fmt.Sprintf("NDD_CAMPAIGN_%d,%s", v.Campaign, tests)
	}
	return fmt.Sprintf("Yes, score=%.3f required=%.3f tests=%s autolearn=no version=nddmilter", v.Score, required, tests)
}

// logAddr is an address for the log: as is, or hashed with
// Options.HashAddresses.
func (s *session) logAddr(a string) string {
	if !s.state().opts.HashAddresses || a == "" {
		return a
	}
	sum := sha256.Sum256([]byte(strings.ToLower(strings.Trim(a, "<> "))))
	return "h:" + hex.EncodeToString(sum[:8])
}

// logRcpts lists the recipients for the log, comma-separated, "…" when
// there are more than were kept.
func (s *session) logRcpts() string {
	var b strings.Builder
	for i, r := range s.rcptList {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s.logAddr(r))
	}
	if s.rcpts > len(s.rcptList) {
		b.WriteString(",…")
	}
	return b.String()
}

// check runs the checker under the deadline, recovering from panics. The
// stage of a failure is "check", "timeout" or "panic".
func (s *session) check(st *state, limit action.Action, capBy string) (v campaign.Verdict, stage string, err error) {
	co := campaign.CheckOptions{DeferRejects: st.act.rejectWith == action.Tempfail}
	if capBy != "" {
		co.MaxAction, co.CapBy = limit, capBy
	}
	ctx, cancel := context.WithTimeout(context.Background(), st.opts.CheckTimeout)
	defer cancel()
	type result struct {
		v     campaign.Verdict
		err   error
		panic bool
		kept  kept
	}
	ch := make(chan result, 1)
	// The checker owns the message buffer until it returns, then gives it
	// back to the pool: one that times out keeps running on it while the
	// session goes on with a fresh buffer.
	buf, reserved := s.buf(), s.reserved
	s.raw, s.reserved = nil, 0 // the next message takes another one (see buf)
	s.srv.checks.Go(func() {
		defer s.srv.release(reserved)
		defer s.srv.putBuffer(buf)
		defer func() {
			if p := recover(); p != nil {
				ch <- result{err: fmt.Errorf("panic: %v\n%s", p, debug.Stack()), panic: true}
			}
		}()
		if ec, ok := st.checker.(EvidenceChecker); ok && st.opts.Ledger != nil {
			v, m, err := ec.CheckEvidence(ctx, buf.Bytes(), co)
			var k kept
			if err == nil {
				k, _ = keep(m, v, limit)
			}
			ch <- result{v: v, err: err, kept: k}
			return
		}
		v, err := st.checker.CheckWith(ctx, buf.Bytes(), co)
		ch <- result{v: v, err: err}
	})
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
		s.kept = r.kept
		return r.v, "", nil
	case <-ctx.Done():
		return v, "timeout", fmt.Errorf("check: no verdict within %s", st.opts.CheckTimeout)
	}
}

// deleteForged deletes every incoming header with our prefix, last
// occurrence first so that indexes stay valid whatever the MTA's
// renumbering.
func (s *session) deleteForged(r *reply) {
	for _, f := range s.forged {
		for i := f.count; i >= 1; i-- {
			r.deleteHeader(i, f.name)
		}
	}
}

// limit is the strongest action allowed for the message: Options.MaxAction,
// lowered by the overrides of its recipients (the weakest cap among them
// wins), and what set it ("" when nothing caps below reject).
func (s *session) limit(a actions) (limit action.Action, by string) {
	limit = a.maxAction
	if limit != action.Reject {
		by = "milter max_action"
	}
	if s.capBy != "" && s.capLimit < limit {
		limit, by = s.capLimit, s.capBy
	}
	return limit, by
}

// override finds the cap for a recipient: the address, then its domain
// and parent domains. It returns the cap and the key that set it.
func override(ov map[string]action.Action, rcpt string) (limit action.Action, key string, ok bool) {
	if len(ov) == 0 {
		return limit, "", false
	}
	r := strings.ToLower(strings.Trim(rcpt, "<> "))
	if c, ok := ov[r]; ok {
		return c, r, true
	}
	_, d, ok := strings.Cut(r, "@")
	if !ok {
		return limit, "", false
	}
	for d != "" {
		if c, ok := ov[d]; ok {
			return c, d, true
		}
		_, d, _ = strings.Cut(d, ".")
	}
	return limit, "", false
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
		case campaign.FamilyIMatch:
			bags = append(bags, strconv.Itoa(e.Bag))
		case campaign.FamilyANDD:
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

func verdictHeader(a action.Action, v campaign.Verdict) string {
	h := a.String() + "; score=" + strconv.FormatFloat(v.Score, 'f', 3, 64)
	if v.Rule != "" {
		h += "; rule=" + sanitizeN(v.Rule, maxHeaderRule)
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
// reply texts) and at most 200 bytes, so that a value can go into an SMTP
// reply (512 bytes a line).
func sanitize(s string) string { return sanitizeN(s, 200) }

// maxHeaderRule bounds the rule in X-NDD-Verdict: one header line stays
// well under the 998 bytes of RFC 5322 while keeping the whole of the
// policy's explanation (a cap note comes last).
const maxHeaderRule = 600

// sanitizeN is sanitize with a limit of n bytes.
func sanitizeN(s string, n int) string {
	s = asciiReplacer.Replace(s)
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= n {
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

func round3(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 3, 64), 64)
	return v
}

// ms is d in milliseconds with microsecond precision, for logs.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
