package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/nddmilter/nddmilter/internal/campaign"
)

// The report socket: a unix socket on which the daemon serves only
// POST /v1/reports, with no token. The socket file's mode and group keep
// out whoever may not connect; the peer's credentials (SO_PEERCRED),
// checked on every request, admit root, the daemon's own user and the
// configured users and groups. Those may name any reporter: the socket is
// for the mail-delivery user, which speaks for the IMAP users it
// authenticated (contrib/dovecot).

// ErrNoPeerCred is returned when a connection's peer credentials cannot
// be read (not a unix socket, or an unsupported system).
var ErrNoPeerCred = errors.New("no peer credentials")

// PeerCred is the process at the other end of a unix socket.
type PeerCred struct {
	PID      int32
	UID, GID uint32
}

type peerCredKey struct{}

// SocketConnContext is the http.Server ConnContext of the report socket:
// it reads the peer's credentials when it connects, for the handler of
// NewSocketHandler.
func SocketConnContext(ctx context.Context, c net.Conn) context.Context {
	pc, err := PeerCredOf(c)
	if err != nil {
		return context.WithValue(ctx, peerCredKey{}, err)
	}
	return context.WithValue(ctx, peerCredKey{}, pc)
}

// SocketOptions configure NewSocketHandler. Zero values select the
// defaults of Options (whose Token is not used) and allow only root and
// the daemon's own user.
type SocketOptions struct {
	Options
	// AllowUIDs and AllowGIDs are the users and primary groups that may
	// report, besides root and the daemon's own user.
	AllowUIDs, AllowGIDs []uint32
}

type socketHandler struct {
	h     *handler
	uids  []uint32
	gids  []uint32
	selfU uint32
}

// NewSocketHandler returns the handler of the report socket over ing: it
// serves POST /v1/reports?kind=spam|ham&reporter=ID (reporter required)
// to the peers o allows (403 to others; 404 for every other route).
// Serve it with SocketConnContext as the server's ConnContext.
func NewSocketHandler(ing *campaign.Ingester, o SocketOptions) http.Handler {
	h := newHandler(o.Options)
	h.ingest = ing
	return &socketHandler{h: h, uids: o.AllowUIDs, gids: o.AllowGIDs, selfU: uint32(os.Getuid())}
}

// allowed tells whether pc may report, and why not.
func (s *socketHandler) allowed(pc PeerCred) error {
	if pc.UID == 0 || pc.UID == s.selfU || slices.Contains(s.uids, pc.UID) || slices.Contains(s.gids, pc.GID) {
		return nil
	}
	return fmt.Errorf("uid %d (gid %d) may not report here: allow it with api.allow_users or api.allow_groups", pc.UID, pc.GID)
}

func (s *socketHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := s.h
	var pc PeerCred
	switch v := r.Context().Value(peerCredKey{}).(type) {
	case PeerCred:
		pc = v
	case error:
		h.fail(w, r, http.StatusForbidden, v)
		return
	default:
		h.fail(w, r, http.StatusForbidden, ErrNoPeerCred)
		return
	}
	if err := s.allowed(pc); err != nil {
		h.opts.Logger.Warn("report socket: caller refused", "uid", pc.UID, "gid", pc.GID, "pid", pc.PID)
		h.fail(w, r, http.StatusForbidden, err)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/reports" {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("the report socket serves only POST /v1/reports, not %s %s", r.Method, r.URL.Path))
		return
	}
	// The id itself is checked by report (campaign.CheckReporter).
	if strings.TrimSpace(r.URL.Query().Get("reporter")) == "" {
		h.fail(w, r, http.StatusBadRequest, errors.New("reporter missing: the report socket needs ?reporter=ID (the IMAP user)"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxBody)
	h.report(w, r)
}
