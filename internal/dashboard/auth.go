package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Role is what a session may do.
type Role int

// Roles, weakest first.
const (
	RoleNone  Role = iota // not logged in
	RoleRead              // reads every page
	RoleAdmin             // also allows, un-allows and deletes campaigns
)

func (r Role) String() string {
	switch r {
	case RoleRead:
		return "read"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// Credential is a secret that logs in with a role. Name says which
// secret it is in the audit log (e.g. "api-token"), never the secret.
type Credential struct {
	Name   string
	Secret string
	Role   Role
}

// session is one logged-in browser.
type session struct {
	id      string
	who     string // the name typed at login (for the audit log), or the credential's
	cred    string // Credential.Name
	secret  [32]byte
	role    Role
	csrf    string
	expires time.Time
}

// sessions holds the logged-in sessions in memory (a restart logs
// everyone out), at most max of them: the oldest goes first.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	max int
}

func newToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *sessions) add(se *session, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		var oldest *session
		for _, o := range s.m {
			if o.expires.Before(now) {
				delete(s.m, o.id)
			} else if oldest == nil || o.expires.Before(oldest.expires) {
				oldest = o
			}
		}
		if len(s.m) >= s.max && oldest != nil {
			delete(s.m, oldest.id)
		}
	}
	s.m[se.id] = se
}

func (s *sessions) get(id string, now time.Time) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.m[id]
	if se == nil {
		return nil
	}
	if !now.Before(se.expires) {
		delete(s.m, id)
		return nil
	}
	c := *se
	return &c
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// keep drops the sessions whose credential is no longer valid with the
// same role (after a reload changed the credentials).
func (s *sessions) keep(creds []hashedCred) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, se := range s.m {
		ok := false
		for _, c := range creds {
			if c.sum == se.secret && c.role == se.role {
				ok = true
				break
			}
		}
		if !ok {
			delete(s.m, id)
		}
	}
}

// hashedCred is a Credential with its secret hashed, so that comparisons
// take the same time whatever the secret's length.
type hashedCred struct {
	name string
	sum  [32]byte
	role Role
}

func hashCreds(cs []Credential) []hashedCred {
	out := make([]hashedCred, 0, len(cs))
	for _, c := range cs {
		if c.Secret == "" || c.Role == RoleNone {
			continue
		}
		out = append(out, hashedCred{name: c.Name, sum: sha256.Sum256([]byte(c.Secret)), role: c.Role})
	}
	return out
}

// match returns the credential of secret (the strongest role when
// several have the same secret), comparing with every credential in
// constant time.
func match(creds []hashedCred, secret string) (hashedCred, bool) {
	got := sha256.Sum256([]byte(secret))
	var best hashedCred
	found := false
	for _, c := range creds {
		if subtle.ConstantTimeCompare(got[:], c.sum[:]) == 1 && (!found || c.role > best.role) {
			best, found = c, true
		}
	}
	return best, found
}

// limiter bounds login attempts without letting anyone lock a correct
// secret out (docs/SECURITY.md, "Dashboard"):
//
//   - the secret is always checked (in constant time);
//   - a wrong secret costs a token of its client address (an IPv6 address
//     counts by its /64), one of the name typed at login (lower case; ""
//     when none) and one of all clients together: LoginBurst at once,
//     then one per LoginInterval (ten times that overall). Once one of
//     them is spent, wrong secrets get 429 instead of 401;
//   - a correct secret is admitted whatever wrong attempts others made
//     from its address or under its name (behind ssh -L or a proxy every
//     client has the same address), up to its own hard limit: each login
//     costs a token of its credential at its client address,
//     LoginHardBurst at once, then one per LoginInterval, which bounds the
//     sessions one secret mints (they would push the others' out).
//
// Secrets are at least config.MinTokenLen characters: guessing is
// hopeless at any rate the HTTP server answers; the limits keep the audit
// log and the CPU quiet. Memory is bounded: each table keeps at most
// maxClients keys, dropping idle ones (whose bucket is full again) first,
// and starting over when every key is busy (the overall limit holds).
type limiter struct {
	mu    sync.Mutex
	addrs buckets // wrong secrets per client address
	names buckets // wrong secrets per name typed at login
	creds buckets // correct secrets per credential and client address
	all   *rate.Limiter
}

// maxClients bounds the keys of each of the limiter's tables.
const maxClients = 4096

func newLimiter(every time.Duration, burst, hardBurst int) *limiter {
	return &limiter{
		addrs: buckets{m: map[string]*rate.Limiter{}, every: every, burst: burst},
		names: buckets{m: map[string]*rate.Limiter{}, every: every, burst: burst},
		creds: buckets{m: map[string]*rate.Limiter{}, every: every, burst: hardBurst},
		all:   rate.NewLimiter(rate.Every(every/10), burst*10),
	}
}

// failed counts a wrong secret typed under name from r's client and says
// whether it is within the limits (false: answer 429).
func (l *limiter) failed(r *http.Request, name string, now time.Time) bool {
	addr := clientKey(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addrs.take(addr, now)
	n := l.names.take(strings.ToLower(name), now)
	all := l.all.AllowN(now, 1)
	return a && n && all
}

// admitted counts a login with credential cred from r's client and says
// whether it is within the credential's hard limit there.
func (l *limiter) admitted(r *http.Request, cred string, now time.Time) bool {
	key := cred + "\x00" + clientKey(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.creds.take(key, now)
}

// clientKey is the client address a request is limited by: its IP
// address, or the /64 network of an IPv6 one (a host often has a whole
// /64).
func clientKey(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// buckets are token buckets by key, at most maxClients of them.
type buckets struct {
	m     map[string]*rate.Limiter
	every time.Duration
	burst int
}

// take takes a token of key's bucket, and says whether there was one.
func (b *buckets) take(key string, now time.Time) bool {
	l := b.m[key]
	if l == nil {
		if len(b.m) >= maxClients {
			b.prune(now)
		}
		l = rate.NewLimiter(rate.Every(b.every), b.burst)
		b.m[key] = l
	}
	return l.AllowN(now, 1)
}

// prune drops the buckets that are full again (their key is idle), and
// every bucket when none is.
func (b *buckets) prune(now time.Time) {
	for k, l := range b.m {
		if l.TokensAt(now) >= float64(b.burst) {
			delete(b.m, k)
		}
	}
	if len(b.m) >= maxClients {
		clear(b.m)
	}
}

// validCSRF compares a form's token with the session's in constant time.
func validCSRF(se *session, got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(se.csrf)) == 1
}
