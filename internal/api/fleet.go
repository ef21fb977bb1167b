package api

import (
	"context"
	"errors"
	"net/http"
)

// FleetStatusFunc returns the status of a fleet's nodes (internal/fleet's
// []fleet.Status, encoded as JSON by the handler).
type FleetStatusFunc func(ctx context.Context) (any, error)

// fleetStatus serves GET /v1/fleet/status: 404 when the daemon is not in
// a fleet.
func (h *handler) fleetStatus(w http.ResponseWriter, r *http.Request) {
	if h.opts.FleetStatus == nil {
		h.fail(w, r, http.StatusNotFound, errors.New("this daemon is not in a fleet (fleet.enabled is false)"))
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
