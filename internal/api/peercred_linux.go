//go:build linux

package api

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// PeerCredOf returns the credentials of the process at the other end of
// a unix socket connection (SO_PEERCRED: as they were when it connected).
func PeerCredOf(c net.Conn) (PeerCred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return PeerCred{}, fmt.Errorf("peer credentials: %T is not a unix socket: %w", c, ErrNoPeerCred)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return PeerCred{}, fmt.Errorf("peer credentials: %w", err)
	}
	var (
		cred *unix.Ucred
		gerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return PeerCred{}, fmt.Errorf("peer credentials: %w", err)
	}
	if gerr != nil {
		return PeerCred{}, fmt.Errorf("peer credentials: %w", gerr)
	}
	return PeerCred{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}
