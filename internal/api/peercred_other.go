//go:build !linux

package api

import (
	"fmt"
	"net"
)

// PeerCredOf is only implemented on Linux (SO_PEERCRED): elsewhere the
// report socket refuses every caller.
func PeerCredOf(c net.Conn) (PeerCred, error) {
	return PeerCred{}, fmt.Errorf("peer credentials on this system: %w", ErrNoPeerCred)
}
