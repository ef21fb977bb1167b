// Package mtadial dials milter connections that behave like an MTA's
// milter client, for go-milter's Client in benchmarks and tests.
//
// Postfix writes each milter command into a buffered stream and flushes
// it when it reads a reply ("to send multiple headers in one VSTREAM
// transaction", milter8.c), so with the no-reply flags of protocol 6 a
// whole message goes out in a few writes. go-milter's client writes every
// packet with its own system call and reads each reply's length and body
// with two; a Dialer's connections buffer both ways instead, flushing
// pending writes before any read, so that the milter always has every
// command it must reply to.
package mtadial

import (
	"bufio"
	"net"
	"time"
)

// PostfixProtocol is the protocol mask Postfix 3 offers at milter protocol
// version 6: every step may be skipped (SMFIP_NO*) or left without reply
// (SMFIP_NR_*), plus SMFIP_RCPT_REJ, SMFIP_SKIP and SMFIP_HDR_LEADSPC. The
// milter picks the flags it wants among them. Pass it as go-milter's
// ClientOptions.ProtocolMask to drive a milter the way Postfix does.
const PostfixProtocol = 0x1fffff

// Dialer implements go-milter's Dialer with buffered connections.
type Dialer struct {
	// Timeout bounds the connection set-up. Default: none.
	Timeout time.Duration
}

// Dial connects to the milter.
func (d Dialer) Dial(network, addr string) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, d.Timeout)
	if err != nil {
		return nil, err
	}
	bc := &conn{Conn: c}
	bc.br = bufio.NewReaderSize(flushingReader{bc}, 16<<10)
	bc.bw = bufio.NewWriterSize(c, 16<<10)
	return bc, nil
}

type conn struct {
	net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

// flushingReader reads the socket after sending pending writes.
type flushingReader struct{ c *conn }

func (r flushingReader) Read(p []byte) (int, error) {
	if err := r.c.bw.Flush(); err != nil {
		return 0, err
	}
	return r.c.Conn.Read(p)
}

func (c *conn) Read(p []byte) (int, error)  { return c.br.Read(p) }
func (c *conn) Write(p []byte) (int, error) { return c.bw.Write(p) }

// Close sends what is still buffered (the session's QUIT) and closes.
func (c *conn) Close() error {
	ferr := c.bw.Flush()
	if err := c.Conn.Close(); err != nil {
		return err
	}
	return ferr
}
