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

// StoreStats is the JSON answer of GET /v1/store/stats (and of `nddmilter
// store stats --json`): the store's counts.
type StoreStats struct {
	Campaigns     int64 `json:"campaigns"`
	Active        int64 `json:"active"`
	Allowed       int64 `json:"allowed"`
	Revoked       int64 `json:"revoked"`
	Keys          int64 `json:"keys"`
	SpamReports   int64 `json:"spam_reports"`
	HamReports    int64 `json:"ham_reports"`
	Messages      int64 `json:"messages"`
	DiskBytes     int64 `json:"disk_bytes"`
	DiskFree      int64 `json:"disk_free"` // -1: unknown
	DiskFull      bool  `json:"disk_full"`
	WritesRefused int64 `json:"writes_refused"`
}

// NewStoreStats is the JSON view of s.
func NewStoreStats(s store.Stats) StoreStats {
	return StoreStats{s.Campaigns, s.Active, s.Allowed, s.Revoked, s.Keys, s.SpamReports, s.HamReports,
		s.Messages, s.DiskBytes, s.DiskFree, s.DiskFull, s.WritesRefused}
}

// Stats is the store's view of the answer.
func (a StoreStats) Stats() store.Stats {
	return store.Stats{Campaigns: a.Campaigns, Active: a.Active, Allowed: a.Allowed, Revoked: a.Revoked, Keys: a.Keys,
		SpamReports: a.SpamReports, HamReports: a.HamReports, Messages: a.Messages, DiskBytes: a.DiskBytes,
		DiskFree: a.DiskFree, DiskFull: a.DiskFull, WritesRefused: a.WritesRefused}
}

// VerifyAnswer is the JSON answer of GET /v1/store/verify (and of
// `nddmilter store verify --json`).
type VerifyAnswer struct {
	Campaigns       int64 `json:"campaigns"`
	IndexKeys       int64 `json:"index_keys"`
	KeyListEntries  int64 `json:"key_list_entries"`
	Reporters       int64 `json:"reporters"`
	DayCounters     int64 `json:"day_counters"`
	BadRecords      int64 `json:"bad_records"`
	DanglingIndex   int64 `json:"dangling_index"`
	UnlistedIndex   int64 `json:"unlisted_index"`
	OrphanKeyList   int64 `json:"orphan_key_list"`
	OrphanReporters int64 `json:"orphan_reporters"`
	OrphanDays      int64 `json:"orphan_days"`
	ReporterIndex   int64 `json:"reporter_index"`
	CountMismatch   int64 `json:"count_mismatch"`
	BadIndexEntries int64 `json:"bad_index_entries"`
	CountersWrong   bool  `json:"counters_wrong"`
	NoSchema        bool  `json:"no_schema"`
	Repaired        int64 `json:"repaired"`
	Problems        int64 `json:"problems"`
}

// NewVerifyAnswer is the JSON view of r.
func NewVerifyAnswer(r store.VerifyResult) VerifyAnswer {
	return VerifyAnswer{r.Campaigns, r.IndexKeys, r.KeyListEntries, r.Reporters, r.DayCounters, r.BadRecords,
		r.DanglingIndex, r.UnlistedIndex, r.OrphanKeyList, r.OrphanReporters, r.OrphanDays, r.ReporterIndex,
		r.CountMismatch, r.BadIndexEntries, r.CountersWrong, r.NoSchema, r.Repaired, r.Problems()}
}

// Result is the store's view of the answer.
func (a VerifyAnswer) Result() store.VerifyResult {
	return store.VerifyResult{Campaigns: a.Campaigns, IndexKeys: a.IndexKeys, KeyListEntries: a.KeyListEntries,
		Reporters: a.Reporters, DayCounters: a.DayCounters, BadRecords: a.BadRecords, DanglingIndex: a.DanglingIndex,
		UnlistedIndex: a.UnlistedIndex, OrphanKeyList: a.OrphanKeyList, OrphanReporters: a.OrphanReporters,
		OrphanDays: a.OrphanDays, ReporterIndex: a.ReporterIndex, CountMismatch: a.CountMismatch, BadIndexEntries: a.BadIndexEntries,
		CountersWrong: a.CountersWrong, NoSchema: a.NoSchema, Repaired: a.Repaired}
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
	h.reply(w, http.StatusOK, NewStoreStats(s))
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
	h.reply(w, http.StatusOK, NewVerifyAnswer(res))
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
	var a StoreStats
	err := c.do(ctx, http.MethodGet, "/v1/store/stats", nil, nil, &a)
	return a.Stats(), err
}

// Verify runs a read-only verification of the daemon's store.
func (c *Client) Verify(ctx context.Context) (store.VerifyResult, error) {
	var a VerifyAnswer
	err := c.doLong(ctx, http.MethodGet, "/v1/store/verify", &a)
	return a.Result(), err
}
