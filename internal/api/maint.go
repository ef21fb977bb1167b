package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// Maintainer is the store's maintenance side the API serves under
// /v1/store: an online backup (a consistent snapshot at one read
// timestamp while the daemon keeps serving), counts and a read-only
// verification. *store.Badger implements it.
type Maintainer interface {
	Backup(ctx context.Context, w io.Writer) (uint64, error)
	Stats(ctx context.Context) (store.Stats, error)
	Verify(ctx context.Context, repair bool) (store.VerifyResult, error)
}

// Trailers of GET /v1/store/backup: the status ("ok" once the whole
// backup was written, else the error) and the version it is consistent
// at. A body without the ok trailer is incomplete.
const (
	TrailerBackupStatus  = "X-Nddmilter-Backup-Status"
	TrailerBackupVersion = "X-Nddmilter-Backup-Version"
)

// VerifyAnswer is the JSON answer of GET /v1/store/verify.
type VerifyAnswer struct {
	store.VerifyResult
	Problems int64
}

func (h *handler) maintainer(w http.ResponseWriter, r *http.Request) (Maintainer, bool) {
	if h.opts.Store == nil {
		h.fail(w, r, http.StatusNotFound, errors.New("store maintenance is not served here"))
		return nil, false
	}
	// A backup or a verification of a large store takes longer than
	// http.write_timeout allows a normal answer.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	return h.opts.Store, true
}

func (h *handler) backup(w http.ResponseWriter, r *http.Request) {
	m, ok := h.maintainer(w, r)
	if !ok {
		return
	}
	w.Header().Set("Trailer", TrailerBackupStatus+", "+TrailerBackupVersion)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	v, err := m.Backup(r.Context(), w)
	if err != nil {
		h.opts.Logger.Error("api backup failed", "err", err)
		w.Header().Set(TrailerBackupStatus, "error: "+strings.ReplaceAll(err.Error(), "\n", " "))
		return
	}
	w.Header().Set(TrailerBackupVersion, strconv.FormatUint(v, 10))
	w.Header().Set(TrailerBackupStatus, "ok")
}

func (h *handler) storeStats(w http.ResponseWriter, r *http.Request) {
	m, ok := h.maintainer(w, r)
	if !ok {
		return
	}
	s, err := m.Stats(r.Context())
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	h.reply(w, http.StatusOK, s)
}

func (h *handler) verify(w http.ResponseWriter, r *http.Request) {
	m, ok := h.maintainer(w, r)
	if !ok {
		return
	}
	res, err := m.Verify(r.Context(), false)
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	h.reply(w, http.StatusOK, VerifyAnswer{res, res.Problems()})
}

// Backup streams the daemon's online backup into w and returns the
// version it is consistent at. An answer cut short is an error, so a
// partial file is never taken for a backup.
func (c *Client) Backup(ctx context.Context, w io.Writer) (uint64, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/store/backup", nil, nil, true)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return 0, fmt.Errorf("API backup: %w", err)
	}
	if st := resp.Trailer.Get(TrailerBackupStatus); st != "ok" {
		if st == "" {
			st = "the answer ended before the backup was complete"
		}
		return 0, fmt.Errorf("API backup: %s", st)
	}
	v, _ := strconv.ParseUint(resp.Trailer.Get(TrailerBackupVersion), 10, 64)
	return v, nil
}

// StoreStats returns the daemon's store counts.
func (c *Client) StoreStats(ctx context.Context) (store.Stats, error) {
	var s store.Stats
	err := c.do(ctx, http.MethodGet, "/v1/store/stats", nil, nil, &s)
	return s, err
}

// Verify runs a read-only verification of the daemon's store.
func (c *Client) Verify(ctx context.Context) (store.VerifyResult, error) {
	var a VerifyAnswer
	err := c.doLong(ctx, http.MethodGet, "/v1/store/verify", &a)
	return a.VerifyResult, err
}
