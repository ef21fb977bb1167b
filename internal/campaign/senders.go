package campaign

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"

	"github.com/nddmilter/nddmilter/internal/store"
)

// SenderDomain returns the registrable domain (the public suffix and one
// label more, e.g. "example.co.uk" for "mail.example.co.uk") of the
// address in a From header, lower case, in its ASCII (punycode) form; ""
// when it has none. It is what the sender statistics count: a campaign's
// copies by sender, and the ham table.
func SenderDomain(from string) string {
	addr := from
	if i := strings.LastIndexByte(addr, '<'); i >= 0 {
		addr = addr[i+1:]
		if j := strings.IndexByte(addr, '>'); j >= 0 {
			addr = addr[:j]
		}
	}
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return ""
	}
	d := strings.TrimSpace(addr[at+1:])
	if k := strings.IndexAny(d, " \t>,;"); k >= 0 {
		d = d[:k]
	}
	d = strings.TrimSuffix(d, ".")
	if d == "" || len(d) > store.MaxSenderDomain || strings.HasPrefix(d, "[") {
		return ""
	}
	a, err := idna.Lookup.ToASCII(d)
	if err != nil || a == "" {
		return ""
	}
	if r, err := publicsuffix.EffectiveTLDPlusOne(a); err == nil {
		return r
	}
	return a // a public suffix itself, or a name outside the list
}

// WatchOptions select the false-positive watch. Zero values select the
// defaults.
type WatchOptions struct {
	// Limit and Offset page the watch as in Query.
	Limit, Offset int
	// MinHamMessages is how many accepted messages that matched no
	// campaign (the ham table's guaranteed count) make a sender domain one
	// "that also sends ham". Default 20.
	MinHamMessages int64
	// HamRatio: a campaign is listed for such a sender when the sender's
	// ham is at least HamRatio times the campaign's copies from it (a
	// domain that sends far more ham than copies of the campaign).
	// Default 1.
	HamRatio float64
	// Senders bounds the ham senders examined, most ham first, and
	// PerSender the campaigns listed per sender. Defaults 50 and 20.
	Senders, PerSender int
}

func (o WatchOptions) withDefaults() WatchOptions {
	if o.MinHamMessages <= 0 {
		o.MinHamMessages = 20
	}
	if o.HamRatio <= 0 {
		o.HamRatio = 1
	}
	if o.Senders <= 0 {
		o.Senders = 50
	}
	if o.PerSender <= 0 {
		o.PerSender = 20
	}
	return o
}

// HamSender is a sender domain of a campaign's copies that also sends
// ham.
type HamSender struct {
	Domain string
	// Copies of the campaign from the domain, and Ham the domain's
	// accepted messages that matched no campaign (a lower bound).
	Copies, Ham int64
}

// Watched is a campaign of the false-positive watch and why it is there.
type Watched struct {
	store.Campaign
	// HamSenders are the campaign's sender domains that also send ham
	// (WatchOptions), most ham first.
	HamSenders []HamSender
	// GraymailCopies are this node's copies of the campaign that their
	// graymail signs held back (graymail.go: replies, a list's mail,
	// lists and senders with accepted mail): accepted, or tagged at most.
	GraymailCopies int64
	// Graymail is set when the campaign has fewer than
	// Policy.GraymailReporters spam reporters and its copies are
	// graymail: some were held back (GraymailCopies), or a sender sent at
	// least Policy.GraymailHamMessages accepted messages, so such copies
	// are accepted unless they are near-copies of the reported text
	// (with Policy.AuthservIDs, only those authenticated for the
	// sender's domain).
	Graymail bool
	// graymailReporters and authenticated are the policy's, for Reasons.
	graymailReporters int
	authenticated     bool
}

// Reasons says in words why the campaign is watched.
func (w *Watched) Reasons() []string {
	var rs []string
	if w.HamReports > 0 {
		rs = append(rs, fmt.Sprintf("%d not-spam report(s) from %d reporter(s)", w.HamReports, w.HamReporters))
	}
	for _, s := range w.HamSenders {
		rs = append(rs, fmt.Sprintf("%d copies from %s, which sent %d accepted messages", s.Copies, s.Domain, s.Ham))
	}
	if w.GraymailCopies > 0 {
		copies := "copies"
		if w.GraymailCopies == 1 {
			copies = "copy"
		}
		rs = append(rs, fmt.Sprintf("%d %s held back as graymail (replies, a list's mail, or lists and senders with accepted mail)", w.GraymailCopies, copies))
	}
	if w.Graymail {
		auth := ""
		if w.authenticated {
			auth = " and authenticated"
		}
		from := "its copies from those senders"
		if len(w.HamSenders) == 0 {
			from = "its graymail copies"
		}
		rs = append(rs, fmt.Sprintf("graymail: with fewer than %d spam reporters, %s%s are accepted unless near-copies of the reported text",
			w.graymailReporters, from, auth))
	}
	return rs
}

// FalsePositiveWatch returns the campaigns an administrator should look
// at for legitimate mail caught by mistake: first those whose copies came
// from senders that also send ham (WatchOptions; most ham first), then
// those with copies held back as graymail (most first), then those that
// received not-spam reports (most distinct not-spam reporters first),
// each with its reasons. The sender and graymail statistics are this
// node's (store.SenderStore); a store without them gives the last list
// only.
func (r *Reader) FalsePositiveWatch(ctx context.Context, o WatchOptions) (out []Watched, err error) {
	o = o.withDefaults()
	limit := o.Limit
	if limit <= 0 || limit > store.MaxListLimit {
		limit = store.DefaultListLimit
	}
	flagged, err := r.hamSenderCampaigns(ctx, o)
	if err != nil {
		return nil, err
	}
	held, err := r.graymailCampaigns(ctx, flagged, o)
	if err != nil {
		return nil, err
	}
	flagged = append(flagged, held...)
	defer func() {
		for i := range out {
			r.markGraymail(ctx, &out[i])
		}
	}()
	offset := max(o.Offset, 0)
	if offset < len(flagged) {
		out = append(out, flagged[offset:min(len(flagged), offset+limit)]...)
		offset = 0
	} else {
		offset -= len(flagged)
	}
	if len(out) < limit {
		cs, err := r.List(ctx, store.Query{Sort: store.SortHam, Limit: limit - len(out), Offset: offset})
		if err != nil {
			return nil, err
		}
		for i := range cs {
			w := Watched{Campaign: cs[i]}
			if w.HamSenders, err = r.campaignHamSenders(ctx, w.ID, o); err != nil {
				return nil, err
			}
			out = append(out, w)
		}
	}
	return out, nil
}

// maxWatchGraymail bounds the campaigns held back as graymail that the
// watch lists.
const maxWatchGraymail = 1000

// graymailCampaigns lists the campaigns without not-spam reports, not in
// listed, with copies held back as graymail, most first.
func (r *Reader) graymailCampaigns(ctx context.Context, listed []Watched, o WatchOptions) ([]Watched, error) {
	if r.senders == nil {
		return nil, nil
	}
	hs, err := r.senders.GraymailCampaigns(ctx, maxWatchGraymail)
	if err != nil {
		return nil, err
	}
	seen := make(map[store.CampaignID]bool, len(listed))
	for _, w := range listed {
		seen[w.ID] = true
	}
	var out []Watched
	for _, h := range hs {
		if seen[h.ID] {
			continue
		}
		c, err := r.st.Record(ctx, h.ID)
		if err != nil || c.HamReports > 0 {
			continue // deleted meanwhile, or in the not-spam list
		}
		w := Watched{Campaign: *c, GraymailCopies: h.Copies}
		if w.HamSenders, err = r.campaignHamSenders(ctx, w.ID, o); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// markGraymail reads w.GraymailCopies when not read yet and sets
// w.Graymail (see Watched).
func (r *Reader) markGraymail(ctx context.Context, w *Watched) {
	p := &r.policy
	w.graymailReporters, w.authenticated = p.GraymailReporters, len(p.AuthservIDs) > 0
	if w.GraymailCopies == 0 && r.senders != nil {
		n, err := r.senders.CampaignGraymail(ctx, w.ID)
		if err != nil {
			r.log.Warn("false-positive watch: graymail copies", "campaign", w.ID, "err", err)
		}
		w.GraymailCopies = n
	}
	if w.State != store.StateActive || w.SpamReporters >= int64(p.GraymailReporters) {
		return
	}
	if w.GraymailCopies > 0 {
		w.Graymail = true
		return
	}
	for _, s := range w.HamSenders {
		if s.Ham >= p.GraymailHamMessages {
			w.Graymail = true
			return
		}
	}
}

// hamSenderCampaigns lists the campaigns without not-spam reports that
// have a sender that also sends ham (those with not-spam reports are in
// the second list): bounded by o.Senders × o.PerSender.
func (r *Reader) hamSenderCampaigns(ctx context.Context, o WatchOptions) ([]Watched, error) {
	if r.senders == nil {
		return nil, nil
	}
	seen := map[store.CampaignID]bool{}
	var out []Watched
	for _, hs := range r.senders.HamSenders(o.Senders, o.MinHamMessages) {
		ids, err := r.senders.SenderCampaigns(ctx, hs.Domain, o.PerSender)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			senders, err := r.campaignHamSenders(ctx, id, o)
			if err != nil {
				return nil, err
			}
			if len(senders) == 0 {
				continue
			}
			c, err := r.st.Record(ctx, id)
			if err != nil {
				continue // deleted meanwhile
			}
			if c.HamReports > 0 {
				continue
			}
			out = append(out, Watched{Campaign: *c, HamSenders: senders})
		}
	}
	slices.SortStableFunc(out, func(a, b Watched) int {
		if c := cmp.Compare(b.HamSenders[0].Ham, a.HamSenders[0].Ham); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// campaignHamSenders returns the sender domains of campaign id that also
// send ham, most ham first.
func (r *Reader) campaignHamSenders(ctx context.Context, id store.CampaignID, o WatchOptions) ([]HamSender, error) {
	if r.senders == nil {
		return nil, nil
	}
	ss, err := r.senders.CampaignSenders(ctx, id)
	if err != nil {
		// A malformed list hides the campaign's senders, not the watch.
		r.log.Warn("false-positive watch: senders", "campaign", id, "err", err)
		return nil, nil
	}
	var out []HamSender
	for _, s := range ss {
		ham := r.senders.HamMessages(s.Domain)
		if ham >= o.MinHamMessages && float64(ham) >= o.HamRatio*float64(s.Messages) {
			out = append(out, HamSender{Domain: s.Domain, Copies: s.Messages, Ham: ham})
		}
	}
	slices.SortFunc(out, func(a, b HamSender) int {
		if c := cmp.Compare(b.Ham, a.Ham); c != 0 {
			return c
		}
		return cmp.Compare(a.Domain, b.Domain)
	})
	return out, nil
}
