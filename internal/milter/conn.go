package milter

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"time"
)

// conn is one milter connection from the MTA: it reads packets, feeds the
// session, and writes the replies the MTA waits for — with every no-reply
// flag granted, only the verdict at end of message. A connection is used
// by one goroutine.
type conn struct {
	srv  *Server
	nc   net.Conn
	pr   packetReader
	wbuf []byte
	neg  negotiation
	ok   bool // option negotiation done
	sess session

	// pktReserved is the budget reserved for the current packet's
	// buffer (a packet over smallPacket bytes), released once handled.
	pktReserved int64
}

// continuePacket is SMFIR_CONTINUE.
var continuePacket = []byte{0, 0, 0, 1, repContinue}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, sess: session{srv: s}}
	c.pr.r = bufio.NewReaderSize(readerFunc(c.read), 16<<10)
	return c
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// read fills the packet reader's buffer from the socket under the idle
// timeout (2 seconds during shutdown), and keeps acknowledgements prompt
// (quickAck).
func (c *conn) read(p []byte) (int, error) {
	c.nc.SetReadDeadline(time.Now().Add(c.idle()))
	if c.srv.closing.Load() {
		// Shutdown may have set its short deadline between idle() and
		// the line above: set it again.
		c.nc.SetReadDeadline(time.Now().Add(c.idle()))
	}
	n, err := c.nc.Read(p)
	quickAck(c.nc)
	return n, err
}

func (c *conn) idle() time.Duration {
	if g := time.Duration(c.srv.grace.Load()); g > 0 {
		return g
	}
	return c.srv.current().opts.IdleTimeout
}

// errQuit ends a connection normally (SMFIC_QUIT).
var errQuit = errors.New("quit")

// serve runs the connection until the MTA quits or closes it, the
// connection idles out, or a protocol error closes it (the MTA then
// applies milter_default_action to the message in progress).
func (c *conn) serve() {
	defer c.close()
	defer func() {
		// A bug outside the check (which recovers on its own) closes this
		// connection only: the MTA applies milter_default_action to the
		// message in progress, and the daemon goes on.
		if p := recover(); p != nil {
			st := c.srv.current()
			st.opts.Metrics.Error("panic")
			st.opts.Logger.Error("milter connection closed after a panic", "panic", fmt.Sprint(p),
				"stack", string(debug.Stack()), "client", c.sess.client)
		}
	}()
	for {
		cmd, data, dropped, err := c.pr.next(c.admit)
		if err == nil && dropped {
			err = c.dropped(cmd)
		}
		if err == nil {
			err = c.handle(cmd, data)
		}
		if err == nil && dropped && cmd == cmdMail {
			// A new message whose MAIL packet did not fit the budget.
			c.sess.overload(overBytes)
		}
		c.srv.release(c.pktReserved)
		c.pktReserved = 0
		if err != nil {
			c.ended(err)
			return
		}
	}
}

func (c *conn) close() {
	c.nc.Close()
	c.srv.release(c.pktReserved)
	c.pktReserved = 0
	c.sess.release()
	c.srv.untrack(c)
}

// ended logs why a connection ended, unless it ended normally.
func (c *conn) ended(err error) {
	log := c.srv.current().opts.Logger
	switch {
	case errors.Is(err, errQuit), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return
	case errors.Is(err, os.ErrDeadlineExceeded):
		if c.srv.closing.Load() {
			return
		}
		log.Info("milter connection idle, closed", "client", c.sess.client, "idle_timeout", c.idle())
	case errors.Is(err, errProtocol):
		c.srv.current().opts.Metrics.Error("protocol")
		log.Warn("milter connection closed", "err", err, "client", c.sess.client, "remote", c.nc.RemoteAddr().String())
	default:
		log.Debug("milter connection ended", "err", err, "client", c.sess.client)
	}
}

// handle processes one packet.
func (c *conn) handle(cmd byte, data []byte) error {
	if cmd == cmdOptNeg {
		neg, err := negotiate(data, c.srv.current().reports.enabled())
		if err != nil {
			return err
		}
		c.neg, c.ok = neg, true
		c.srv.current().opts.Metrics.Connection(int(neg.version), neg.protocol&noReplyAll == noReplyAll)
		c.srv.current().opts.Logger.Debug("milter connection negotiated", "version", neg.version,
			"actions", fmt.Sprintf("%#x", neg.actions), "protocol", fmt.Sprintf("%#x", neg.protocol),
			"streaming", neg.protocol&noReplyAll == noReplyAll, "remote", c.nc.RemoteAddr().String())
		c.wbuf = neg.reply(c.wbuf[:0])
		return c.flush()
	}
	if !c.ok {
		return protocolErrorf("command %q before option negotiation", cmd)
	}
	switch cmd {
	case cmdMacro:
		if len(data) > 0 {
			c.sess.macros(data[1:])
		}
		return nil
	case cmdConnect:
		c.sess.connect(connectInfo(data))
	case cmdHelo, cmdData, cmdUnknown:
	case cmdMail:
		c.sess.mailFrom(data)
	case cmdRcpt:
		c.sess.rcptTo(data)
	case cmdHeader:
		c.sess.header(data)
	case cmdEOH:
		c.sess.endOfHeaders()
	case cmdBody:
		c.sess.body(data)
	case cmdEOB:
		if len(data) > 0 {
			c.sess.body(data)
		}
		c.wbuf = c.sess.end(c.wbuf[:0], c.neg)
		return c.flush()
	case cmdAbort:
		c.sess.abort()
		return nil
	case cmdQuitNC:
		// The MTA reuses the socket for a new SMTP connection.
		c.sess.abort()
		c.sess.client = ""
		return nil
	case cmdQuit:
		return errQuit
	default:
		return protocolErrorf("unknown command %q (%d bytes)", cmd, len(data))
	}
	if c.neg.replies(cmd) {
		c.wbuf = append(c.wbuf[:0], continuePacket...)
		return c.flush()
	}
	return nil
}

func (c *conn) flush() error {
	c.nc.SetWriteDeadline(time.Now().Add(c.idle()))
	_, err := c.nc.Write(c.wbuf)
	if cap(c.wbuf) > 64<<10 {
		c.wbuf = nil
	}
	return err
}
