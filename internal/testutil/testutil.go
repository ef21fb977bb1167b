// Package testutil holds helpers shared by the tests of several packages.
// No product package imports it (internal/archtest).
package testutil

import (
	"bytes"
	"sync"
)

// LockedBuffer is a bytes.Buffer safe for concurrent use: a log sink that
// a server's goroutines write while the test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
