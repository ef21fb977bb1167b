//go:build !linux

package djmilter

import "net"

// quickAck is a no-op where TCP_QUICKACK does not exist (see
// quickack_linux.go).
func quickAck(net.Conn) {}
