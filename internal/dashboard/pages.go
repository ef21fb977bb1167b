package dashboard

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Bounds of what a page shows of a campaign's sample and lists.
const (
	listSubjectRunes   = 120
	detailSubjectRunes = 500
	fromRunes          = 200
	textRunes          = 2000
	maxReporters       = 200
	maxDays            = 400
	seriesHours        = 24
	recentRows         = 10
)

// base is what every page has.
type base struct {
	Title string
	Nav   string // "now", "watch" or ""
	Who   string
	Role  string
	Admin bool
	CSRF  string
	Error string
	// Notice says what the last change did (after its redirect).
	Notice string
}

func (h *Handler) base(se *session, title, nav string) base {
	b := base{Title: title, Nav: nav}
	if se != nil {
		b.Who, b.Role, b.Admin, b.CSRF = se.who, se.role.String(), se.role >= RoleAdmin, se.csrf
	}
	return b
}

// row is a campaign in a listing.
type row struct {
	ID                          store.CampaignID
	State                       string
	Subject, From               string
	Hour, Day, Messages         int64
	SpamReporters, HamReporters int64
	SpamReports, HamReports     int64
	FirstSeen, LastSeen         time.Time
	Actions                     string
	Spark                       template.HTML
	Verdict, Rule               string
}

func newRow(eng *engine, c *store.Campaign) row {
	d := eng.Reader.ExactCopy(c)
	return row{
		ID: c.ID, State: stateName(c.State),
		Subject: clean(c.SampleSubject, listSubjectRunes, true), From: clean(c.SampleFrom, fromRunes, true),
		Hour: c.HourMessages, Day: c.DayMessages, Messages: c.Messages,
		SpamReporters: c.SpamReporters, HamReporters: c.HamReporters,
		SpamReports: c.SpamReports, HamReports: c.HamReports,
		FirstSeen: c.FirstSeen, LastSeen: c.LastSeen, Actions: actions(c.Actions),
		Verdict: d.Action.String(), Rule: d.Rule,
	}
}

func stateName(s store.State) string {
	switch s {
	case store.StateActive:
		return "active"
	case store.StateAllowed:
		return "allowed"
	case store.StateRevoked:
		return "revoked"
	}
	return "state " + strconv.Itoa(int(s))
}

func kindName(k store.Kind) string {
	switch k {
	case store.KindSpam:
		return "spam"
	case store.KindHam:
		return "not spam"
	}
	return "kind " + strconv.Itoa(int(k))
}

// actions renders counts by action name, e.g. "reject 3, tag 1".
func actions(m map[string]int64) string {
	var parts []string
	for _, a := range slices.Sorted(maps.Keys(m)) {
		if m[a] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", clean(a, 20, true), m[a]))
		}
	}
	return strings.Join(parts, ", ")
}

// hourRow is one hour of the store-wide totals.
type hourRow struct {
	Hour                    time.Time
	Checked, Matched        int64
	Actions                 string
	SpamReports, HamReports int64
}

type nowPage struct {
	base
	Sort        string
	Rows        []row
	Recent      []row
	Page        int
	Prev, Next  int
	More        bool
	Totals      template.HTML
	TotalsFirst string
	Checked     int64
	Matched     int64
	Reports     int64
	HamReports  int64
	Actions     string
	Stats       store.Stats
	Hours       []hourRow
	Fleet       Fleet
	FleetErr    string
	HasFleet    bool
	At          time.Time
}

func (h *Handler) now(w http.ResponseWriter, r *http.Request, se *session) {
	eng := h.eng.Load()
	sort := r.URL.Query().Get("sort")
	if sort != store.SortDay {
		sort = store.SortHour
	}
	p := pageNumber(r)
	v, err := eng.Reader.Now(r.Context(), campaign.NowQuery{Sort: sort, Limit: h.opts.PageSize + 1, Offset: p * h.opts.PageSize, Hours: seriesHours})
	if err != nil {
		h.fail(w, r, se, http.StatusInternalServerError, "The campaigns could not be read: "+err.Error())
		return
	}
	d := nowPage{base: h.base(se, "Now", "now"), Sort: sort, Page: p, Prev: p - 1, Next: p + 1, Stats: v.Stats, At: v.At}
	if n, err := strconv.ParseUint(r.URL.Query().Get("deleted"), 10, 64); err == nil && n > 0 {
		d.Notice = fmt.Sprintf("Campaign %d %s.", n, changes["delete"].done)
	}
	if len(v.Campaigns) > h.opts.PageSize {
		d.More, v.Campaigns = true, v.Campaigns[:h.opts.PageSize]
	}
	for i := range v.Campaigns {
		rc := &v.Campaigns[i]
		rw := newRow(eng, &rc.Campaign)
		msgs := make([]int64, len(rc.Series))
		for j, hc := range rc.Series {
			msgs[j] = hc.Messages
		}
		rw.Spark = sparkline(msgs, fmt.Sprintf("campaign %d: messages per hour, last %d hours", rc.ID, len(msgs)))
		d.Rows = append(d.Rows, rw)
	}
	recent, err := eng.Reader.List(r.Context(), store.Query{Sort: store.SortRecent, Limit: recentRows})
	if err != nil {
		h.fail(w, r, se, http.StatusInternalServerError, "The campaigns could not be read: "+err.Error())
		return
	}
	for i := range recent {
		d.Recent = append(d.Recent, newRow(eng, &recent[i]))
	}
	checked, matched, acted := make([]int64, len(v.Totals)), make([]int64, len(v.Totals)), make([]int64, len(v.Totals))
	acts := map[string]int64{}
	for i, t := range v.Totals {
		checked[i], matched[i] = t.Checked, t.Matched
		for a, n := range t.Actions {
			acts[a] += n
			if a != "accept" {
				acted[i] += n
			}
		}
		d.Hours = append(d.Hours, hourRow{Hour: t.Hour, Checked: t.Checked, Matched: t.Matched, Actions: actions(t.Actions),
			SpamReports: t.SpamReports, HamReports: t.HamReports})
		d.Checked += t.Checked
		d.Matched += t.Matched
		d.Reports += t.SpamReports
		d.HamReports += t.HamReports
	}
	d.Actions = actions(acts)
	slices.Reverse(d.Hours) // latest first
	if len(v.Totals) > 0 {
		d.Totals = chart([]series{{"checked", checked}, {"matched a campaign", matched}, {"acted on", acted}},
			v.Totals[0].Hour.Format("Jan 2 15:04"), v.Totals[len(v.Totals)-1].Hour.Format("15:04")+" UTC",
			"messages checked, matched and acted on per hour")
	}
	if h.opts.Fleet != nil {
		d.HasFleet = true
		fl, err := h.opts.Fleet.Fleet(r.Context())
		if err != nil {
			d.FleetErr = err.Error()
		}
		d.Fleet = fl
	}
	h.render(w, r, se, http.StatusOK, "now", d)
}

type watchPage struct {
	base
	Rows       []watchRow
	Page       int
	Prev, Next int
	More       bool
}

// watchRow is a campaign of the false-positive watch and why it is there.
type watchRow struct {
	row
	Reasons []string
}

func (h *Handler) watch(w http.ResponseWriter, r *http.Request, se *session) {
	eng := h.eng.Load()
	p := pageNumber(r)
	cs, err := eng.Reader.FalsePositiveWatch(r.Context(), campaign.WatchOptions{Limit: h.opts.PageSize + 1, Offset: p * h.opts.PageSize})
	if err != nil {
		h.fail(w, r, se, http.StatusInternalServerError, "The campaigns could not be read: "+err.Error())
		return
	}
	d := watchPage{base: h.base(se, "False-positive watch", "watch"), Page: p, Prev: p - 1, Next: p + 1}
	if len(cs) > h.opts.PageSize {
		d.More, cs = true, cs[:h.opts.PageSize]
	}
	for i := range cs {
		var rs []string
		for _, s := range cs[i].Reasons() {
			rs = append(rs, clean(s, listSubjectRunes, true))
		}
		d.Rows = append(d.Rows, watchRow{row: newRow(eng, &cs[i].Campaign), Reasons: rs})
	}
	h.render(w, r, se, http.StatusOK, "watch", d)
}

// maxTrustReporters is the number of a campaign's spam reporters whose
// records the campaign page reads (api.MaxTrustReporters).
const maxTrustReporters = 32

type reporterRow struct {
	Kind, Hash  string
	First, Last time.Time
	// Weight is a spam reporter's weight from its record, "" when not
	// read (docs/POLICY.md, "Reporter trust").
	Weight string
}

type campaignPage struct {
	base
	row
	Subject, From, Text string
	Reputation          float64
	Families            []campaign.FamilyCount
	Keys, Sketches      int
	MergedFrom          []store.CampaignID
	Hourly, Daily       template.HTML
	Reporters           []reporterRow
	MoreReporters       bool
	Allowed             bool
	// Purge is what zero-hour purge took back (nil when it is off).
	Purge *purgeView
}

func (h *Handler) id(w http.ResponseWriter, r *http.Request, se *session) (store.CampaignID, bool) {
	n, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || n == 0 {
		h.fail(w, r, se, http.StatusNotFound, "No such campaign.")
		return 0, false
	}
	return store.CampaignID(n), true
}

// get reads a campaign, answering the failure itself.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, se *session, id store.CampaignID) (*store.Campaign, bool) {
	c, err := h.eng.Load().Reader.Get(r.Context(), id)
	if err != nil {
		h.failStore(w, r, se, id, err)
		return nil, false
	}
	return c, true
}

func (h *Handler) failStore(w http.ResponseWriter, r *http.Request, se *session, id store.CampaignID, err error) {
	if errors.Is(err, store.ErrNotFound) {
		h.fail(w, r, se, http.StatusNotFound, fmt.Sprintf("Campaign %d does not exist (expired, deleted or merged into another).", id))
		return
	}
	h.fail(w, r, se, http.StatusInternalServerError, err.Error())
}

func (h *Handler) campaign(w http.ResponseWriter, r *http.Request, se *session) {
	id, ok := h.id(w, r, se)
	if !ok {
		return
	}
	c, ok := h.get(w, r, se, id)
	if !ok {
		return
	}
	eng := h.eng.Load()
	ctx := r.Context()
	d := campaignPage{
		base: h.base(se, fmt.Sprintf("Campaign %d", id), ""), row: newRow(eng, c),
		Subject: clean(c.SampleSubject, detailSubjectRunes, true), From: clean(c.SampleFrom, fromRunes, true),
		Text: clean(c.SampleText, textRunes, false), Reputation: eng.Reader.Policy().Reputation(c),
		Families: campaign.KeyFamilies(c.Keys), Keys: len(c.Keys), Sketches: len(c.Sketches),
		MergedFrom: c.MergedFrom, Allowed: c.State == store.StateAllowed,
	}
	if ch, ok := changes[r.URL.Query().Get("done")]; ok {
		d.Notice = fmt.Sprintf("Campaign %d %s.", id, ch.done)
	}
	hours, err := eng.Reader.Series(ctx, id)
	if err != nil {
		h.failStore(w, r, se, id, err)
		return
	}
	if len(hours) > 0 {
		// At least a day, so that a young campaign's hours stand out.
		for first := hours[0].Hour; len(hours) < seriesHours; {
			first = first.Add(-time.Hour)
			hours = append([]store.HourCount{{Hour: first}}, hours...)
		}
		var msgs, spam, ham, acted []int64
		for _, hc := range hours {
			msgs, spam, ham, acted = append(msgs, hc.Messages), append(spam, hc.SpamReports), append(ham, hc.HamReports), append(acted, hc.Acted)
		}
		d.Hourly = chart([]series{{"messages", msgs}, {"spam reports", spam}, {"not-spam reports", ham}, {"acted on", acted}},
			hours[0].Hour.Format("Jan 2 15:04"), hours[len(hours)-1].Hour.Format("Jan 2 15:04")+" UTC",
			fmt.Sprintf("campaign %d per hour", id))
	}
	days, err := eng.Reader.Timeline(ctx, id)
	if err != nil {
		h.failStore(w, r, se, id, err)
		return
	}
	if len(days) > maxDays {
		days = days[len(days)-maxDays:]
	}
	if len(days) > 1 {
		var msgs, spam, ham []int64
		for _, dc := range days {
			msgs, spam, ham = append(msgs, dc.Messages), append(spam, dc.SpamReports), append(ham, dc.HamReports)
		}
		d.Daily = chart([]series{{"messages", msgs}, {"spam reports", spam}, {"not-spam reports", ham}},
			days[0].Day.Format(time.DateOnly), days[len(days)-1].Day.Format(time.DateOnly),
			fmt.Sprintf("campaign %d per day", id))
	}
	reps, err := eng.Reader.Reporters(ctx, id, maxReporters+1)
	if err != nil {
		h.failStore(w, r, se, id, err)
		return
	}
	if len(reps) > maxReporters {
		d.MoreReporters, reps = true, reps[:maxReporters]
	}
	for i, rp := range reps {
		row := reporterRow{Kind: kindName(rp.Kind), Hash: shortHash(rp.Hash), First: rp.First, Last: rp.Last}
		if rp.Kind == store.KindSpam && i < maxTrustReporters {
			tr, ok, err := eng.Reader.ReporterTrust(ctx, rp.Hash)
			if err != nil {
				h.failStore(w, r, se, id, err)
				return
			}
			if ok {
				row.Weight = fmt.Sprintf("%.2f (%d agreed, %d contradicted)", tr.Weight, tr.Agreed, tr.Contradicted)
			}
		}
		d.Reporters = append(d.Reporters, row)
	}
	d.Purge = h.purgeSection(ctx, id)
	h.render(w, r, se, http.StatusOK, "campaign", d)
}

// changes are the state changes of a campaign, by route.
var changes = map[string]struct{ verb, done string }{
	"allow":   {"Allow", "allowed: its copies are never acted on"},
	"unallow": {"Undo allow", "active again: the policy decides"},
	"delete":  {"Delete", "deleted"},
	"undo-purge": {"Undo the purge of", "had its purge undone: the copies it moved go back where they were, " +
		"and none moves again while it stays at the trigger"},
}

type confirmPage struct {
	base
	row
	Do, Verb string
}

func (h *Handler) confirm(w http.ResponseWriter, r *http.Request, se *session) {
	id, ok := h.id(w, r, se)
	if !ok {
		return
	}
	do := r.URL.Query().Get("do")
	ch, known := changes[do]
	if !known {
		h.fail(w, r, se, http.StatusBadRequest, "Unknown change: want allow, unallow, delete or undo-purge.")
		return
	}
	if do == "undo-purge" && h.opts.Purges == nil {
		h.fail(w, r, se, http.StatusNotFound, "Zero-hour purge is off.")
		return
	}
	if se.role < RoleAdmin {
		h.fail(w, r, se, http.StatusForbidden, "Refused: the read role cannot change campaigns (log in as an administrator).")
		return
	}
	c, ok := h.get(w, r, se, id)
	if !ok {
		return
	}
	h.render(w, r, se, http.StatusOK, "confirm", confirmPage{base: h.base(se, ch.verb+fmt.Sprintf(" campaign %d?", id), ""),
		row: newRow(h.eng.Load(), c), Do: do, Verb: ch.verb})
}

// act returns the handler of one change (allow, unallow, delete or
// undo-purge).
func (h *Handler) act(do string) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, se *session) {
		id, ok := h.id(w, r, se)
		if !ok {
			return
		}
		eng := h.eng.Load()
		var err error
		n := 0
		switch do {
		case "allow", "unallow":
			_, err = eng.Ingester.Allow(r.Context(), id, do == "allow")
		case "delete":
			if _, err = eng.Reader.Get(r.Context(), id); err == nil {
				err = eng.Ingester.Delete(r.Context(), id)
			}
		case "undo-purge":
			if h.opts.Purges == nil {
				h.fail(w, r, se, http.StatusNotFound, "Zero-hour purge is off.")
				return
			}
			if _, err = eng.Reader.Get(r.Context(), id); err == nil {
				n, err = h.opts.Purges.UndoPurge(r.Context(), id, "dashboard user "+se.who)
			}
		}
		args := []any{"who", se.who, "credential", se.cred, "role", se.role.String(), "remote", r.RemoteAddr, "change", do, "campaign", uint64(id)}
		if do == "undo-purge" && err == nil {
			args = append(args, "undo_jobs", n)
		}
		if err != nil {
			h.opts.Logger.Warn("dashboard: change failed", append(args, "err", err)...)
			h.failStore(w, r, se, id, err)
			return
		}
		h.opts.Logger.Info("dashboard: campaign changed", args...)
		to := fmt.Sprintf("%scampaigns/%d?done=%s", Prefix, id, do)
		if do == "delete" {
			to = fmt.Sprintf("%s?deleted=%d", Prefix, id)
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}

type loginPage struct {
	base
	NoCredentials bool
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	if h.session(r) != nil {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	h.render(w, r, nil, http.StatusOK, "login", loginPage{base: h.base(nil, "Log in", ""), NoCredentials: len(*h.creds.Load()) == 0})
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	page := loginPage{base: h.base(nil, "Log in", ""), NoCredentials: len(*h.creds.Load()) == 0}
	if err := h.cop.Check(r); err != nil {
		h.refuse(w, r, nil, "cross-origin login", err)
		return
	}
	who := clean(strings.TrimSpace(r.PostFormValue("name")), 64, true)
	c, ok := match(*h.creds.Load(), r.PostFormValue("secret"))
	now := h.opts.Clock()
	retry := strconv.Itoa(int(h.opts.LoginInterval/time.Second) + 1)
	if !ok {
		if !h.limit.failed(r, who, now) {
			h.opts.Logger.Warn("dashboard: login attempts rate-limited", "who", who, "remote", r.RemoteAddr)
			w.Header().Set("Retry-After", retry)
			page.Error = "Too many login attempts: wait a little and try again."
			h.render(w, r, nil, http.StatusTooManyRequests, "login", page)
			return
		}
		h.opts.Logger.Warn("dashboard: login failed", "who", who, "remote", r.RemoteAddr)
		page.Error = "Wrong password or token."
		h.render(w, r, nil, http.StatusUnauthorized, "login", page)
		return
	}
	if !h.limit.admitted(r, c.name, now) {
		h.opts.Logger.Warn("dashboard: logins rate-limited", "who", who, "credential", c.name, "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", retry)
		page.Error = "Too many logins with this secret from here: wait a little and try again."
		h.render(w, r, nil, http.StatusTooManyRequests, "login", page)
		return
	}
	if who == "" {
		who = c.name
	}
	se := &session{id: newToken(), who: who, cred: c.name, secret: c.sum, role: c.role, csrf: newToken(), expires: now.Add(h.opts.SessionTTL)}
	h.sessions.add(se, now)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: se.id, Path: Prefix, MaxAge: int(h.opts.SessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.opts.SecureCookie || r.TLS != nil})
	h.opts.Logger.Info("dashboard: login", "who", who, "credential", c.name, "role", c.role.String(), "remote", r.RemoteAddr)
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request, se *session) {
	h.sessions.remove(se.id)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.opts.SecureCookie || r.TLS != nil})
	h.opts.Logger.Info("dashboard: logout", "who", se.who, "credential", se.cred, "remote", r.RemoteAddr)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// render executes a page into a buffer first, so that a failing template
// never sends half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, se *session, status int, name string, data any) {
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", data); err != nil {
		h.opts.Logger.Error("dashboard: render", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

type errorPage struct {
	base
	Status  int
	Message string
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, se *session, status int, msg string) {
	if status >= 500 {
		h.opts.Logger.Error("dashboard: request failed", "path", r.URL.Path, "status", status, "err", msg)
	}
	h.render(w, r, se, status, "error", errorPage{base: h.base(se, http.StatusText(status), ""), Status: status, Message: msg})
}
