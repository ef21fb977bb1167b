package campaign

import (
	"fmt"
	"github.com/nddmilter/nddmilter/internal/store"
	"slices"
	"strings"
	"sync"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/pipeline"
)

// Graymail (docs/POLICY.md, "Graymail").
//
// Users report mail they once subscribed to: newsletters, mailing-list
// posts, notifications, and the replies of a discussion. Such mail
// carries signs of legitimate bulk mail or of a conversation: it answers
// another message (In-Reply-To, References) or says it is a list's mail
// (Precedence: list); it came through a mailing list (List-Id,
// List-Post, …) that delivered at least Policy.GraymailHamMessages
// accepted messages here, or was sent to such a list's posting address
// (a reply to the list and its members), or its sender domain delivered
// them (the ham-senders table, senders.go). A checked copy with such
// signs of a campaign that fewer than Policy.GraymailReporters accounts
// reported stays at accept (the reporters' own copies are theirs: their
// Junk folders), unless it is a near-copy of the reported text
// (nearCopy), and it is then never more than tagged. A campaign that
// many accounts reported is decided as any other.
//
// A spammer writes headers as easily as any other: a list's headers are
// a sign only once the list delivered accepted mail here (spam that
// carries a real list's List-Id is common, and would be held back with
// it). The reply and Precedence: list headers are signs from the first
// message, since spam rarely carries them, unless
// Policy.GraymailHistoryOnly; with Policy.AuthservIDs only for a sender
// domain that authenticated. What a forged one gains a spammer is
// bounded: the close copies of a campaign are still tagged, and
// GraymailReporters reporters lift the guard.

// Graymail lists the signs of legitimate bulk mail a checked message
// carries.
type Graymail struct {
	// List is the mailing list the message came through (its whole
	// identifier, mime's ListID) when it delivered at least
	// Policy.GraymailHamMessages accepted messages (ListHam of them,
	// counted in the store).
	List    string `json:"list,omitempty"`
	ListHam int64  `json:"list_ham,omitempty"`
	// Addressed is set when List is the posting address of a list the
	// message was sent to (in To or Cc) rather than came through.
	Addressed bool `json:"addressed,omitempty"`
	// Reply is set when the message answers another (an In-Reply-To or
	// References field), ListMail when it says it is a list's mail
	// (Precedence: list); both only without Policy.GraymailHistoryOnly.
	Reply    bool `json:"reply,omitempty"`
	ListMail bool `json:"list_mail,omitempty"`
	// Bulk is set for a List-Unsubscribe or Precedence bulk/list/junk
	// header (no sign on its own: much spam carries one).
	Bulk bool `json:"bulk,omitempty"`
	// Sender is the message's sender domain when it sent at least
	// Policy.GraymailHamMessages accepted messages (SenderHam of them).
	Sender    string `json:"sender,omitempty"`
	SenderHam int64  `json:"sender_ham,omitempty"`
	// Authenticated names the result that vouched for the list's or the
	// sender's domain when Policy.AuthservIDs asks for one, e.g. "dkim
	// example.org by mx.example.net".
	Authenticated string `json:"authenticated,omitempty"`
}

// String names the signs: "list spamassassin-talk (12 accepted
// messages), bulk-mail header, sender example.org (120 accepted
// messages)".
func (g *Graymail) String() string {
	var parts []string
	switch {
	case g.List != "" && g.Addressed:
		parts = append(parts, fmt.Sprintf("sent to list %s (%d accepted messages)", g.List, g.ListHam))
	case g.List != "":
		parts = append(parts, fmt.Sprintf("list %s (%d accepted messages)", g.List, g.ListHam))
	}
	if g.Reply {
		parts = append(parts, "In-Reply-To or References header")
	}
	if g.ListMail {
		parts = append(parts, "Precedence: list header")
	}
	if g.Bulk {
		parts = append(parts, "bulk-mail header")
	}
	if g.Sender != "" {
		parts = append(parts, fmt.Sprintf("sender %s (%d accepted messages)", g.Sender, g.SenderHam))
	}
	if g.Authenticated != "" {
		parts = append(parts, "authenticated: "+g.Authenticated)
	}
	return strings.Join(parts, ", ")
}

// graymailOf returns the graymail signs of m, nil when it has none.
func (e *core) graymailOf(m *pipeline.Message) *Graymail {
	var g Graymail
	if m.ListID != "" {
		if n := e.lists.count(m.ListID); n >= e.policy.GraymailHamMessages {
			if a, ok := e.policy.vouched(m.AuthPasses, listDomain(m.ListID)); ok {
				g.List, g.ListHam, g.Authenticated = m.ListID, n, a
			}
		}
	}
	if g.List == "" && m.ListID == "" {
		// A reply sent straight to a list's members as well as to the
		// list: no list headers, a known list's posting address in To or
		// Cc.
		for _, r := range m.Recipients {
			if n := e.lists.count(r); n >= e.policy.GraymailHamMessages {
				if a, ok := e.policy.vouched(m.AuthPasses, listDomain(r)); ok {
					g.List, g.ListHam, g.Authenticated, g.Addressed = r, n, a, true
					break
				}
			}
		}
	}
	if e.senders != nil {
		if d := SenderDomain(m.From); d != "" {
			if n := e.senders.HamMessages(d); n >= e.policy.GraymailHamMessages {
				if a, ok := e.policy.vouched(m.AuthPasses, d); ok {
					g.Sender, g.SenderHam = d, n
					if g.Authenticated == "" {
						g.Authenticated = a
					}
				}
			}
		}
	}
	if !e.policy.GraymailHistoryOnly && (m.Reply || m.Precedence == "list") {
		// Headers of a conversation or of a list's mail, vouched for
		// by the sender's domain.
		if a, ok := e.policy.vouched(m.AuthPasses, SenderDomain(m.From)); ok {
			g.Reply, g.ListMail = m.Reply, m.Precedence == "list"
			if g.Authenticated == "" {
				g.Authenticated = a
			}
		}
	}
	if g.List == "" && g.Sender == "" && !g.Reply && !g.ListMail {
		return nil
	}
	g.Bulk = m.Bulk
	return &g
}

// vouched says whether a list's or a sender's organizational domain
// (SenderDomain) counts as a graymail sign: always without
// Policy.AuthservIDs; with them, only when a passing DKIM or DMARC result
// that one of them added names a domain of the same organization (what
// DMARC calls relaxed alignment), which it then names.
func (p *Policy) vouched(passes []pipeline.AuthPass, org string) (string, bool) {
	if len(p.AuthservIDs) == 0 {
		return "", true
	}
	if org == "" {
		return "", false
	}
	for _, a := range passes {
		if slices.Contains(p.AuthservIDs, a.Serv) && SenderDomain("x@"+a.Domain) == org {
			return fmt.Sprintf("%s %s by %s", a.Method, a.Domain, a.Serv), true
		}
	}
	return "", false
}

// listDomain is the organizational domain of a list identifier: of
// "users.lists.example.org" or "list@example.org", example.org.
func listDomain(id string) string {
	if !strings.Contains(id, "@") {
		id = "x@" + id
	}
	return SenderDomain(id)
}

// listCounter counts the accepted messages that matched no campaign by
// the mailing list they came through: the store's list table
// (store.ListStore, kept across restarts), or a listTable in memory for a
// store without one.
type listCounter interface {
	record(list string)
	count(list string) int64
}

// storeLists is the store's list table as a listCounter.
type storeLists struct{ st store.ListStore }

func (s storeLists) record(list string)      { s.st.RecordListHam(list) }
func (s storeLists) count(list string) int64 { return s.st.ListHamMessages(list) }

// maxLists bounds the lists counted by a listTable.
const maxLists = 4096

// listTable counts the accepted messages that matched no campaign by the
// mailing list they came through, in memory (this process's own count; a
// restart starts it again): for a store that keeps no list table. When full, a new list takes the place of the
// least counted one, so that lists named once cannot keep out a list
// that delivers every day. It is safe for concurrent use.
type listTable struct {
	mu sync.Mutex
	n  map[string]int64
}

func newListTable() *listTable { return &listTable{n: map[string]int64{}} }

// record counts one accepted message of list.
func (t *listTable) record(list string) {
	if list == "" || len(list) > MaxReporterLen {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.n[list]; !ok && len(t.n) >= maxLists {
		least, ln := "", int64(-1)
		for k, v := range t.n {
			if ln < 0 || v < ln {
				least, ln = k, v
			}
		}
		delete(t.n, least)
	}
	t.n[list]++
}

// count is the accepted messages counted for list.
func (t *listTable) count(list string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[list]
}

// graymailLimit is the strongest action the policy allows on a graymail
// copy, measured in, of a campaign with spam distinct spam reporters
// (Reject when the campaign has enough reporters to be decided as any
// other).
func (p *Policy) graymailLimit(spam int64, in MatchInputs) action.Action {
	switch {
	case spam >= int64(p.GraymailReporters):
		return action.Reject
	case p.nearCopy(in):
		return action.Tag
	}
	return action.Accept
}

// nearCopy reports whether the measurements in say that the message is a
// near-copy of the reported text rather than a look-alike of it (another
// issue of the same newsletter, another post to the same list): its text
// similarity, the q-gram estimate (the share of distinct text shared; the
// ANDD estimate when the message has no q-gram sketch), reaches
// GraymailSimilarity with an I-Match signature in common (the set of
// distinct words agrees through one of the lexicons), GraymailSimilarity
// + 0.1 without one; with an I-Match signature and no similarity measured
// (a message too short for sketches), it is one. Look-alike issues of a
// newsletter share most of their words, in another order and with other
// details, which the q-grams tell apart. A short message whose whole
// content matched is one; its body or lead alone does not make one (a
// short post's body is often a signature or a quoted line).
func (p *Policy) nearCopy(in MatchInputs) bool {
	if in.Whole {
		return true
	}
	sim := in.QGram
	if sim < 0 {
		sim = in.ANDD
	}
	if in.Bags > 0 {
		return sim < 0 || sim >= p.GraymailSimilarity
	}
	return sim >= min(p.GraymailSimilarity+0.1, 1)
}
