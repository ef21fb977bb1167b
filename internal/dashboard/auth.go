package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
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

// limiter bounds login attempts per client address and overall.
type limiter struct {
	mu      sync.Mutex
	every   time.Duration
	burst   int
	clients map[string]*rate.Limiter
	all     *rate.Limiter
}

// maxClients bounds the per-address limiters kept; past it they start
// again (the overall limit still holds).
const maxClients = 4096

func newLimiter(every time.Duration, burst int) *limiter {
	return &limiter{every: every, burst: burst, clients: map[string]*rate.Limiter{},
		all: rate.NewLimiter(rate.Every(every/10), burst*10)}
}

func (l *limiter) allow(r *http.Request, now time.Time) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.clients[host]
	if c == nil {
		if len(l.clients) >= maxClients {
			clear(l.clients)
		}
		c = rate.NewLimiter(rate.Every(l.every), l.burst)
		l.clients[host] = c
	}
	return c.AllowN(now, 1) && l.all.AllowN(now, 1)
}

// validCSRF compares a form's token with the session's in constant time.
func validCSRF(se *session, got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(se.csrf)) == 1
}
