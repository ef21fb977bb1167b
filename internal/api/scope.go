package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
)

// Scoped tokens (docs/SECURITY.md, "API tokens").
//
// Every /v1 request carries a bearer token, and each token has a scope:
//
//   - admin (Options.Token, the api-token, and tokens so configured):
//     every route;
//   - read: the GET routes that read campaigns, the store's counts and
//     the fleet's status, and dry-run checks (POST /v1/check without
//     record);
//   - report: POST /v1/reports only, as one fixed reporter
//     (Token.Reporter; a request naming another gets 403) or, with
//     Reporter "*", as the reporter each request names (a webmail that
//     authenticates its own users).
//
// A valid token outside its scope gets 403; an unknown one 401.

// Scope is what a token may do.
type Scope int

// Scopes.
const (
	ScopeReport Scope = iota + 1 // POST /v1/reports
	ScopeRead                    // read campaigns, dry-run checks
	ScopeAdmin                   // everything
)

// AnyReporter as a report token's Reporter lets each request name its
// reporter.
const AnyReporter = "*"

func (s Scope) String() string {
	switch s {
	case ScopeReport:
		return "report"
	case ScopeRead:
		return "read"
	case ScopeAdmin:
		return "admin"
	}
	return fmt.Sprintf("scope(%d)", int(s))
}

// ParseScope reads "report", "read" or "admin".
func ParseScope(s string) (Scope, error) {
	for _, sc := range []Scope{ScopeReport, ScopeRead, ScopeAdmin} {
		if s == sc.String() {
			return sc, nil
		}
	}
	return 0, fmt.Errorf("unknown token scope %q (report, read or admin)", s)
}

// Token is one bearer token of the API with its scope.
type Token struct {
	// Name says which token it is in logs, never the secret.
	Name   string
	Secret string
	Scope  Scope
	// Reporter, for the report scope: the reporter id its reports count
	// under, or AnyReporter.
	Reporter string
}

// hashedToken is a Token with its secret hashed, compared in constant
// time whatever its length.
type hashedToken struct {
	Token
	sum [32]byte
}

// authenticate returns the token whose secret is got, comparing it with
// every token in constant time.
func authenticate(tokens []hashedToken, got string) (*hashedToken, bool) {
	sum := sha256.Sum256([]byte(got))
	var found *hashedToken
	for i := range tokens {
		if subtle.ConstantTimeCompare(sum[:], tokens[i].sum[:]) == 1 && found == nil {
			found = &tokens[i]
		}
	}
	return found, found != nil
}

type tokenKey struct{}

// tokenOf returns the token a request was authenticated with (nil on the
// report socket, which has none).
func tokenOf(r *http.Request) *hashedToken {
	t, _ := r.Context().Value(tokenKey{}).(*hashedToken)
	return t
}

// permits says whether a token of scope s may use a route needing need.
func permits(s, need Scope) bool { return s == ScopeAdmin || s == need }

// need wraps a route: the request's token must permit scope need.
func (h *handler) need(need Scope, f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if t := tokenOf(r); t != nil && !permits(t.Scope, need) {
			h.fail(w, r, http.StatusForbidden, fmt.Errorf("token %q (scope %s) may not %s %s: it needs the %s scope", t.Name, t.Scope, r.Method, r.URL.Path, need))
			return
		}
		f(w, r)
	}
}

// withToken puts the authenticated token in the request's context.
func withToken(r *http.Request, t *hashedToken) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), tokenKey{}, t))
}
