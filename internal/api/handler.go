package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/metrics"
	"github.com/nddmilter/nddmilter/internal/store"
)

// DefaultMaxBody is the default bound on an uploaded message (32 MiB).
const DefaultMaxBody = 32 << 20

// DefaultListLimit is the number of campaigns GET /v1/campaigns returns
// without ?limit= (limit=0 returns them all).
const DefaultListLimit = 100

// Options configure the handler. Zero values select the defaults.
type Options struct {
	// Token is the administrator's bearer token (the api-token: every
	// route). Empty, and no Tokens: the handler refuses to serve the API
	// (503) rather than serve it open.
	Token string
	// Tokens are more bearer tokens, each with its scope (scope.go).
	// Their secrets must differ from each other's and from Token.
	Tokens []Token
	// MaxBody bounds a request body. Default DefaultMaxBody (32 MiB).
	MaxBody int64
	// Logger receives one line per failed request. Default: discard.
	Logger *slog.Logger
	// Metrics, if not nil, count the requests refused by MaxInflight.
	Metrics *metrics.Metrics
	// Clock returns the current time (for ?since=). Default time.Now.
	Clock func() time.Time
	// RequestTimeout bounds a check or a report: past it the request is
	// answered 503 (the work it started may still finish; a repeated
	// report counts once). Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxInflight bounds the checks and reports running at once (those
	// past their deadline included); more are answered 503 at once.
	// Default DefaultMaxInflight; negative: no limit.
	MaxInflight int
	// Store, if not nil, is served under /v1/store (backup, stats,
	// verify); otherwise those routes answer 404.
	Store Maintainer
	// Purges, if not nil, is zero-hour purge, served under
	// /v1/campaigns/{id}/purge; otherwise those routes answer 404.
	Purges Purges
	// FleetStatus, if not nil, is served as GET /v1/fleet/status;
	// otherwise that route answers 404.
	FleetStatus FleetStatusFunc
	// FleetForget, if not nil, is served as DELETE
	// /v1/fleet/nodes/{node}; otherwise that route answers 404.
	FleetForget FleetForgetFunc
	// FleetRemoveServer, if not nil, is served as DELETE
	// /v1/fleet/servers/{server}; otherwise that route answers 404.
	FleetRemoveServer FleetRemoveServerFunc
}

// Defaults of Options.RequestTimeout and Options.MaxInflight.
const (
	DefaultRequestTimeout = 30 * time.Second
	DefaultMaxInflight    = 16
)

type handler struct {
	// The engine's parts: checker and read are nil on the report socket.
	checker *campaign.Checker
	ingest  *campaign.Ingester
	read    *campaign.Reader
	opts    Options
	tokens  []hashedToken // Token (admin) and Tokens
	mux     *http.ServeMux
	slots   chan struct{} // MaxInflight (nil: no limit)
}

// NewHandler returns the /v1 API handler over eng (which holds the store):
// its Checker checks, its Ingester takes reports and administrative
// changes, its Reader answers the queries. Mount it at the root of the
// HTTP listener; it answers only /v1/ paths.
func NewHandler(eng *campaign.Engine, opts Options) http.Handler {
	h := newHandler(opts)
	h.checker, h.ingest, h.read = eng.Checker, eng.Ingester, eng.Reader
	h.mux.HandleFunc("POST /v1/reports", h.need(ScopeReport, h.report))
	h.mux.HandleFunc("POST /v1/check", h.need(ScopeRead, h.check))
	h.mux.HandleFunc("GET /v1/campaigns", h.need(ScopeRead, h.list))
	h.mux.HandleFunc("GET /v1/campaigns/{id}", h.need(ScopeRead, h.show))
	h.mux.HandleFunc("GET /v1/campaigns/{id}/series", h.need(ScopeRead, h.series))
	h.mux.HandleFunc("GET /v1/now", h.need(ScopeRead, h.now))
	h.mux.HandleFunc("GET /v1/watch", h.need(ScopeRead, h.watch))
	h.mux.HandleFunc("DELETE /v1/campaigns/{id}", h.need(ScopeAdmin, h.delete))
	h.mux.HandleFunc("POST /v1/campaigns/{id}/allow", h.need(ScopeAdmin, h.allow))
	h.mux.HandleFunc("GET /v1/campaigns/{id}/purge", h.need(ScopeRead, h.purge))
	h.mux.HandleFunc("POST /v1/campaigns/{id}/purge/undo", h.need(ScopeAdmin, h.undoPurge))
	h.mux.HandleFunc("GET /v1/store/backup", h.need(ScopeAdmin, h.backup))
	h.mux.HandleFunc("GET /v1/store/stats", h.need(ScopeRead, h.storeStats))
	h.mux.HandleFunc("GET /v1/store/verify", h.need(ScopeAdmin, h.verify))
	h.mux.HandleFunc("GET /v1/fleet/status", h.need(ScopeRead, h.fleetStatus))
	h.mux.HandleFunc("DELETE /v1/fleet/nodes/{node}", h.need(ScopeAdmin, h.fleetForget))
	h.mux.HandleFunc("DELETE /v1/fleet/servers/{server}", h.need(ScopeAdmin, h.fleetRemoveServer))
	h.mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no such API route: %s %s", r.Method, r.URL.Path))
	})
	return h
}

// newHandler applies the defaults of opts; the caller adds the routes.
func newHandler(opts Options) *handler {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.MaxInflight == 0 {
		opts.MaxInflight = DefaultMaxInflight
	}
	h := &handler{opts: opts, mux: http.NewServeMux()}
	if opts.Token != "" {
		h.tokens = append(h.tokens, hashedToken{Token: Token{Name: "api-token", Secret: opts.Token, Scope: ScopeAdmin}, sum: sha256.Sum256([]byte(opts.Token))})
	}
	for _, t := range opts.Tokens {
		if t.Secret != "" {
			h.tokens = append(h.tokens, hashedToken{Token: t, sum: sha256.Sum256([]byte(t.Secret))})
		}
	}
	if opts.MaxInflight > 0 {
		h.slots = make(chan struct{}, opts.MaxInflight)
	}
	return h
}

// ServeHTTP authenticates, bounds the body and dispatches.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(h.tokens) == 0 {
		h.fail(w, r, http.StatusServiceUnavailable,
			errors.New("the API is disabled: no token configured (set http.token or http.token_file)"))
		return
	}
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		w.Header().Set("WWW-Authenticate", `Bearer realm="nddmilter"`)
		h.fail(w, r, http.StatusUnauthorized, errors.New("missing bearer token (Authorization: Bearer TOKEN)"))
		return
	}
	t, ok := authenticate(h.tokens, strings.TrimSpace(tok))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="nddmilter", error="invalid_token"`)
		h.fail(w, r, http.StatusUnauthorized, errors.New("invalid bearer token"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxBody)
	h.mux.ServeHTTP(w, withToken(r, t))
}

func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			h.fail(w, r, http.StatusRequestEntityTooLarge, fmt.Errorf("request body larger than %d bytes (http.max_body_bytes)", mbe.Limit))
			return nil, false
		}
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("read body: %w", err))
		return nil, false
	}
	if len(b) == 0 {
		h.fail(w, r, http.StatusBadRequest, errors.New("empty body: send the raw message"))
		return nil, false
	}
	return b, true
}

func (h *handler) report(w http.ResponseWriter, r *http.Request) {
	kind, err := ParseKind(r.URL.Query().Get("kind"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	raw, ok := h.readBody(w, r)
	if !ok {
		return
	}
	// An admin token's holder, a report token with AnyReporter and the
	// report socket's callers name the reporter (docs/SECURITY.md,
	// "Reporter identities"), within CheckReporter's bounds; a report
	// token with a fixed reporter reports as it only.
	reporter := r.URL.Query().Get("reporter")
	if err := campaign.CheckReporter(reporter); err != nil {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("reporter: %w", err))
		return
	}
	if t := tokenOf(r); t != nil && t.Scope == ScopeReport && t.Reporter != AnyReporter {
		if reporter != "" && h.ingest.ReporterID(reporter) != h.ingest.ReporterID(t.Reporter) {
			h.fail(w, r, http.StatusForbidden, fmt.Errorf("token %q reports as %q only, not as %q", t.Name, t.Reporter, reporter))
			return
		}
		reporter = t.Reporter
	}
	if strings.TrimSpace(reporter) == "" {
		h.fail(w, r, http.StatusBadRequest, errors.New("reporter: missing: name who reports (?reporter=ID, an account or address)"))
		return
	}
	// The administrator's reports are not bounded by
	// reports.reporter_limit (it names any reporter anyway, and ingests
	// corpora through the daemon); report tokens' and the socket's are.
	admin := false
	if t := tokenOf(r); t != nil && t.Scope == ScopeAdmin {
		admin = true
	}
	var out campaign.ReportOutcome
	if !h.bounded(w, r, "report", func(ctx context.Context) (err error) {
		if admin {
			ctx = campaign.WithoutReporterLimit(ctx)
		}
		out, err = h.ingest.Report(ctx, raw, kind, reporter)
		return err
	}) {
		return
	}
	h.reply(w, http.StatusOK, NewOutcome(kind, out))
}

func (h *handler) check(w http.ResponseWriter, r *http.Request) {
	raw, ok := h.readBody(w, r)
	if !ok {
		return
	}
	// A dry run by default, as nddmilter check: ?record=1 counts a match
	// in the campaign's statistics as the milter does (?dry_run=1 is
	// accepted and always a dry run).
	check := h.checker.Evaluate
	if q := r.URL.Query(); truthy(q.Get("record")) && !truthy(q.Get("dry_run")) {
		// Counting the match changes the campaign's statistics.
		if t := tokenOf(r); t != nil && t.Scope != ScopeAdmin {
			h.fail(w, r, http.StatusForbidden, fmt.Errorf("token %q (scope %s) may not record a check: it needs the admin scope", t.Name, t.Scope))
			return
		}
		check = h.checker.Check
	}
	var v campaign.Verdict
	if !h.bounded(w, r, "check", func(ctx context.Context) (err error) {
		v, err = check(ctx, raw)
		return err
	}) {
		return
	}
	if v.Evidence == nil {
		v.Evidence = []campaign.Evidence{}
	}
	h.reply(w, http.StatusOK, v)
}

// pageParams parses limit and offset (limit default DefaultListLimit).
func pageParams(q url.Values) (limit, offset int, err error) {
	limit = DefaultListLimit
	if s := q.Get("limit"); s != "" {
		limit, err = strconv.Atoi(s)
		if err != nil || limit < 0 {
			return 0, 0, fmt.Errorf("invalid limit %q", s)
		}
	}
	if s := q.Get("offset"); s != "" {
		offset, err = strconv.Atoi(s)
		if err != nil || offset < 0 {
			return 0, 0, fmt.Errorf("invalid offset %q", s)
		}
	}
	return limit, offset, nil
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, err := ParseSince(q.Get("since"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	sort, err := ParseSort(q.Get("sort"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	limit, offset, err := pageParams(q)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	lq := ListQuery{Since: since, Sort: sort, Limit: limit, Offset: offset}
	cs, err := h.read.List(r.Context(), lq.Query(h.opts.Clock()))
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	out := make([]Summary, len(cs))
	for i := range cs {
		out[i] = NewSummary(&cs[i])
	}
	h.reply(w, http.StatusOK, out)
}

// watch is the false-positive watch: campaigns whose copies came from
// senders that also send ham, then campaigns with not-spam reports.
func (h *handler) watch(w http.ResponseWriter, r *http.Request) {
	limit, offset, err := pageParams(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ws, err := h.read.FalsePositiveWatch(r.Context(), campaign.WatchOptions{Limit: limit, Offset: offset})
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	out := make([]Watched, len(ws))
	for i := range ws {
		out[i] = NewWatched(&ws[i])
	}
	h.reply(w, http.StatusOK, out)
}

func (h *handler) now(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, offset, err := pageParams(q)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	nq := campaign.NowQuery{Sort: q.Get("sort"), Limit: limit, Offset: offset}
	if s := q.Get("hours"); s != "" {
		if nq.Hours, err = strconv.Atoi(s); err != nil || nq.Hours < 1 {
			h.fail(w, r, http.StatusBadRequest, fmt.Errorf("invalid hours %q", s))
			return
		}
	}
	v, err := h.read.Now(r.Context(), nq)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	h.reply(w, http.StatusOK, NewNow(v))
}

func (h *handler) series(w http.ResponseWriter, r *http.Request) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	hs, err := h.read.Series(r.Context(), id)
	if err != nil {
		h.failStore(w, r, err)
		return
	}
	h.reply(w, http.StatusOK, NewHours(hs))
}

func (h *handler) id(w http.ResponseWriter, r *http.Request) (store.CampaignID, bool) {
	id, err := ParseID(r.PathValue("id"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return 0, false
	}
	return id, true
}

func (h *handler) show(w http.ResponseWriter, r *http.Request) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	d, err := GetDetail(r.Context(), h.read, id)
	if err != nil {
		h.failStore(w, r, err)
		return
	}
	h.reply(w, http.StatusOK, d)
}

func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	if _, err := h.read.Get(r.Context(), id); err != nil {
		h.failStore(w, r, err) // names the campaign
		return
	}
	if err := h.ingest.Delete(r.Context(), id); err != nil {
		h.failStore(w, r, fmt.Errorf("delete campaign %d: %w", id, err))
		return
	}
	h.reply(w, http.StatusOK, map[string]store.CampaignID{"deleted": id})
}

func (h *handler) allow(w http.ResponseWriter, r *http.Request) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	undo := truthy(r.URL.Query().Get("undo"))
	c, err := h.ingest.Allow(r.Context(), id, !undo)
	if err != nil {
		h.failStore(w, r, err) // names the campaign
		return
	}
	h.reply(w, http.StatusOK, NewSummary(c))
}

// failStore answers 404 for an unknown campaign, 500 otherwise.
func (h *handler) failStore(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, store.ErrNotFound) {
		h.fail(w, r, http.StatusNotFound, err)
		return
	}
	h.fail(w, r, http.StatusInternalServerError, err)
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status >= 500 {
		h.opts.Logger.Error("api request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	} else {
		h.opts.Logger.Debug("api request refused", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	h.reply(w, status, map[string]string{"error": err.Error()})
}

func (h *handler) reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// bounded runs f (a check or a report) within MaxInflight and under
// RequestTimeout, answering the failure itself; true when f succeeded in
// time. Work past its deadline goes on in the background (the engine
// stops at its next context check) and keeps its in-flight slot.
func (h *handler) bounded(w http.ResponseWriter, r *http.Request, what string, f func(context.Context) error) bool {
	if h.slots != nil {
		select {
		case h.slots <- struct{}{}:
		default:
			w.Header().Set("Retry-After", "1")
			h.opts.Metrics.Overload("api")
			h.fail(w, r, http.StatusServiceUnavailable, fmt.Errorf("too many checks and reports in flight (http.max_inflight %d): retry later", h.opts.MaxInflight))
			return false
		}
	}
	// Cancelled when bounded returns, never by the goroutine: the select
	// below must not see the context end because f finished.
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.RequestTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if h.slots != nil {
				<-h.slots
			}
		}()
		done <- f(ctx)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case err = <-done: // finished just in time
		default:
			if r.Context().Err() != nil {
				return false // the client went away
			}
			err = ctx.Err()
		}
	}
	var rle *campaign.RateLimitError
	switch {
	case err == nil:
		return true
	case errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "5")
		h.fail(w, r, http.StatusServiceUnavailable, fmt.Errorf("%s did not finish within %s (http.request_timeout); a report may still be recorded, retrying it is safe", what, h.opts.RequestTimeout))
	case errors.Is(err, store.ErrDiskFull):
		h.fail(w, r, http.StatusInsufficientStorage, err)
	case errors.As(err, &rle):
		// One reporter's reports past reports.reporter_limit.
		w.Header().Set("Retry-After", strconv.Itoa(int((rle.RetryAfter+time.Second-1)/time.Second)))
		h.fail(w, r, http.StatusTooManyRequests, err)
	default:
		h.fail(w, r, http.StatusInternalServerError, err)
	}
	return false
}

// truthy reads a boolean query parameter: set and not "0" or "false".
func truthy(v string) bool { return v != "" && v != "0" && v != "false" }
