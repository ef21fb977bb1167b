package djmilter

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/nddmilter/nddmilter/internal/lab/mtadial"
)

// Milter commands the relay sends (libmilter's SMFIC_*).
const (
	cmdAbort   = 'A'
	cmdBody    = 'B'
	cmdConnect = 'C'
	cmdMacro   = 'D'
	cmdEOB     = 'E'
	cmdQuitNC  = 'K'
	cmdHeader  = 'L'
	cmdMail    = 'M'
	cmdEOH     = 'N'
	cmdOptNeg  = 'O'
	cmdQuit    = 'Q'
	cmdRcpt    = 'R'
)

// maxReply bounds a reply packet of the own server.
const maxReply = 1 << 20

// relay is one connection to nddmilter's own server, speaking the milter
// protocol as Postfix does: protocol version 6, every step offered
// without reply, commands buffered until a reply is read.
type relay struct {
	nc net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

// openRelay dials the own server and negotiates the given actions.
func openRelay(ctx context.Context, dial func(context.Context) (net.Conn, error), actions uint32) (*relay, error) {
	nc, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("djmilter: relay: %w", err)
	}
	r := &relay{nc: nc, br: bufio.NewReaderSize(nc, 16<<10), bw: bufio.NewWriterSize(nc, 16<<10)}
	var neg [12]byte
	binary.BigEndian.PutUint32(neg[0:], 6)
	binary.BigEndian.PutUint32(neg[4:], actions)
	binary.BigEndian.PutUint32(neg[8:], mtadial.PostfixProtocol)
	if err := r.send(cmdOptNeg, neg[:]); err != nil {
		nc.Close()
		return nil, err
	}
	code, _, err := r.read(nil)
	if err == nil && code != cmdOptNeg {
		err = fmt.Errorf("djmilter: relay: negotiation answered with %q", code)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return r, nil
}

// send buffers one command packet: cmd and the concatenated parts.
func (r *relay) send(cmd byte, parts ...[]byte) error {
	n := 1
	for _, p := range parts {
		n += len(p)
	}
	var hdr [5]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(n))
	hdr[4] = cmd
	r.bw.Write(hdr[:])
	for _, p := range parts {
		r.bw.Write(p)
	}
	if cmd == cmdQuit || cmd == cmdOptNeg {
		return r.flush()
	}
	return nil
}

// flush writes the buffered commands, bounded by the library's write
// timeout.
func (r *relay) flush() error {
	r.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := r.bw.Flush(); err != nil {
		return fmt.Errorf("djmilter: relay: %w", err)
	}
	return nil
}

// read sends what is buffered and reads one reply packet, appending it
// whole (length, code, data) to dst.
func (r *relay) read(dst []byte) (byte, []byte, error) {
	if err := r.flush(); err != nil {
		return 0, dst, err
	}
	r.nc.SetReadDeadline(time.Now().Add(readTimeout))
	var hdr [4]byte
	if _, err := io.ReadFull(r.br, hdr[:]); err != nil {
		return 0, dst, fmt.Errorf("djmilter: relay: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 1 || n > maxReply {
		return 0, dst, fmt.Errorf("djmilter: relay: reply packet of %d bytes", n)
	}
	start := len(dst)
	dst = append(dst, hdr[:]...)
	dst = append(dst, make([]byte, n)...)
	if _, err := io.ReadFull(r.br, dst[start+4:]); err != nil {
		return 0, dst, fmt.Errorf("djmilter: relay: %w", err)
	}
	return dst[start+4], dst, nil
}

// readTimeout bounds the wait for the own server's verdict: longer than
// its check deadline.
const readTimeout = time.Minute

// replies reads the reply packets of an end of message, modifications
// then the final reply, and appends them to dst.
func (r *relay) replies(dst []byte) ([]byte, error) {
	for {
		code, out, err := r.read(dst)
		dst = out
		if err != nil {
			return dst, err
		}
		switch code {
		case 'h', 'm', 'q', '-', '+', 'i', 'e', 'b':
			continue // a modification: the final reply follows
		}
		return dst, nil
	}
}

// close ends the connection to the own server (SMFIC_QUIT).
func (r *relay) close() {
	r.send(cmdQuit)
	r.nc.Close()
}

// cstr is s as a NUL-terminated string (a NUL inside becomes a space).
func cstr(s string) []byte {
	return append([]byte(strings.ReplaceAll(s, "\x00", " ")), 0)
}

// connectData is the data of SMFIC_CONNECT for the library's Connect
// arguments.
func connectData(host, family string, port uint16, addr string) []byte {
	b := cstr(host)
	switch family {
	case "tcp4":
		b = append(b, '4')
	case "tcp6":
		b = append(b, '6')
	case "unix":
		b = append(b, 'L')
	default:
		return append(b, 'U')
	}
	b = binary.BigEndian.AppendUint16(b, port)
	return append(b, cstr(addr)...)
}

// pipeListener is an in-memory listener: every dial makes a net.Pipe,
// whose one end Accept returns.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		client.Close()
		server.Close()
		return nil, net.ErrClosed
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "djmilter-relay" }
