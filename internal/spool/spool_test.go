package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func open(t *testing.T, o Options) *Spool {
	t.Helper()
	s, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPutDrain(t *testing.T) {
	s := open(t, Options{})
	raw := []byte("Subject: hi\r\n\r\nbody\nwith lines\n")
	for i, rep := range []string{"alice@example.org", "bob with spaces&=%", ""} {
		if _, err := s.Put(Report{Kind: "spam", Reporter: rep, Raw: raw, Time: time.Unix(int64(1000+i), 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), "tmp")); len(ents) != 0 {
		t.Errorf("tmp/ not empty: %v", ents)
	}
	var got []string
	st, err := drain(s, func(_ context.Context, r Report) error {
		if !bytes.Equal(r.Raw, raw) || r.Kind != "spam" {
			return fmt.Errorf("read back %+v", r)
		}
		got = append(got, r.Reporter)
		return nil
	})
	if err != nil || st != (DrainStats{Stored: 3}) {
		t.Fatalf("Drain: %+v, %v", st, err)
	}
	if fmt.Sprint(got) != fmt.Sprint([]string{"alice@example.org", "bob with spaces&=%", ""}) {
		t.Errorf("order or reporters: %q", got)
	}
	if p, _ := s.Pending(); len(p) != 0 {
		t.Errorf("left after drain: %v", p)
	}
}

func TestDrainKeepsOnFailure(t *testing.T) {
	s := open(t, Options{})
	for range 3 {
		if _, err := s.Put(Report{Kind: "ham", Reporter: "a", Raw: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	down := errors.New("store down")
	calls := 0
	st, err := drain(s, func(context.Context, Report) error {
		calls++
		if calls == 2 {
			return down
		}
		return nil
	})
	if !errors.Is(err, down) || st.Stored != 1 {
		t.Fatalf("Drain: %+v, %v", st, err)
	}
	if p, _ := s.Pending(); len(p) != 2 {
		t.Fatalf("pending %d, want 2 (the failed one kept)", len(p))
	}
}

func TestDrainSetsAside(t *testing.T) {
	s := open(t, Options{})
	if err := os.WriteFile(filepath.Join(s.Dir(), "new", "1.garbage"), []byte("no header"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(Report{Kind: "bogus", Reporter: "a", Raw: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	st, err := drain(s, func(_ context.Context, r Report) error {
		return fmt.Errorf("kind %q: %w", r.Kind, ErrReject)
	})
	if err != nil || st != (DrainStats{SetAside: 2}) {
		t.Fatalf("Drain: %+v, %v", st, err)
	}
	bad, _ := os.ReadDir(filepath.Join(s.Dir(), "bad"))
	if p, _ := s.Pending(); len(p) != 0 || len(bad) != 2 {
		t.Fatalf("pending %v, bad %v", p, bad)
	}
}

func TestBounds(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		puts int
		size int
		want error
	}{
		{"files", Options{MaxFiles: 2}, 3, 10, ErrFull},
		{"bytes", Options{MaxBytes: 100}, 3, 40, ErrFull},
		{"message", Options{MaxMessage: 10}, 1, 11, ErrTooLarge},
		{"within", Options{MaxFiles: 3}, 3, 10, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, tc.o)
			var err error
			for range tc.puts {
				if _, err = s.Put(Report{Kind: "spam", Raw: bytes.Repeat([]byte("a"), tc.size)}); err != nil {
					break
				}
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestOpenKeepsGroupMode(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, os.ModeSetgid|0o770); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "new"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(os.ModePerm|os.ModeSetgid|os.ModeSticky) != 0o770|os.ModeSetgid|os.ModeSticky {
		t.Errorf("new/ mode %v, want the spool's and sticky", fi.Mode())
	}
	// Only Drain writes bad/: no group write.
	if fi, err := os.Stat(filepath.Join(dir, "bad")); err != nil || fi.Mode()&(os.ModePerm|os.ModeSetgid) != 0o750|os.ModeSetgid {
		t.Errorf("bad/ mode %v, %v", fi.Mode(), err)
	}
	if _, err := Open(filepath.Join(dir, "missing"), Options{}); err == nil {
		t.Error("missing spool opened")
	}
}
