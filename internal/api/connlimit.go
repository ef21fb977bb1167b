package api

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Defaults of ConnLimits.
const (
	DefaultMaxConns        = 512
	DefaultMaxConnsPerAddr = 64
	DefaultMaxConnAge      = 10 * time.Minute
)

// ConnLimits bound the HTTP listener's connections, so that a client
// cannot take the process's file descriptors from the milter (idle
// keep-alive connections by the thousand), nor hold one connection
// forever by sending a request just before each idle timeout.
type ConnLimits struct {
	// Max bounds the open connections. A connection past it is closed as
	// soon as it is accepted. Default DefaultMaxConns.
	Max int
	// PerAddr bounds the open connections of one client IP address.
	// Default DefaultMaxConnsPerAddr.
	PerAddr int
	// MaxAge closes a keep-alive connection after the first answer given
	// once it is that old (Connection: close). Default DefaultMaxConnAge.
	MaxAge time.Duration
	// OnRefused is called for each connection closed at once (reason
	// "total" or "address"); nil: nothing.
	OnRefused func(reason string)
	// Logger receives one line per burst of refusals (at most one a
	// minute). Default: discard.
	Logger *slog.Logger
}

func (l *ConnLimits) defaults() {
	if l.Max <= 0 {
		l.Max = DefaultMaxConns
	}
	if l.PerAddr <= 0 {
		l.PerAddr = DefaultMaxConnsPerAddr
	}
	if l.PerAddr > l.Max {
		l.PerAddr = l.Max
	}
	if l.MaxAge <= 0 {
		l.MaxAge = DefaultMaxConnAge
	}
	if l.Logger == nil {
		l.Logger = slog.New(slog.DiscardHandler)
	}
}

// LimitListener returns ln with the bounds of l: Accept closes, at once,
// the connections past l.Max or past l.PerAddr for their client address,
// and returns the others, which carry their accept time for MaxAge
// (NewServer reads it).
func LimitListener(ln net.Listener, l ConnLimits) net.Listener {
	l.defaults()
	return &limitListener{Listener: ln, l: l, perAddr: make(map[netip.Addr]int)}
}

type limitListener struct {
	net.Listener
	l ConnLimits

	mu         sync.Mutex
	total      int
	perAddr    map[netip.Addr]int
	refused    int       // since the last log line
	lastLogged time.Time // of that line
}

// Accept returns the next connection within the bounds.
func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := remoteAddr(c)
		if reason := ll.admit(addr); reason != "" {
			c.Close()
			ll.refuse(reason, addr)
			continue
		}
		return &limitedConn{Conn: c, ll: ll, addr: addr, accepted: time.Now()}, nil
	}
}

// admit counts a connection of addr in, or says why not.
func (ll *limitListener) admit(addr netip.Addr) string {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	switch {
	case ll.total >= ll.l.Max:
		return "total"
	case ll.perAddr[addr] >= ll.l.PerAddr:
		return "address"
	}
	ll.total++
	ll.perAddr[addr]++
	return ""
}

func (ll *limitListener) release(addr netip.Addr) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.total--
	if ll.perAddr[addr]--; ll.perAddr[addr] <= 0 {
		delete(ll.perAddr, addr)
	}
}

// refuse counts a refusal and logs the first of each minute.
func (ll *limitListener) refuse(reason string, addr netip.Addr) {
	if ll.l.OnRefused != nil {
		ll.l.OnRefused(reason)
	}
	ll.mu.Lock()
	ll.refused++
	now := time.Now()
	if now.Sub(ll.lastLogged) < time.Minute {
		ll.mu.Unlock()
		return
	}
	n, total := ll.refused, ll.total
	ll.refused, ll.lastLogged = 0, now
	ll.mu.Unlock()
	ll.l.Logger.Warn("http: connections refused at the listener's bounds (http.max_connections, http.max_connections_per_address)",
		"refused", n, "last_reason", reason, "last_remote", addr.String(), "open", total,
		"max", ll.l.Max, "per_address", ll.l.PerAddr)
}

// remoteAddr is the client IP of c (the zero Addr when not IP).
func remoteAddr(c net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// limitedConn releases its place in the bounds once, when closed.
type limitedConn struct {
	net.Conn
	ll       *limitListener
	addr     netip.Addr
	accepted time.Time
	once     sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.ll.release(c.addr) })
	return err
}

// acceptedKey is the context key of a connection's accept time.
type acceptedKey struct{}

// connContext records a limited connection's accept time in the context
// of its requests.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, acceptedKey{}, lc.accepted)
	}
	return ctx
}

// closeIfOld asks the server to close the connection of r after this
// answer when it was accepted more than maxAge ago: a client that sends a
// request before every idle timeout cannot keep it forever.
func closeIfOld(w http.ResponseWriter, r *http.Request, maxAge time.Duration) {
	if at, ok := r.Context().Value(acceptedKey{}).(time.Time); ok && time.Since(at) > maxAge {
		w.Header().Set("Connection", "close")
	}
}
