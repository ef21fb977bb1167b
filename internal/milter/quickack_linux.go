package milter

import (
	"net"
	"syscall"
)

// quickAck turns delayed acknowledgements off on a TCP connection until
// the kernel turns them back on (it does after a while, so this is called
// after every read).
//
// Postfix writes milter commands without TCP_NODELAY, and two processes
// write on the same milter connection (smtpd sends MAIL and RCPT, cleanup
// the content). With nothing to answer in between — and with the no-reply
// flags there is nothing to answer before the end of the message — the
// second write waits, under Nagle's algorithm, for the acknowledgement of
// the first, which Linux delays by 40 ms: Postfix's throughput through
// the milter collapses without this (docs/design/milter.md, "Delayed
// acknowledgements").
func quickAck(nc net.Conn) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		// Best effort: a failure only leaves the kernel's default.
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
}
