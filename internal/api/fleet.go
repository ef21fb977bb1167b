package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// FleetStatusFunc returns the status of a fleet's nodes (internal/fleet's
// []fleet.Status, encoded as JSON by the handler).
type FleetStatusFunc func(ctx context.Context) (any, error)

// fleetStatus serves GET /v1/fleet/status: 404 when the daemon is not in
// a fleet.
func (h *handler) fleetStatus(w http.ResponseWriter, r *http.Request) {
	if h.opts.FleetStatus == nil {
		h.fail(w, r, http.StatusNotFound, errNotInFleet)
		return
	}
	s, err := h.opts.FleetStatus(r.Context())
	if err != nil && s == nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	h.reply(w, http.StatusOK, s)
}

// FleetStatus reads GET /v1/fleet/status into out.
func (c *Client) FleetStatus(ctx context.Context, out any) error {
	return c.do(ctx, http.MethodGet, "/v1/fleet/status", nil, nil, out)
}

// FleetForgetFunc removes the status of a node retired from the fleet
// (internal/fleet's Node.Forget). Its errors wrap ErrFleetNodeUnknown or
// ErrFleetNodeAlive to be answered 404 or 409.
type FleetForgetFunc func(ctx context.Context, node string) error

// Errors a FleetForgetFunc wraps.
var (
	// ErrFleetNodeUnknown: no status of that node is known.
	ErrFleetNodeUnknown = errors.New("no such fleet node")
	// ErrFleetNodeAlive: the node still publishes its status.
	ErrFleetNodeAlive = errors.New("the fleet node still publishes its status")
)

// maxNodeName bounds a node name in a request (a host name).
const maxNodeName = 255

// errNotInFleet answers the fleet's administrative requests of a
// standalone daemon.
var errNotInFleet = errors.New("this daemon is not in a fleet: fleet.enabled is false in its configuration (docs/FLEET.md sets up a fleet)")

// fleetName returns the path value key ("node" or "server") of a fleet
// administrative request, or answers it: 404 when the daemon is not in a
// fleet (inFleet false), 400 for an empty or over-long name.
func (h *handler) fleetName(w http.ResponseWriter, r *http.Request, inFleet bool, key string) (string, bool) {
	if !inFleet {
		h.fail(w, r, http.StatusNotFound, errNotInFleet)
		return "", false
	}
	name := r.PathValue(key)
	if name == "" || len(name) > maxNodeName {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("%s name of %d bytes: want 1 to %d", key, len(name), maxNodeName))
		return "", false
	}
	return name, true
}

// fleetForget serves DELETE /v1/fleet/nodes/{node}.
func (h *handler) fleetForget(w http.ResponseWriter, r *http.Request) {
	node, ok := h.fleetName(w, r, h.opts.FleetForget != nil, "node")
	if !ok {
		return
	}
	err := h.opts.FleetForget(r.Context(), node)
	switch {
	case err == nil:
		h.opts.Logger.Info("fleet node forgotten", "node", node)
		h.reply(w, http.StatusOK, map[string]string{"forgotten": node})
	case errors.Is(err, ErrFleetNodeUnknown):
		h.fail(w, r, http.StatusNotFound, err)
	case errors.Is(err, ErrFleetNodeAlive):
		h.fail(w, r, http.StatusConflict, err)
	default:
		h.fail(w, r, http.StatusServiceUnavailable, err)
	}
}

// FleetForget asks the daemon to forget a retired node of its fleet
// (DELETE /v1/fleet/nodes/{node}).
func (c *Client) FleetForget(ctx context.Context, node string) error {
	return c.do(ctx, http.MethodDelete, "/v1/fleet/nodes/"+url.PathEscape(node), nil, nil, nil)
}

// FleetRemoveServerFunc removes a server that left the fleet for good
// from the JetStream cluster of the daemon's embedded server
// (internal/fleet/natsd's Server.RemoveServer). Its errors wrap
// ErrFleetServerUnknown, ErrFleetServerAlive or ErrFleetNoServer to be
// answered 404, 409 or 409.
type FleetRemoveServerFunc func(ctx context.Context, server string) error

// Errors a FleetRemoveServerFunc wraps.
var (
	// ErrFleetServerUnknown: no member of the JetStream cluster has that name.
	ErrFleetServerUnknown = errors.New("no such server in the JetStream cluster")
	// ErrFleetServerAlive: the server is still connected.
	ErrFleetServerAlive = errors.New("the server is still connected")
	// ErrFleetNoServer: this daemon cannot make the request (it runs no
	// embedded server, or one without users).
	ErrFleetNoServer = errors.New("this daemon cannot remove servers")
)

// fleetRemoveServer serves DELETE /v1/fleet/servers/{server}.
func (h *handler) fleetRemoveServer(w http.ResponseWriter, r *http.Request) {
	name, ok := h.fleetName(w, r, h.opts.FleetRemoveServer != nil, "server")
	if !ok {
		return
	}
	err := h.opts.FleetRemoveServer(r.Context(), name)
	switch {
	case err == nil:
		h.opts.Logger.Info("fleet server removed from the JetStream cluster", "server", name)
		h.reply(w, http.StatusOK, map[string]string{"removed": name})
	case errors.Is(err, ErrFleetServerUnknown):
		h.fail(w, r, http.StatusNotFound, err)
	case errors.Is(err, ErrFleetServerAlive), errors.Is(err, ErrFleetNoServer):
		h.fail(w, r, http.StatusConflict, err)
	default:
		h.fail(w, r, http.StatusServiceUnavailable, err)
	}
}

// FleetRemoveServer asks the daemon to remove a server that left for
// good from its fleet's JetStream cluster (DELETE
// /v1/fleet/servers/{server}).
func (c *Client) FleetRemoveServer(ctx context.Context, server string) error {
	return c.do(ctx, http.MethodDelete, "/v1/fleet/servers/"+url.PathEscape(server), nil, nil, nil)
}
