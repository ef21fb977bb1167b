// Package testutil holds helpers shared by the tests of several packages.
// No product package imports it (internal/archtest).
package testutil

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
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

// FreeAddrs returns n distinct loopback TCP addresses that are free now,
// for servers a test configures and starts later. The ports are drawn
// below Linux's default ephemeral range (32768–60999), so the kernel does
// not hand them to another process's outgoing connection or port-0
// listener in between, and every listener is held until all n are chosen,
// so two picks never collide.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	const lo, hi = 20000, 32768
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for tries := 0; len(held) < n; tries++ {
		if tries == 1000*n {
			t.Fatalf("testutil: no %d free loopback ports in %d–%d", n, lo, hi-1)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", lo+rand.IntN(hi-lo)))
		if err != nil {
			continue
		}
		held = append(held, l)
	}
	addrs := make([]string, n)
	for i, l := range held {
		addrs[i] = l.Addr().String()
	}
	return addrs
}

// FreePorts is FreeAddrs' ports.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i, a := range FreeAddrs(t, n) {
		_, p, _ := net.SplitHostPort(a)
		ports[i], _ = strconv.Atoi(p)
	}
	return ports
}

// SameWhenConcurrent calls sign for the inputs 0..len(want)-1 from
// workers goroutines, rounds times each input per goroutine, and fails
// when the string of a result (str), taken after every call returned,
// differs from want: a result must share no pooled memory that a later
// call overwrites. Run it under -race too.
func SameWhenConcurrent[R any](t testing.TB, want []string, workers, rounds int, sign func(i int) R, str func(R) string) {
	t.Helper()
	n := len(want)
	got := make([][]R, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := range rounds * n {
				got[w] = append(got[w], sign((k*(w+1))%n))
			}
		})
	}
	wg.Wait()
	for w := range workers {
		for k, res := range got[w] {
			i := (k * (w + 1)) % n
			if g := str(res); g != want[i] {
				t.Fatalf("worker %d, input %d:\n%s\nwant\n%s", w, i, g, want[i])
			}
		}
	}
}
