package api

import (
	"log"
	"net/http"
	"time"
)

// Defaults of ServerOptions.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = time.Minute
	DefaultWriteTimeout      = time.Minute
	DefaultIdleTimeout       = 30 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
)

// ServerOptions bound the HTTP server's connections. Zero values select
// the defaults.
type ServerOptions struct {
	// ReadHeaderTimeout bounds reading a request's headers (a connection
	// that sends them slowly, or nothing, is closed). Default 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included. Default 1m.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request headers to
	// the end of the response; keep it above Options.RequestTimeout.
	// Default 1m.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle that long. Default 30s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request headers. Default 64 KiB.
	MaxHeaderBytes int
	// MaxBody bounds every request body, on every route (the /v1 handler
	// applies its own Options.MaxBody too). Default DefaultMaxBody.
	MaxBody int64
	// ErrorLog receives the server's own errors. Default: the log package.
	ErrorLog *log.Logger
	// MaxConnAge: see ConnLimits.MaxAge (the server reads the accept
	// time LimitListener records). Default DefaultMaxConnAge.
	MaxConnAge time.Duration
}

// NewServer returns an HTTP server for h with the bounds of o: a client
// can neither hold a connection without sending a request, nor keep one
// past MaxConnAge, nor send an unbounded request. Serve it on a
// LimitListener to bound the number of connections too.
func NewServer(h http.Handler, o ServerOptions) *http.Server {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.MaxConnAge <= 0 {
		o.MaxConnAge = DefaultMaxConnAge
	}
	limit, maxAge := o.MaxBody, o.MaxConnAge
	return &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			closeIfOld(w, r, maxAge)
			h.ServeHTTP(w, r)
		}),
		ConnContext:       connContext,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ErrorLog:          o.ErrorLog,
	}
}
