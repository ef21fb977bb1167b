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
		h.fail(w, r, http.StatusNotFound, errors.New("this daemon is not in a fleet: fleet.enabled is false in its configuration (docs/FLEET.md sets up a fleet)"))
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

// fleetForget serves DELETE /v1/fleet/nodes/{node}.
func (h *handler) fleetForget(w http.ResponseWriter, r *http.Request) {
	if h.opts.FleetForget == nil {
		h.fail(w, r, http.StatusNotFound, errors.New("this daemon is not in a fleet: fleet.enabled is false in its configuration (docs/FLEET.md sets up a fleet)"))
		return
	}
	node := r.PathValue("node")
	if node == "" || len(node) > maxNodeName {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("node name of %d bytes: want 1 to %d", len(node), maxNodeName))
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
