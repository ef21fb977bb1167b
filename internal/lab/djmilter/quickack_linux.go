package djmilter

import (
	"net"
	"syscall"
)

// quickAck turns delayed acknowledgements off on a TCP connection, as
// nddmilter's own server does after every read (internal/milter's
// quickack_linux.go says why: Postfix stalls 40 ms a message without it).
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
