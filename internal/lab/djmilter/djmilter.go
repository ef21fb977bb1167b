// Package djmilter serves nddmilter's milter behaviour through
// github.com/d--j/go-milter's server instead of nddmilter's own
// protocol-6 server (internal/milter), so that the two can be measured
// against each other (`nddlab bench milter --server d--j`) and through a
// real Postfix (test/e2e/postfix.sh with NDD_E2E_SERVER=d--j).
//
// The per-message work is the same code: each connection the library
// accepts is relayed, over the public milter protocol, to nddmilter's own
// server — in this process over an in-memory connection (New), or a
// running daemon's milter socket (NewRelay) — whose message logic
// (headers in order, forged-header deletion, the check under its
// deadline, verdict headers, quarantine, reject text, overrides) answers;
// its reply packets are handed back to the library as its modifier calls
// and final response. A d--j figure is therefore the own server's cost
// plus the library's and the relay's: the difference to the own server
// alone is what the library adds.
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
	// docs/design/milter.md, "Delayed acknowledgements").
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
	own  *milter.Server // served on pipe by Serve; nil with NewRelay
	pipe *pipeListener
	dial func(ctx context.Context) (net.Conn, error)
	lib  *dj.Server
	opts Options
}

// New returns a server acting as srv (its checker and options, swapped
// by srv.Update) over the d--j/go-milter protocol implementation: Serve
// also serves srv on an in-memory listener, which every connection the
// library accepts is relayed to.
func New(srv *milter.Server, o Options) *Server {
	pipe := newPipeListener()
	s := newServer(pipe.dial, o)
	s.own, s.pipe = srv, pipe
	return s
}

// NewRelay returns a server relaying every connection to the milter
// listening at network and addr (a running daemon's own server).
func NewRelay(network, addr string, o Options) *Server {
	var d net.Dialer
	return newServer(func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, network, addr) }, o)
}

func newServer(dial func(ctx context.Context) (net.Conn, error), o Options) *Server {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{dial: dial, opts: o}
	s.lib = dj.NewServer(
		dj.WithMilter(func() dj.Milter { return &backend{srv: s} }),
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
	if s.own != nil {
		go s.own.Serve(s.pipe)
	}
	ln = wrapListener{Listener: ln, quickAck: !s.opts.NoQuickAck, buffered: s.opts.Buffered}
	err := s.lib.Serve(ln)
	if errors.Is(err, dj.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting and waits for the open connections until ctx
// ends, then closes them; then the same for the own server of New.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.lib.Shutdown(ctx)
	if s.own != nil {
		err = errors.Join(err, s.own.Shutdown(ctx))
	}
	return err
}

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
	quickAck(c.Conn)
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
		quickAck(r.c.Conn)
	}
	return n, err
}

// backend is one milter connection: the library's callbacks relayed to
// the own server.
type backend struct {
	dj.NoOpMilter
	srv *Server
	r   *relay // opened at the first callback, with the negotiated actions
	out []byte
}

// relay returns the connection to the own server, opening it with the
// actions the MTA granted (m.Actions) on first use.
func (b *backend) relay(m dj.Modifier) (*relay, error) {
	if b.r == nil {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		defer cancel()
		r, err := openRelay(ctx, b.srv.dial, uint32(m.Actions()))
		if err != nil {
			return nil, err
		}
		b.r = r
	}
	return b.r, nil
}

// send relays one command; a relay error breaks the library's connection
// (the MTA then applies its default action).
func (b *backend) send(m dj.Modifier, cmd byte, parts ...[]byte) (*dj.Response, error) {
	r, err := b.relay(m)
	if err != nil {
		return nil, err
	}
	if err := r.send(cmd, parts...); err != nil {
		return nil, err
	}
	return dj.RespContinue, nil
}

func (b *backend) NewConnection(m dj.Modifier) error {
	if b.r == nil {
		return nil // nothing relayed yet
	}
	_, err := b.send(m, cmdQuitNC)
	return err
}

func (b *backend) Connect(host, family string, port uint16, addr string, m dj.Modifier) (*dj.Response, error) {
	return b.send(m, cmdConnect, connectData(host, family, port, addr))
}

func (b *backend) MailFrom(from, _ string, m dj.Modifier) (*dj.Response, error) {
	// Sendmail sends the queue id with MAIL.
	if id := m.Get(dj.MacroQueueId); id != "" {
		if _, err := b.send(m, cmdMacro, []byte{cmdMail}, cstr("i"), cstr(id)); err != nil {
			return nil, err
		}
	}
	return b.send(m, cmdMail, cstr("<"+from+">"))
}

func (b *backend) RcptTo(rcpt, _ string, m dj.Modifier) (*dj.Response, error) {
	return b.send(m, cmdRcpt, cstr("<"+rcpt+">"))
}

func (b *backend) Header(name, value string, m dj.Modifier) (*dj.Response, error) {
	return b.send(m, cmdHeader, cstr(name), cstr(value))
}

func (b *backend) Headers(m dj.Modifier) (*dj.Response, error) {
	return b.send(m, cmdEOH)
}

func (b *backend) BodyChunk(chunk []byte, m dj.Modifier) (*dj.Response, error) {
	return b.send(m, cmdBody, chunk)
}

func (b *backend) Abort(m dj.Modifier) error {
	if b.r == nil {
		return nil
	}
	_, err := b.send(m, cmdAbort)
	return err
}

func (b *backend) Cleanup(dj.Modifier) {
	if b.r != nil {
		b.r.close()
		b.r = nil
	}
}

// EndOfMessage has the own server check the message and replays its reply
// packets as the library's modifier calls and final response.
func (b *backend) EndOfMessage(m dj.Modifier) (*dj.Response, error) {
	if id := m.Get(dj.MacroQueueId); id != "" {
		if _, err := b.send(m, cmdMacro, []byte{cmdEOB}, cstr("i"), cstr(id)); err != nil {
			return nil, err
		}
	}
	if _, err := b.send(m, cmdEOB); err != nil {
		return nil, err
	}
	var err error
	if b.out, err = b.r.replies(b.out[:0]); err != nil {
		return nil, err
	}
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
