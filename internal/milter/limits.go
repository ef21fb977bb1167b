package milter

import "github.com/nddmilter/nddmilter/internal/action"

// Resource budgets. Each connection may hold a small free allowance (its
// read buffer, a packet of up to smallPacket bytes and a message buffer of
// up to freeMessageBytes); everything beyond is reserved from a budget
// shared by all sessions (Options.MaxBufferedBytes). A message whose next
// bytes the budget cannot give stops being buffered: the rest of it is
// read and dropped, and at its end it gets the OnOverload treatment —
// checked from the part buffered (its headers and the head of its body,
// as a message longer than MaxBodyBytes is), or tempfailed — so that
// hostile sessions holding the budget cannot make a large message pass
// unchecked. The MTA never waits on the budget and no mail is lost. The
// free allowance keeps ordinary small messages whole while hostile
// sessions hold the shared budget.
//
// The number of connections that buffer messages is bounded too
// (Options.MaxSessions): connections beyond it are served without
// buffering (every message gets the OnError treatment), and beyond twice
// MaxSessions a new connection is closed at once, so that the MTA applies
// its milter_default_action.

// Reasons of an overload, as in the nddmilter_overload_total metric, the
// logs and the verdict header ("unchecked; error=overload-bytes").
const (
	overSessions    = "sessions"    // MaxSessions buffering sessions open
	overConnections = "connections" // twice MaxSessions connections open
	overBytes       = "bytes"       // MaxBufferedBytes reserved
)

// Values of Options.OnOverload.
const (
	OverloadCheck    = "check"
	OverloadTempfail = "tempfail"
)

// Defaults of Options.MaxSessions and Options.MaxBufferedBytes.
const (
	DefaultMaxSessions      = 1000
	DefaultMaxBufferedBytes = 128 << 20
)

// smallPacket is the largest packet data read into the connection's own
// reused buffer; bigger packets are reserved from the budget (the MTA
// sends body chunks of at most 64 KiB and one header per packet, so only
// long headers take this path).
const smallPacket = 64 << 10

// freeMessageBytes is the capacity of a message buffer that is not
// charged to the budget; it is also the largest buffer kept in the pool.
const freeMessageBytes = 128 << 10

// charge is the part of a message buffer's capacity c charged to the
// budget.
func charge(c int) int64 { return int64(max(0, c-freeMessageBytes)) }

// reserve takes n bytes from the shared budget; false (nothing taken)
// when that would exceed it.
func (s *Server) reserve(n int64) bool {
	if n <= 0 {
		return true
	}
	limit := s.current().opts.MaxBufferedBytes
	for {
		cur := s.buffered.Load()
		if limit > 0 && cur+n > limit {
			return false
		}
		if s.buffered.CompareAndSwap(cur, cur+n) {
			s.current().opts.Metrics.Buffered(n)
			return true
		}
	}
}

// forceReserve takes n bytes from the budget even beyond it (the
// allocator rounded a reserved growth up).
func (s *Server) forceReserve(n int64) {
	if n > 0 {
		s.buffered.Add(n)
		s.current().opts.Metrics.Buffered(n)
	}
}

// release gives n reserved bytes back.
func (s *Server) release(n int64) {
	if n > 0 {
		s.buffered.Add(-n)
		s.current().opts.Metrics.Buffered(-n)
	}
}

// Buffered returns the bytes reserved from the budget
// (Options.MaxBufferedBytes) by the sessions and the checks in flight.
func (s *Server) Buffered() int64 { return s.buffered.Load() }

// acquireSlot takes one of the MaxSessions buffering slots.
func (s *Server) acquireSlot() bool {
	limit := int64(s.current().opts.MaxSessions)
	for {
		cur := s.slots.Load()
		if limit > 0 && cur >= limit {
			return false
		}
		if s.slots.CompareAndSwap(cur, cur+1) {
			return true
		}
	}
}

func (s *Server) releaseSlot() { s.slots.Add(-1) }

// grow makes room for k more bytes in the message buffer, reserving from
// the budget what goes beyond the free allowance; false when the budget
// cannot give it (nothing changed).
func (s *session) grow(k int) bool {
	b := s.buf()
	if b.Available() >= k {
		return true
	}
	// bytes.Buffer at least doubles its capacity when it grows.
	target := max(2*b.Cap(), b.Len()+k)
	extra := charge(target) - s.reserved
	if !s.srv.reserve(extra) {
		return false
	}
	b.Grow(k)
	got := charge(b.Cap())
	if d := got - (s.reserved + max(extra, 0)); d > 0 {
		s.srv.forceReserve(d)
	} else {
		s.srv.release(-d)
	}
	s.reserved = got
	return true
}

// dropBuf gives up the message buffer and its reservation.
func (s *session) dropBuf() {
	s.srv.release(s.reserved)
	s.reserved = 0
	s.srv.putBuffer(s.raw)
	s.raw = nil
}

// overload stops buffering the current message: the rest of it is read
// and dropped. A message cut short by the budget (overBytes) keeps what it
// buffered for its end's OnOverload treatment; one that has no place
// among the buffering sessions (overSessions) gets the OnError treatment.
func (s *session) overload(reason string) {
	s.state()
	if s.over != "" || s.cut {
		return
	}
	// Counted now: a hostile session may never end its message.
	s.st.opts.Metrics.Overload(reason)
	if reason == overBytes {
		s.cut = true
		return
	}
	s.over = reason
	s.dropBuf()
}

// admit decides whether a packet of n data bytes (over smallPacket) is
// read into a buffer reserved from the budget; if not, its data is
// skipped and the packet handled as dropped.
func (c *conn) admit(cmd byte, n int) bool {
	switch cmd {
	case cmdHeader, cmdBody, cmdEOB:
		if c.sess.over != "" || c.sess.cut {
			return false // the message is not buffered anyway
		}
	}
	if !c.srv.reserve(int64(n)) {
		return false
	}
	c.pktReserved = int64(n)
	return true
}

// dropped handles a packet whose data was skipped (see admit): the
// message it belongs to is no longer buffered. The packet is then
// handled without its data, unless dropped returns an error.
func (c *conn) dropped(cmd byte) error {
	switch cmd {
	case cmdOptNeg:
		return protocolErrorf("option negotiation packet too large")
	case cmdHeader, cmdBody, cmdEOB, cmdRcpt:
		c.sess.overload(overBytes)
	}
	return nil
}

// overloaded answers a message that was not buffered (overSessions): the
// OnError treatment, with the verdict header saying why when it is
// accepted.
func (s *session) overloaded(r *reply) {
	o, onError := s.st.opts, s.st.act.onError
	o.Metrics.Overload(s.over)
	o.Metrics.Message(onError, nil, 0, s.bodyLen, 0)
	s.srv.warnOverload("message passed unchecked: resource budget exhausted", "reason", s.over, "limit", "milter.max_sessions", "action", onError.String(),
		"queue_id", s.queueID, "from", s.logAddr(s.from), "client", s.logAddr(s.client))
	if onError == action.Tempfail {
		r.final(repTempfail)
		return
	}
	s.deleteForged(r)
	if !o.NoAcceptHeader {
		r.addHeader(o.HeaderPrefix+"Verdict", "unchecked; error=overload-"+s.over)
	}
	r.final(repAccept)
}

// cutShort answers a message cut short by the budget when OnOverload is
// "tempfail"; it reports false (check the part buffered) otherwise.
func (s *session) cutShort(r *reply) bool {
	if !s.cut || !s.st.act.overloadTempfail {
		return false
	}
	o := s.st.opts
	o.Metrics.Message(action.Tempfail, nil, 0, s.bodyLen, 0)
	s.srv.warnOverload("message tempfailed: cut short by the byte budget", "reason", overBytes, "limit", "milter.max_buffered_bytes",
		"action", "tempfail", "queue_id", s.queueID, "from", s.logAddr(s.from), "client", s.logAddr(s.client))
	r.final(repTempfail)
	return true
}
