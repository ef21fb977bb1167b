package milter

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Reports by mail. A message to a report address (ReportOptions) is a
// report when the MTA authenticated its sender (the SASL login, macro
// {auth_authen}, which an SMTP client cannot forge: the MTA sets it after
// SMTP AUTH) or when it comes from a configured feedback loop; each
// message it carries as an attachment is then reported, with the login
// (or "fbl:NAME") as reporter, and the report message is discarded or
// delivered per ReportOptions.Deliver. Any other mail to a report
// address is checked and delivered as any mail, and logged.

// Reporter takes reports sent by mail; *campaign.Ingester implements it. A
// Checker that is not a Reporter takes no reports by mail.
type Reporter interface {
	ReportAttached(ctx context.Context, raw []byte, kind store.Kind, reporter string, maxMessages int) (campaign.MailReport, error)
}

// ReportOptions configure reports by mail. Zero values select the
// defaults (those of config/nddmilter.yaml, section reports).
type ReportOptions struct {
	// SpamAddresses and HamAddresses are the report addresses (compared
	// without case). None: no reports by mail.
	SpamAddresses []string
	HamAddresses  []string
	// Deliver is "discard" (default: the report message is dropped once
	// taken) or "mailbox" (delivered as addressed, with an X-NDD-Report
	// header saying what it did).
	Deliver string
	// MaxAttachments bounds the messages taken from one report message.
	// Default 20.
	MaxAttachments int
	// Timeout bounds the taking of one report message. Default 10s.
	Timeout time.Duration
	// FeedbackLoops are the trusted sources of ARF reports.
	FeedbackLoops []FeedbackLoop
}

// FeedbackLoop is a trusted source of feedback reports: a message to a
// spam report address comes from it when its SMTP client is in Networks
// (addresses or CIDR networks) or its SASL login is one of AuthUsers, and
// (when Senders is set) its envelope sender is one of Senders (addresses
// or "@domain"). Its reports count with the reporter "fbl:" + Name.
type FeedbackLoop struct {
	Name      string
	Networks  []string
	AuthUsers []string
	Senders   []string
}

// FeedbackReporterPrefix starts the reporter id of a feedback loop's
// reports. A SASL login starting with it is not taken as a reporter.
const FeedbackReporterPrefix = "fbl:"

// reportRules are ReportOptions, parsed.
type reportRules struct {
	kinds   map[string]store.Kind // lower-case report address → kind
	discard bool
	max     int
	timeout time.Duration
	loops   []loopRule
}

type loopRule struct {
	name    string
	nets    []netip.Prefix
	users   map[string]bool
	senders []string // lower case
}

func (o ReportOptions) parse() (reportRules, error) {
	r := reportRules{kinds: map[string]store.Kind{}, max: o.MaxAttachments, timeout: o.Timeout}
	if r.max <= 0 {
		r.max = 20
	}
	if r.timeout <= 0 {
		r.timeout = 10 * time.Second
	}
	switch o.Deliver {
	case "", "discard":
		r.discard = true
	case "mailbox":
	default:
		return r, fmt.Errorf("milter: Reports.Deliver: %q is not discard or mailbox", o.Deliver)
	}
	for _, l := range []struct {
		addrs []string
		kind  store.Kind
	}{{o.SpamAddresses, store.KindSpam}, {o.HamAddresses, store.KindHam}} {
		for _, a := range l.addrs {
			a = strings.ToLower(strings.Trim(a, "<> "))
			if k, ok := r.kinds[a]; ok && k != l.kind {
				return r, fmt.Errorf("milter: report address %s is both a spam and a ham address", a)
			}
			r.kinds[a] = l.kind
		}
	}
	for _, f := range o.FeedbackLoops {
		lr := loopRule{name: f.Name, users: map[string]bool{}}
		if f.Name == "" {
			return r, errors.New("milter: a feedback loop has no name")
		}
		for _, n := range f.Networks {
			p, err := netip.ParsePrefix(n)
			if err != nil {
				a, aerr := netip.ParseAddr(n)
				if aerr != nil {
					return r, fmt.Errorf("milter: feedback loop %s: network %q: %w", f.Name, n, err)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			lr.nets = append(lr.nets, p.Masked())
		}
		for _, u := range f.AuthUsers {
			lr.users[u] = true
		}
		if len(lr.nets) == 0 && len(lr.users) == 0 {
			return r, fmt.Errorf("milter: feedback loop %s: no networks and no auth users", f.Name)
		}
		for _, s := range f.Senders {
			lr.senders = append(lr.senders, strings.ToLower(strings.Trim(s, "<> ")))
		}
		r.loops = append(r.loops, lr)
	}
	return r, nil
}

// enabled reports whether any report address is configured.
func (r *reportRules) enabled() bool { return len(r.kinds) > 0 }

// loop returns the feedback loop a message comes from, or nil.
func (r *reportRules) loop(client netip.Addr, auth, from string) *loopRule {
	from = strings.ToLower(strings.Trim(from, "<> "))
	for i := range r.loops {
		l := &r.loops[i]
		trusted := auth != "" && l.users[auth]
		for _, n := range l.nets {
			if client.IsValid() && n.Contains(client.Unmap()) {
				trusted = true
			}
		}
		if !trusted {
			continue
		}
		if len(l.senders) == 0 {
			return l
		}
		for _, s := range l.senders {
			if from == s || (strings.HasPrefix(s, "@") && strings.HasSuffix(from, s)) {
				return l
			}
		}
	}
	return nil
}

// clientAddr parses the SMTP client's address as the MTA gave it
// (Postfix and Sendmail: "192.0.2.1", "2001:db8::1", maybe "IPv6:…" or
// in brackets); the zero Addr when it is not one.
func clientAddr(s string) netip.Addr {
	s = strings.TrimPrefix(strings.Trim(s, "[]"), "IPv6:")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// reportRcpt notes a recipient that is a report address.
func (s *session) reportRcpt(rules *reportRules, rcpt string) {
	k, ok := rules.kinds[strings.ToLower(strings.Trim(rcpt, "<> "))]
	switch {
	case !ok:
		s.otherRcpts++
		return
	case k == store.KindSpam:
		s.spamRcpts++
	default:
		s.hamRcpts++
	}
	if len(s.reportRcpts) < maxLoggedRcpts {
		s.reportRcpts = append(s.reportRcpts, rcpt)
	}
}

// report takes the message as a report when it is one (addressed to a
// report address by an authenticated user or a feedback loop) and
// writes the reply; false when the message is to be checked as any mail.
func (s *session) report(r *reply) bool {
	st := s.state()
	o := st.opts
	if s.spamRcpts == 0 && s.hamRcpts == 0 {
		return false
	}
	log := o.Logger.With("queue_id", s.queueID, "from", s.logAddr(s.from), "rcpt", s.logRcpts(), "client", s.logAddr(s.client))
	if s.spamRcpts > 0 && s.hamRcpts > 0 {
		log.Warn("mail to both a spam and a ham report address: not a report, checked as any mail")
		return false
	}
	kind, kindName := store.KindSpam, "spam"
	if s.hamRcpts > 0 {
		kind, kindName = store.KindHam, "ham"
	}
	reporter, source := "", ""
	if l := st.reports.loop(clientAddr(s.client), s.auth, s.from); l != nil && kind == store.KindSpam {
		reporter, source = FeedbackReporterPrefix+l.name, "feedback loop"
	} else if s.auth != "" {
		switch {
		case strings.HasPrefix(s.auth, FeedbackReporterPrefix) || campaign.CheckReporter(s.auth) != nil:
			log.Warn("mail to a report address: the SASL login cannot be a reporter id (too long, or the feedback-loop prefix): not a report, checked as any mail",
				"auth", s.logAddr(sanitize(s.auth)))
			return false
		}
		reporter, source = s.auth, "sasl"
	}
	if reporter == "" {
		log.Info("mail to a report address from an unauthenticated sender: not a report, checked as any mail")
		return false
	}
	rep, ok := st.checker.(Reporter)
	if !ok {
		log.Error("mail to a report address: this checker takes no reports; checked as any mail")
		return false
	}
	if s.cut {
		// A report is never taken from part of the message: the
		// submitter's MTA retries it once the budget has room.
		o.Metrics.Overload(overBytes)
		log.Warn("report by mail cut short by the byte budget (milter.max_buffered_bytes): tempfailed", "reporter", s.logAddr(reporter))
		r.replyCode("451 4.3.0 nddmilter: busy, report not recorded, try again later")
		return true
	}
	if !s.eoh {
		s.endOfHeaders()
	}
	t0 := time.Now()
	mr, stage, err := s.takeReport(st, rep, kind, reporter)
	elapsed := time.Since(t0)
	log = log.With("reporter", s.logAddr(reporter), "source", source, "kind", kindName, "duration_ms", ms(elapsed))
	if s.bodyLen > o.MaxBodyBytes {
		log = log.With("truncated", true)
	}
	switch {
	case errors.Is(err, campaign.ErrNoAttached):
		log.Warn("report by mail carries no attached message: refused")
		r.replyCode("550 5.6.0 nddmilter: no message attached to report; forward the message as an attachment")
		return true
	case errors.Is(err, campaign.ErrRateLimited):
		// Deferred, not lost: the MTA tries again later.
		log.Warn("report by mail deferred: the reporter is over reports.reporter_limit", "err", err)
		r.replyCode("451 4.7.1 nddmilter: too many reports from you, try again later")
		return true
	case err != nil:
		o.Metrics.Error(stage)
		log.Error("report by mail failed", "stage", stage, "err", err, "taken", len(mr.Outcomes), "action", st.act.onError.String())
		if st.act.onError == action.Tempfail {
			r.replyCode("451 4.3.0 nddmilter: report not recorded, try again later")
			return true
		}
		s.deleteForged(r)
		if !o.NoAcceptHeader {
			r.addHeader(o.HeaderPrefix+"Verdict", "unchecked; error=report-"+stage)
		}
		r.final(repAccept)
		return true
	}
	var created, joined, repeated, skipped int
	for _, out := range mr.Outcomes {
		o.Metrics.Report(kind)
		switch {
		case out.Skip != campaign.NotSkipped:
			skipped++
		case out.Repeated:
			repeated++
		case out.Created:
			created++
		default:
			joined++
		}
	}
	summary := fmt.Sprintf("%s; reporter=%s; messages=%d; created=%d; joined=%d; repeated=%d; skipped=%d",
		kindName, sanitize(reporter), len(mr.Outcomes), created, joined, repeated, skipped)
	if mr.Dropped > 0 {
		summary += "; dropped=" + strconv.Itoa(mr.Dropped)
	}
	delivered := "report mailbox"
	switch {
	case st.reports.discard && s.otherRcpts == 0:
		delivered = "discarded"
	case st.reports.discard && r.neg.actions&actDelRcpt != 0 && len(s.reportRcpts) == s.spamRcpts+s.hamRcpts:
		delivered = "other recipients"
	case st.reports.discard:
		// The MTA does not let the milter remove the report address
		// (or there are too many): one verdict per message, delivered
		// to all.
		delivered = "all recipients"
	}
	log.Info("report by mail", "messages", len(mr.Outcomes), "created", created, "joined", joined,
		"repeated", repeated, "skipped", skipped, "dropped", mr.Dropped, "arf", mr.ARF, "delivered", delivered)
	switch delivered {
	case "discarded":
		r.final(repDiscard)
		return true
	case "other recipients":
		// Discarded for the report addresses only: the other
		// recipients get the message as sent.
		for _, rcpt := range s.reportRcpts {
			r.delRcpt(rcpt)
		}
		s.deleteForged(r)
		r.final(repAccept)
		return true
	}
	s.deleteForged(r)
	r.addHeader(o.HeaderPrefix+"Report", summary)
	r.final(repAccept)
	return true
}

// takeReport runs the reporter under the report timeout, recovering from
// panics; the stage of a failure is "report", "report-timeout" or
// "report-panic".
func (s *session) takeReport(st *state, rep Reporter, kind store.Kind, reporter string) (campaign.MailReport, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), st.reports.timeout)
	defer cancel()
	type result struct {
		mr    campaign.MailReport
		err   error
		panic bool
	}
	ch := make(chan result, 1)
	buf, reserved := s.buf(), s.reserved
	s.raw, s.reserved = nil, 0 // the reporter owns the buffer until it returns
	go func() {
		defer s.srv.release(reserved)
		defer s.srv.putBuffer(buf)
		defer func() {
			if p := recover(); p != nil {
				ch <- result{err: fmt.Errorf("panic: %v\n%s", p, debug.Stack()), panic: true}
			}
		}()
		mr, err := rep.ReportAttached(ctx, buf.Bytes(), kind, reporter, st.reports.max)
		ch <- result{mr: mr, err: err}
	}()
	select {
	case r := <-ch:
		switch {
		case r.panic:
			return r.mr, "report-panic", r.err
		case r.err != nil && ctx.Err() != nil:
			return r.mr, "report-timeout", r.err
		}
		return r.mr, "report", r.err
	case <-ctx.Done():
		return campaign.MailReport{}, "report-timeout", fmt.Errorf("report: not taken within %s", st.reports.timeout)
	}
}
