// Package dashboard is nddmilter's web dashboard, served under /ui/ on
// the daemon's HTTP listener: pages rendered on the server (html/template)
// with charts drawn as SVG here, one embedded stylesheet, no script and
// nothing loaded from elsewhere. It reads and changes campaigns only
// through the campaign Engine's queries, the same as the API and the CLI.
//
// Pages (GET; a browser without a session is sent to /ui/login):
//
//	/ui/                       now: campaigns ranked by messages in the last hour (?sort=day: 24 h), sparklines, hourly totals, store size, fleet
//	/ui/campaigns/{id}         one campaign: timelines, sample (as text), evidence, reporters, state, the policy's verdict, what zero-hour purge took back
//	/ui/campaigns/{id}/confirm ?do=allow|unallow|delete|undo-purge: the confirmation of a change (admin)
//	/ui/watch                  false-positive watch: campaigns with not-spam reports
//
// Changes (POST, admin role, the session's CSRF token in the form, and
// http.CrossOriginProtection's same-origin check): /ui/campaigns/{id}/allow,
// /unallow, /delete, /undo-purge (moves back what zero-hour purge moved,
// without allowing the campaign); /ui/login (wrong secrets rate-limited per client
// address and per name, a correct one never locked out by others: auth.go)
// and /ui/logout.
// Every change is logged (who, with which credential, from where, what).
//
// Every answer carries a strict Content-Security-Policy (no script at
// all), X-Frame-Options DENY and X-Content-Type-Options nosniff; samples
// of campaigns (attacker-controlled text) are escaped, bounded, cleaned of
// invalid UTF-8 and control characters, and isolated for bidirectional
// text.
package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nddmilter/nddmilter/internal/campaign"
)

// Defaults of Options.
const (
	DefaultSessionTTL     = 12 * time.Hour
	DefaultMaxSessions    = 1000
	DefaultLoginInterval  = 2 * time.Second
	DefaultLoginBurst     = 5
	DefaultLoginHardBurst = 20
	DefaultPageSize       = 50
)

// maxPage bounds the page number of a listing (its offset costs index
// entries).
const maxPage = 200

// Prefix is the path the dashboard is served under.
const Prefix = "/ui/"

// CookieName is the session cookie's name.
const CookieName = "nddmilter_session"

// Options configure the dashboard. Zero values select the defaults.
type Options struct {
	// Credentials are the secrets that log in, each with its role (the
	// daemon gives the API token the admin role). None: nobody can log
	// in, and the login page says so.
	Credentials []Credential
	// Logger receives the audit log (logins, changes) and errors.
	// Default: discard.
	Logger *slog.Logger
	// Clock returns the current time. Default time.Now.
	Clock func() time.Time
	// SessionTTL is how long a login lasts. Default 12h.
	SessionTTL time.Duration
	// MaxSessions bounds the sessions kept (the oldest is dropped).
	// Default 1000.
	MaxSessions int
	// SecureCookie marks the session cookie Secure even when the request
	// did not come over TLS (a TLS-terminating proxy in front). Requests
	// over TLS always get a Secure cookie.
	SecureCookie bool
	// LoginInterval and LoginBurst bound wrong secrets per client address
	// and per name typed at login: LoginBurst at once, then one per
	// LoginInterval (and ten times that over all clients); past them a
	// wrong secret gets 429, a correct one is still admitted. Defaults 2s
	// and 5.
	LoginInterval time.Duration
	LoginBurst    int
	// LoginHardBurst bounds the logins of one credential from one client
	// address: LoginHardBurst at once, then one per LoginInterval (429
	// past it, even with the correct secret). Default 20.
	LoginHardBurst int
	// PageSize is the number of campaigns a listing page shows. Default 50.
	PageSize int
	// Fleet, if not nil, is shown on the now page: each node, its lag
	// and state, the stream's copies.
	Fleet FleetStatus
	// Purges, if not nil, is zero-hour purge: the campaign page shows
	// what it took back, and administrators can undo that.
	Purges Purges
}

// FleetStatus tells the state of the nodes of a fleet sharing campaigns.
type FleetStatus interface {
	Fleet(ctx context.Context) (Fleet, error)
}

// Fleet is the state of a fleet's nodes, as the node serving the page
// reads their statuses.
type Fleet struct {
	Nodes []Node
	// Copies are the fleet's stream's copies as the freshest live node
	// that knows them sees them, the leader first (nil when unknown).
	Copies []Copy
	// States is one line comparing the live nodes' campaign states
	// (converged, not comparable yet, or diverged; "" with fewer than two
	// nodes hashed), and Diverged is set when nodes that applied the same
	// events hold different states.
	States   string
	Diverged bool
}

// Node is one node of a fleet, as its status tells.
type Node struct {
	Name string
	// Healthy: connected and applying the fleet's stream.
	Healthy bool
	// Silent: the node stopped publishing its status (stopped, cut off
	// or retired); the rest is as of LastSeen.
	Silent bool
	// LastSeen is when the node's status was taken.
	LastSeen time.Time
	// Applied is the last stream sequence the node applied; Lag the
	// number of the fleet's events it has not applied yet; Outbox the
	// number of its own events waiting to be published.
	Applied uint64
	Lag     uint64
	Outbox  int
	// StateHash is the hash of the node's campaign state after the event
	// StateSeq ("" before its first): equal on nodes that applied the
	// same events.
	StateHash string
	StateSeq  uint64
	// Error is the node's last error ("" when none).
	Error string
	// Version is the build the node runs ("" when it does not say).
	Version string
	// ClockOffset is how far the node's clock is from the median of the
	// nodes' clocks (fleet.Status.ClockOffset).
	ClockOffset time.Duration
	// Warnings are what the node serving the page warns of about the
	// fleet (its state differing from the others', settings the nodes
	// disagree on, its name used twice, its clock), on its own row;
	// shown below the table.
	Warnings []string
}

// ShortHash is the first 12 characters of the state hash, and the event
// it was taken after ("" when none).
func (n Node) ShortHash() string {
	if n.StateHash == "" {
		return ""
	}
	return fmt.Sprintf("%s@%d", n.StateHash[:min(12, len(n.StateHash))], n.StateSeq)
}

// ClockNote says how far the node's clock is off ("" within a second,
// which NTP keeps hosts far inside).
func (n Node) ClockNote() string {
	if n.ClockOffset.Abs() < time.Second {
		return ""
	}
	dir := "ahead of"
	if n.ClockOffset < 0 {
		dir = "behind"
	}
	return fmt.Sprintf("clock %s %s the others'", n.ClockOffset.Abs().Round(time.Second), dir)
}

// Copy is one copy of the fleet's stream, on one NATS server.
type Copy struct {
	Server  string
	Leader  bool
	Offline bool
	// Behind: online, but lacking events the leader has.
	Behind bool
}

//go:embed templates static
var files embed.FS

// Handler serves the dashboard. Update swaps its engine and credentials
// on reload; sessions whose credential still holds stay logged in.
type Handler struct {
	opts     Options
	eng      atomic.Pointer[engine]
	creds    atomic.Pointer[[]hashedCred]
	sessions *sessions
	limit    *limiter
	cop      *http.CrossOriginProtection
	pages    map[string]*template.Template
	css      []byte // static/style.css
	mux      *http.ServeMux
}

// engine is what the dashboard works on: the campaign engine's read
// model, and its ingester for an administrator's allow and delete.
type engine struct {
	Reader   *campaign.Reader
	Ingester *campaign.Ingester
}

// New returns the dashboard over the read model r, with ing taking the
// administrators' changes. Mount it at Prefix.
func New(r *campaign.Reader, ing *campaign.Ingester, o Options) (*Handler, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.LoginInterval <= 0 {
		o.LoginInterval = DefaultLoginInterval
	}
	if o.LoginBurst <= 0 {
		o.LoginBurst = DefaultLoginBurst
	}
	if o.LoginHardBurst <= 0 {
		o.LoginHardBurst = DefaultLoginHardBurst
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	css, err := files.ReadFile("static/style.css")
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	h := &Handler{
		opts:     o,
		sessions: &sessions{m: map[string]*session{}, max: o.MaxSessions},
		limit:    newLimiter(o.LoginInterval, o.LoginBurst, o.LoginHardBurst),
		cop:      http.NewCrossOriginProtection(),
		pages:    pages,
		css:      css,
		mux:      http.NewServeMux(),
	}
	h.Update(r, ing, o.Credentials)
	h.routes()
	return h, nil
}

// Update serves r and ing from now on and accepts creds for new logins;
// the sessions of credentials no longer accepted (or with another role)
// end.
func (h *Handler) Update(r *campaign.Reader, ing *campaign.Ingester, creds []Credential) {
	hc := hashCreds(creds)
	h.eng.Store(&engine{Reader: r, Ingester: ing})
	h.creds.Store(&hc)
	h.sessions.keep(hc)
}

func (h *Handler) routes() {
	m := h.mux
	m.HandleFunc("GET "+Prefix+"static/style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "max-age=3600")
		_, _ = w.Write(h.css)
	})
	m.HandleFunc("GET "+Prefix+"login", h.loginPage)
	m.HandleFunc("POST "+Prefix+"login", h.login)
	m.HandleFunc("POST "+Prefix+"logout", h.change(RoleRead, h.logout))
	m.HandleFunc("GET "+Prefix+"{$}", h.read(h.now))
	m.HandleFunc("GET "+Prefix+"watch", h.read(h.watch))
	m.HandleFunc("GET "+Prefix+"campaigns/{id}", h.read(h.campaign))
	m.HandleFunc("GET "+Prefix+"campaigns/{id}/confirm", h.read(h.confirm))
	for _, do := range []string{"allow", "unallow", "delete", "undo-purge"} {
		m.HandleFunc("POST "+Prefix+"campaigns/{id}/"+do, h.change(RoleAdmin, h.act(do)))
	}
	m.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, nil, http.StatusNotFound, "No such page.")
	})
}

// ServeHTTP sets the security headers and dispatches.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

// session returns the request's session, nil without a valid one.
func (h *Handler) session(r *http.Request) *session {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	return h.sessions.get(c.Value, h.opts.Clock())
}

// read wraps a page: a request without a session is sent to the login
// page.
func (h *Handler) read(f func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se := h.session(r)
		if se == nil {
			http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
			return
		}
		f(w, r, se)
	}
}

// change wraps a state change: it needs a same-origin request (an Origin
// or Sec-Fetch-Site header that names the dashboard's origin), a session
// of at least role and the session's CSRF token; refusals are 403 and
// logged.
func (h *Handler) change(role Role, f func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h.cop.Check(r); err != nil {
			h.refuse(w, r, nil, "cross-origin request", err)
			return
		}
		// CrossOriginProtection lets requests without either header
		// through (they are not from a browser); a change must come from
		// a browser page of the same origin, which sends them.
		if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == "" {
			h.refuse(w, r, nil, "no Origin or Sec-Fetch-Site header", errors.New("changes are made from the dashboard's own pages"))
			return
		}
		se := h.session(r)
		if se == nil {
			h.refuse(w, r, nil, "no session", errors.New("log in first"))
			return
		}
		if !validCSRF(se, r.PostFormValue("csrf")) {
			h.refuse(w, r, se, "missing or wrong CSRF token", errors.New("reload the page and try again"))
			return
		}
		if se.role < role {
			h.refuse(w, r, se, "role", fmt.Errorf("the %s role cannot do this (log in as an administrator)", se.role))
			return
		}
		f(w, r, se)
	}
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, se *session, why string, err error) {
	args := []any{"why", why, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr}
	if se != nil {
		args = append(args, "who", se.who, "credential", se.cred, "role", se.role.String())
	}
	h.opts.Logger.Warn("dashboard: request refused", args...)
	h.fail(w, r, se, http.StatusForbidden, "Refused: "+err.Error()+".")
}

// pageNumber reads ?page= (0-based), bounded.
func pageNumber(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || n < 0 {
		return 0
	}
	return min(n, maxPage)
}
