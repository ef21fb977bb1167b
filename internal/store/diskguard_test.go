package store

import (
	"errors"
	"sync/atomic"
	"testing"
)

// The guard refuses writes below the reserve with ErrDiskFull while reads
// go on, lets them resume when space returns, and a store opened on a full
// disk comes up read-only. The free space is injected (the filesystem is
// real: test/e2e/diskfull.sh fills one).
func TestDiskFullGuard(t *testing.T) {
	const reserve = 64 << 20
	var free atomic.Int64
	free.Store(100 << 20) // under twice the reserve: measured on every write
	dir := t.TempDir()
	opts := Options{MinFreeBytes: reserve, FreeSpace: func(string) (int64, error) { return free.Load(), nil }}
	s := openTest(t, dir, opts)
	id := mustReport(t, s, spam("alice", t0, "k1", "k2")).Campaign

	free.Store(reserve - 1)
	_, err := s.Report(ctx, spam("bob", t0, "k3"))
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("report on a full disk: %v, want ErrDiskFull", err)
	}
	if got := lookupOne(t, s, "k1"); got != id {
		t.Fatalf("lookup on a full disk: campaign %d, want %d", got, id)
	}
	if err := s.RecordHit(ctx, id, "reject", t0); err != nil {
		t.Fatalf("hit on a full disk: %v", err) // kept in memory
	}
	if err := s.FlushHits(ctx); err != nil {
		t.Fatalf("flush on a full disk: %v", err) // postponed
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.DiskFull || st.DiskFree != reserve-1 || st.WritesRefused < 1 {
		t.Errorf("stats %+v: want disk full, %d free, writes refused", st, reserve-1)
	}

	free.Store(reserve + 1<<20)
	mustReport(t, s, spam("bob", t0, "k3"))
	if err := s.FlushHits(ctx); err != nil {
		t.Fatal(err)
	}
	if c := mustGet(t, s, id); c.Messages != 1 {
		t.Errorf("hit counted %d times after space returned, want 1", c.Messages)
	}
	if st, _ := s.Stats(ctx); st.DiskFull {
		t.Errorf("stats %+v: still full", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Opened on a full disk: read-only, reads work, writes say why.
	free.Store(reserve / 2)
	ro := openTest(t, dir, opts)
	if got := lookupOne(t, ro, "k3"); got == 0 {
		t.Fatal("lookup after a read-only start found nothing")
	}
	_, err = ro.Report(ctx, spam("carol", t0, "k4"))
	if !errors.Is(err, ErrDiskFull) || !errors.Is(err, ErrReadOnly) {
		t.Fatalf("report after a read-only start: %v, want ErrDiskFull and ErrReadOnly", err)
	}
	if _, full, _ := ro.DiskState(); !full {
		t.Error("DiskState does not say full")
	}
}

// The guard's decision, table-driven.
func TestDiskGuardCheck(t *testing.T) {
	tests := []struct {
		name    string
		free    int64
		err     error
		refused bool
	}{
		{"plenty", 1 << 30, nil, false},
		{"just above", 101, nil, false},
		{"at the reserve", 100, nil, false},
		{"below", 99, nil, true},
		{"empty", 0, nil, true},
		{"unknown", 0, errors.New("statfs failed"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newDiskGuard("d", Options{MinFreeBytes: 100, Logger: testLogger(t),
				FreeSpace: func(string) (int64, error) { return tc.free, tc.err }})
			err := g.check()
			if got := errors.Is(err, ErrDiskFull); got != tc.refused {
				t.Fatalf("check with %d free (err %v): %v", tc.free, tc.err, err)
			}
		})
	}
	if g := newDiskGuard("d", Options{MinFreeBytes: -1}); g.check() != nil {
		t.Error("a disabled guard refused")
	}
}
