// Package djmilter serves nddmilter's milter behaviour through
// github.com/d--j/go-milter's server instead of nddmilter's own
// protocol-6 server (internal/milter), so that the two can be measured
// against each other (`nddmilter bench milter --server d--j`) and through
// a real Postfix (test/e2e/postfix.sh with NDD_E2E_SERVER=d--j).
//
// The per-message work is the same code: the library decodes the packets
// and calls a milter.MessageSession — the message logic of internal/milter
// (headers in order, forged-header deletion, the check under its deadline,
// verdict headers, quarantine, reject text, overrides) — whose reply
// packets are handed back to the library as its modifier calls and final
// response. Only the wire protocol differs: negotiation, packet reading
// and writing, the connection loop and shutdown.
//
// This is a lab package: the daemon does not use it.
package djmilter

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	dj "github.com/d--j/go-milter"

	"github.com/nddmilter/nddmilter/internal/milter"
)

// Options configure the server. The zero value is what the comparison
// uses: TCP_QUICKACK after every read, as nddmilter's own server does.
type Options struct {
	// NoQuickAck leaves delayed acknowledgements on (the library as it
	// comes); with Postfix over TCP each message then waits 40 ms (see
	// docs/MILTER.md, "Delayed acknowledgements").
	NoQuickAck bool
	// Buffered reads the socket through a 16 KiB buffer and holds the
	// replies until the server next reads (one write per batch of
	// replies), as nddmilter's own server does. By default the library
	// does its own I/O: two reads per packet (length, then the rest)
	// and two writes per reply packet.
	Buffered bool
	// IdleTimeout bounds the wait for the MTA's next packet. Default 10m,
	// as milter.Options.IdleTimeout.
	IdleTimeout time.Duration
	// Logger gets the negotiation of each connection (debug), as
	// nddmilter's own server logs it. Default: none.
	Logger *slog.Logger
}

// Actions are the milter actions asked for, as nddmilter's own server
// asks: add headers, change (delete) headers, quarantine.
const Actions = dj.OptAddHeader | dj.OptChangeHeader | dj.OptQuarantine

// Protocol are the protocol flags asked for, as nddmilter's own server
// asks: no HELO, DATA or unknown commands, no reply to any step before
// end of message.
const Protocol = dj.OptNoHelo | dj.OptNoUnknown | dj.OptNoData | dj.OptNoReplies

// Server is a d--j/go-milter server over nddmilter's message logic.
type Server struct {
	srv  *milter.Server
	lib  *dj.Server
	opts Options
}

// New returns a server acting as srv (its checker and options, swapped
// by srv.Update) over the d--j/go-milter protocol implementation.
func New(srv *milter.Server, o Options) *Server {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{srv: srv, opts: o}
	s.lib = dj.NewServer(
		dj.WithMilter(func() dj.Milter { return &backend{sess: srv.NewMessageSession()} }),
		dj.WithActions(Actions),
		dj.WithProtocols(Protocol),
		dj.WithReadTimeout(o.IdleTimeout),
		dj.WithNegotiationCallback(s.negotiate),
	)
	return s
}

// noReplyAll are the no-reply flags of the steps an MTA sends for every
// message: with all of them the MTA streams a message and waits once.
const noReplyAll = dj.OptNoMailReply | dj.OptNoRcptReply | dj.OptNoHeaderReply | dj.OptNoEOHReply | dj.OptNoBodyReply

// negotiate grants what both sides have, as nddmilter's own server does:
// the lower protocol version, the wanted actions the MTA allows, the
// wanted protocol flags the MTA offers. (Without a callback the library
// refuses an MTA that does not offer every flag asked for, such as a
// protocol-2 MTA.)
func (s *Server) negotiate(mtaVersion, milterVersion uint32, mtaActions, milterActions dj.OptAction, mtaProtocol, milterProtocol dj.OptProtocol, offered dj.DataSize) (uint32, dj.OptAction, dj.OptProtocol, dj.DataSize, error) {
	if mtaVersion < 2 {
		return 0, 0, 0, 0, fmt.Errorf("djmilter: MTA speaks milter protocol version %d, need 2 or later", mtaVersion)
	}
	v, a, p := min(mtaVersion, milterVersion), mtaActions&milterActions, mtaProtocol&milterProtocol
	s.opts.Logger.Debug("milter connection negotiated", "version", v, "actions", fmt.Sprintf("%#x", uint32(a)),
		"protocol", fmt.Sprintf("%#x", uint32(p)), "streaming", p&noReplyAll == noReplyAll, "server", "d--j/go-milter")
	return v, a, p, dj.DataSize64K, nil
}

// Serve accepts milter connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	ln = wrapListener{Listener: ln, quickAck: !s.opts.NoQuickAck, buffered: s.opts.Buffered}
	err := s.lib.Serve(ln)
	if errors.Is(err, dj.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting and waits for the open connections until ctx
// ends, then closes them.
func (s *Server) Shutdown(ctx context.Context) error { return s.lib.Shutdown(ctx) }

// wrapListener gives connections that set TCP_QUICKACK after every read
// and, if buffered, buffer both ways.
type wrapListener struct {
	net.Listener
	quickAck, buffered bool
}

func (l wrapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	_, tcp := c.(*net.TCPConn)
	if l.buffered {
		bc := &bufConn{Conn: c, quickAck: l.quickAck && tcp, bw: bufio.NewWriterSize(c, 16<<10)}
		bc.br = bufio.NewReaderSize(rawReader{bc}, 16<<10)
		return bc, nil
	}
	if l.quickAck && tcp {
		return quickAckConn{c}, nil
	}
	return c, nil
}

type quickAckConn struct{ net.Conn }

func (c quickAckConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	milter.QuickAck(c.Conn)
	return n, err
}

// bufConn reads through a buffer and writes into one that is flushed
// before the next read from the socket (the server reads only after it
// has answered) and at close. The library's Shutdown closes connections
// from another goroutine, hence the lock on the write buffer.
type bufConn struct {
	net.Conn
	quickAck bool
	br       *bufio.Reader
	mu       sync.Mutex
	bw       *bufio.Writer
}

func (c *bufConn) Read(p []byte) (int, error) {
	if c.br.Buffered() == 0 {
		if err := c.flush(); err != nil {
			return 0, err
		}
	}
	return c.br.Read(p)
}

func (c *bufConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bw.Write(p)
}

// flush writes the held replies, under a write deadline of its own (the
// library's, set around its Write, has been lifted by then).
func (c *bufConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bw.Buffered() == 0 {
		return nil
	}
	c.Conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	return c.bw.Flush()
}

// writeTimeout is the library's default write timeout.
const writeTimeout = 10 * time.Second

func (c *bufConn) Close() error {
	c.flush()
	return c.Conn.Close()
}

// rawReader fills the read buffer from the socket.
type rawReader struct{ c *bufConn }

func (r rawReader) Read(p []byte) (int, error) {
	n, err := r.c.Conn.Read(p)
	if r.c.quickAck {
		milter.QuickAck(r.c.Conn)
	}
	return n, err
}

// backend is one milter connection: the library's callbacks fed to the
// message logic.
type backend struct {
	dj.NoOpMilter
	sess *milter.MessageSession
	out  []byte
}

func (b *backend) NewConnection(dj.Modifier) error {
	b.sess.NewConnection()
	return nil
}

func (b *backend) Connect(host, family string, port uint16, addr string, _ dj.Modifier) (*dj.Response, error) {
	if addr != "" {
		b.sess.Connect(addr)
	} else {
		b.sess.Connect(host)
	}
	return dj.RespContinue, nil
}

func (b *backend) MailFrom(from, _ string, m dj.Modifier) (*dj.Response, error) {
	// Sendmail sends the queue id with MAIL; MailFrom keeps it.
	b.sess.QueueID(m.Get(dj.MacroQueueId))
	b.sess.MailFrom("<" + from + ">")
	return dj.RespContinue, nil
}

func (b *backend) RcptTo(rcpt, _ string, _ dj.Modifier) (*dj.Response, error) {
	b.sess.RcptTo("<" + rcpt + ">")
	return dj.RespContinue, nil
}

func (b *backend) Header(name, value string, _ dj.Modifier) (*dj.Response, error) {
	b.sess.Header(name, value)
	return dj.RespContinue, nil
}

func (b *backend) Headers(dj.Modifier) (*dj.Response, error) {
	b.sess.EndOfHeaders()
	return dj.RespContinue, nil
}

func (b *backend) BodyChunk(chunk []byte, _ dj.Modifier) (*dj.Response, error) {
	b.sess.Body(chunk)
	return dj.RespContinue, nil
}

func (b *backend) Abort(dj.Modifier) error {
	b.sess.Abort()
	return nil
}

func (b *backend) Cleanup(dj.Modifier) { b.sess.Close() }

// EndOfMessage checks the message and replays the reply packets of the
// message logic as the library's modifier calls and final response.
func (b *backend) EndOfMessage(m dj.Modifier) (*dj.Response, error) {
	b.sess.QueueID(m.Get(dj.MacroQueueId))
	b.out = b.sess.End(b.out[:0], uint32(m.Actions()))
	return replay(b.out, m)
}

// replay sends the modifications in pkts through m and returns the final
// response. An error breaks the connection (the MTA then applies its
// default action), as a write error does in nddmilter's own server.
func replay(pkts []byte, m dj.Modifier) (*dj.Response, error) {
	for len(pkts) >= 5 {
		n := binary.BigEndian.Uint32(pkts)
		if n < 1 || int(n) > len(pkts)-4 {
			return nil, fmt.Errorf("djmilter: bad reply packet length %d", n)
		}
		code, data := pkts[4], pkts[5:4+n]
		pkts = pkts[4+n:]
		var err error
		switch code {
		case 'h': // SMFIR_ADDHEADER name\0value\0
			p := strings.Split(string(data), "\x00")
			err = m.AddHeader(p[0], at(p, 1))
		case 'm': // SMFIR_CHGHEADER index(4) name\0value\0
			if len(data) < 4 {
				return nil, errors.New("djmilter: short SMFIR_CHGHEADER")
			}
			p := strings.Split(string(data[4:]), "\x00")
			err = m.ChangeHeader(int(binary.BigEndian.Uint32(data)), p[0], at(p, 1))
		case 'q': // SMFIR_QUARANTINE reason\0
			err = m.Quarantine(strings.TrimSuffix(string(data), "\x00"))
		case 'a':
			return dj.RespAccept, nil
		case 't':
			return dj.RespTempFail, nil
		case 'y': // SMFIR_REPLYCODE "ddd text\0", '%' doubled
			text := strings.ReplaceAll(strings.TrimSuffix(string(data), "\x00"), "%%", "%")
			code, reason, _ := strings.Cut(text, " ")
			c, cerr := strconv.Atoi(code)
			if cerr != nil {
				return nil, fmt.Errorf("djmilter: reply %q: %w", text, cerr)
			}
			return dj.RejectWithCodeAndReason(uint16(c), reason)
		default:
			return nil, fmt.Errorf("djmilter: unexpected reply packet %q", code)
		}
		if err != nil {
			return nil, fmt.Errorf("djmilter: %w", err)
		}
	}
	return dj.RespAccept, nil
}

func at(p []string, i int) string {
	if i < len(p) {
		return p[i]
	}
	return ""
}
