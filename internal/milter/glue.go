package milter

import (
	"net"
	"strings"
)

// MessageSession is the message logic of one milter connection without
// the wire protocol: what a session keeps of each step, and the
// end-of-message decision with its modifications and final reply. It lets
// another milter library serve exactly the same behaviour (the lab's
// comparison with github.com/d--j/go-milter); the daemon does not use it.
// A MessageSession is used by one goroutine.
type MessageSession struct {
	s       session
	scratch []byte
}

// NewMessageSession returns the message logic of one connection, using
// srv's checker, options (swapped by Update) and buffer pool.
// Like a connection of the own server, it holds one of the
// Options.MaxSessions buffering slots (if one is free) and counts in the
// sessions metric until Close.
func (srv *Server) NewMessageSession() *MessageSession {
	m := &MessageSession{s: session{srv: srv}}
	m.s.slot = srv.acquireSlot()
	srv.current().opts.Metrics.Session(1)
	return m
}

// Connect records the SMTP client (address or host name) for the logs.
func (m *MessageSession) Connect(client string) {
	m.s.connect(string(printable([]byte(client))))
}

// QueueID records the queue id (macro i) wherever the MTA sends it.
func (m *MessageSession) QueueID(id string) {
	if id != "" {
		m.s.queueID = string(printable([]byte(id)))
	}
}

// MailFrom starts a message.
func (m *MessageSession) MailFrom(from string) { m.s.mailFrom(m.cstrings(from)) }

// RcptTo adds a recipient (its override caps the message's action).
func (m *MessageSession) RcptTo(rcpt string) { m.s.rcptTo(m.cstrings(rcpt)) }

// Header adds one header field as the MTA sent it.
func (m *MessageSession) Header(name, value string) { m.s.header(m.cstrings(name, value)) }

// EndOfHeaders closes the header block.
func (m *MessageSession) EndOfHeaders() { m.s.endOfHeaders() }

// Body adds a body chunk (kept up to Options.MaxBodyBytes).
func (m *MessageSession) Body(chunk []byte) { m.s.body(chunk) }

// Abort forgets the message in progress.
func (m *MessageSession) Abort() { m.s.abort() }

// NewConnection forgets the message and the client (SMFIC_QUIT_NC).
func (m *MessageSession) NewConnection() {
	m.s.abort()
	m.s.client = ""
}

// End checks the message and appends to dst the milter reply packets the
// server would write for it — modifications (SMFIR_ADDHEADER,
// SMFIR_CHGHEADER, SMFIR_QUARANTINE) then the final reply — given the
// actions the MTA allows (SMFIF_* bits). The message state is reset.
func (m *MessageSession) End(dst []byte, actions uint32) []byte {
	return m.s.end(dst, negotiation{version: protocolVersion, actions: actions})
}

// Close gives back the message buffer, its budget and the session's
// slot (connection closed).
func (m *MessageSession) Close() {
	m.s.release()
	if m.s.slot {
		m.s.slot = false
		m.s.srv.releaseSlot()
	}
	m.s.srv.current().opts.Metrics.Session(-1)
}

// cstrings encodes parts as NUL-terminated strings in a reused buffer,
// the form the session takes from the wire.
func (m *MessageSession) cstrings(parts ...string) []byte {
	b := m.scratch[:0]
	for _, p := range parts {
		b = append(b, strings.ReplaceAll(p, "\x00", " ")...)
		b = append(b, 0)
	}
	m.scratch = b
	return b
}

// QuickAck turns delayed acknowledgements off on a TCP connection; the
// server calls it after every read (see quickack_linux.go for why).
func QuickAck(nc net.Conn) { quickAck(nc) }
