package api

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// HostCheck keeps DNS rebinding out of the HTTP API and the dashboard: a
// web page whose own host name an attacker re-points at the daemon's
// address gets its requests there, with its host name in the Host header.
// Those are answered 421 Misdirected Request. A Host that is an IP
// address literal is always accepted (rebinding needs a name), as are
// localhost, the host of http.listen and the configured names
// (http.allowed_hosts); so is a request without Host (HTTP/1.0: not a
// browser).
type HostCheck struct {
	names map[string]bool
}

// NewHostCheck accepts, besides IP literals and localhost, the host of
// listen (HOST:PORT) and names (host names, any case, no port).
func NewHostCheck(listen string, names []string) *HostCheck {
	c := &HostCheck{names: map[string]bool{"localhost": true}}
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" {
		c.names[canonicalHost(h)] = true
	}
	for _, n := range names {
		c.names[canonicalHost(n)] = true
	}
	return c
}

// canonicalHost is a host name in lower case without a trailing dot.
func canonicalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

// Allowed says whether a request's Host header (host or host:port) is
// accepted.
func (c *HostCheck) Allowed(hostport string) bool {
	if hostport == "" {
		return true
	}
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		h = h[1 : len(h)-1]
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return c.names[canonicalHost(h)]
}

// Handler serves next for requests whose Host is accepted, and answers
// the others 421 Misdirected Request.
func (c *HostCheck) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.Allowed(r.Host) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusMisdirectedRequest)
			_, _ = w.Write([]byte("421 misdirected request: this host name is not served here (add it to http.allowed_hosts)\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
