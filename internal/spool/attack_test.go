//go:build unix

package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The attacks of a member of the spool's group (who may rename, create
// and remove entries of its 2770 directories, but owns none of them):
// each must leave everything outside the spool untouched and get no
// report in.

// reportFile is a well-formed spool file naming reporter.
func reportFile(reporter string) []byte {
	return []byte("kind=spam&reporter=" + reporter + "&time=2024-05-01T10%3A00%3A00Z&v=1\nSubject: forged\r\n\r\nbody\r\n")
}

// outsideDir makes a directory outside the spool standing for the
// store (an API token, a Badger table and manifest), its files dated
// two hours back (older than tmp/'s stale age), and returns it with its
// contents.
func outsideDir(t *testing.T) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	want := map[string]string{
		"api-token":   "admin-token-of-the-daemon\n",
		"000001.vlog": "badger value log",
		"MANIFEST":    "badger manifest",
		"report":      string(reportFile("victim@example.org")),
	}
	old := time.Now().Add(-2 * time.Hour)
	for name, body := range want {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	return dir, want
}

// untouched fails unless dir holds exactly want, one link each.
func untouched(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("outside directory: %v", err)
	}
	if len(ents) != len(want) {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("outside directory holds %v, want %d files", names, len(want))
	}
	for name, body := range want {
		p := filepath.Join(dir, name)
		got, err := os.ReadFile(p)
		if err != nil || string(got) != body {
			t.Errorf("outside %s: %q, %v; want it untouched", name, got, err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err == nil && st.Nlink != 1 {
			t.Errorf("outside %s has %d links", name, st.Nlink)
		}
	}
}

// swap renames the spool's sub to sub.orig and puts a symlink to target
// in its place, as a group member can.
func swap(t *testing.T, dir, sub, target string) {
	t.Helper()
	p := filepath.Join(dir, sub)
	if err := os.Rename(p, p+".orig"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: files of another owner are made with chown")
	}
}

// otherUID owns the files of a user the spool does not trust.
const otherUID = 4242

func TestDrainRefusesSwappedDirectories(t *testing.T) {
	tests := []struct {
		name string
		// attack prepares the spool in dir, given the outside directory.
		attack func(t *testing.T, dir, outside string)
	}{
		{"bad/ a symlink to the store, a file named api-token in new/", func(t *testing.T, dir, outside string) {
			if err := os.WriteFile(filepath.Join(dir, "new", "api-token"), []byte("attacker-token\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			swap(t, dir, "bad", outside)
		}},
		{"new/ a symlink to the store", func(t *testing.T, dir, outside string) {
			swap(t, dir, "new", outside)
		}},
		{"tmp/ a symlink to a directory of old files", func(t *testing.T, dir, outside string) {
			swap(t, dir, "tmp", outside)
		}},
		{"new/ a directory of another owner", func(t *testing.T, dir, outside string) {
			needRoot(t)
			p := filepath.Join(dir, "new")
			if err := os.Rename(p, p+".orig"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o770); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(p, "1.forged"), reportFile("forged@example.org"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, otherUID, -1); err != nil {
				t.Fatal(err)
			}
		}},
		{"bad/ a fifo", func(t *testing.T, dir, outside string) {
			if err := os.WriteFile(filepath.Join(dir, "new", "1.garbage"), []byte("not a report"), 0o644); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "bad")
			if err := os.Rename(p, p+".orig"); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkfifo(p, 0o666); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			outside, want := outsideDir(t)
			s := open(t, Options{})
			// A legitimate report waits (in new/, or in new.orig/ once swapped).
			name, err := s.Put(Report{Kind: "spam", Reporter: "alice@example.org", Raw: []byte("Subject: hi\r\n\r\nx\r\n")})
			if err != nil {
				t.Fatal(err)
			}
			tc.attack(t, s.Dir(), outside)
			var got []string
			st, err := drainWithin(t, s, func(_ context.Context, r Report) error {
				got = append(got, r.Reporter)
				return nil
			})
			if !errors.Is(err, ErrUnsafe) || st.Refused != 1 || st.Stored != 0 {
				t.Errorf("Drain: %+v, %v; want the spool refused (ErrUnsafe)", st, err)
			}
			if len(got) != 0 {
				t.Errorf("stored reports of %q", got)
			}
			untouched(t, outside, want)
			// Nothing was moved or removed in the spool either: the
			// pending report waits in new/ (new.orig/ once renamed).
			home := filepath.Join(s.Dir(), "new")
			if _, err := os.Lstat(home + ".orig"); err == nil {
				home += ".orig"
			}
			if _, err := os.Lstat(filepath.Join(home, name)); err != nil {
				t.Errorf("the pending report: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(s.Dir(), "new", "api-token")); strings.Contains(tc.name, "api-token") && err != nil {
				t.Errorf("new/api-token moved: %v", err)
			}
		})
	}
}

// drainWithin fails the test when Drain blocks (on a fifo) for 10 s.
func drainWithin(t *testing.T, s *Spool, store func(context.Context, Report) error) (DrainStats, error) {
	t.Helper()
	type res struct {
		st  DrainStats
		err error
	}
	done := make(chan res, 1)
	go func() {
		st, err := drain(s, store)
		done <- res{st, err}
	}()
	select {
	case r := <-done:
		return r.st, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("Drain blocked")
	}
	return DrainStats{}, nil
}

func TestDrainRefusesEntries(t *testing.T) {
	tests := []struct {
		name string
		// make puts the entry name in new/, given the outside directory.
		make func(t *testing.T, p, outside string)
		root bool
	}{
		{"symlink to a report outside", func(t *testing.T, p, outside string) {
			if err := os.Symlink(filepath.Join(outside, "report"), p); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"symlink to the store's api-token", func(t *testing.T, p, outside string) {
			if err := os.Symlink(filepath.Join(outside, "api-token"), p); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"symlink to a directory", func(t *testing.T, p, outside string) {
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"hard link to a report outside", func(t *testing.T, p, outside string) {
			if err := os.Link(filepath.Join(outside, "report"), p); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"fifo", func(t *testing.T, p, outside string) {
			if err := unix.Mkfifo(p, 0o666); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"empty directory", func(t *testing.T, p, outside string) {
			if err := os.Mkdir(p, 0o777); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"report that others may rewrite", func(t *testing.T, p, outside string) {
			if err := os.WriteFile(p, reportFile("forged@example.org"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, 0o666); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"report of a user that may not report", func(t *testing.T, p, outside string) {
			if err := os.WriteFile(p, reportFile("forged@example.org"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, otherUID, otherUID); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				needRoot(t)
			}
			outside, want := outsideDir(t)
			s := open(t, Options{})
			if _, err := s.Put(Report{Kind: "spam", Reporter: "alice@example.org", Raw: []byte("Subject: hi\r\n\r\nx\r\n"), Time: time.Unix(1, 0)}); err != nil {
				t.Fatal(err)
			}
			entry := filepath.Join(s.Dir(), "new", "2000000000000000000.1.attack")
			tc.make(t, entry, outside)
			var got []string
			st, err := drainWithin(t, s, func(_ context.Context, r Report) error {
				got = append(got, r.Reporter)
				return nil
			})
			if err != nil || st != (DrainStats{Stored: 1, Refused: 1}) {
				t.Errorf("Drain: %+v, %v; want the report stored and the entry refused", st, err)
			}
			if fmt.Sprint(got) != "[alice@example.org]" {
				t.Errorf("stored reports of %q, want alice's only", got)
			}
			if _, err := os.Lstat(entry); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("refused entry still in new/: %v", err)
			}
			if bad, _ := os.ReadDir(filepath.Join(s.Dir(), "bad")); len(bad) != 0 {
				t.Errorf("bad/ holds %v: refused entries are not kept", bad)
			}
			untouched(t, outside, want)
		})
	}
}

func TestPutRefusesSwappedDirectories(t *testing.T) {
	tests := []struct {
		name   string
		attack func(t *testing.T, dir, outside string)
	}{
		{"tmp/ a symlink", func(t *testing.T, dir, outside string) { swap(t, dir, "tmp", outside) }},
		{"new/ a symlink", func(t *testing.T, dir, outside string) { swap(t, dir, "new", outside) }},
		{"new/ a directory of another owner", func(t *testing.T, dir, outside string) {
			needRoot(t)
			p := filepath.Join(dir, "new")
			if err := os.Rename(p, p+".orig"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, otherUID, -1); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			outside, want := outsideDir(t)
			s := open(t, Options{})
			tc.attack(t, s.Dir(), outside)
			if _, err := s.Put(Report{Kind: "spam", Reporter: "alice@example.org", Raw: []byte("x")}); !errors.Is(err, ErrUnsafe) {
				t.Errorf("Put: %v, want ErrUnsafe", err)
			}
			untouched(t, outside, want)
			for _, sub := range []string{"tmp.orig", "new.orig"} {
				if ents, _ := os.ReadDir(filepath.Join(s.Dir(), sub)); len(ents) != 0 {
					t.Errorf("%s/ holds %d entries", sub, len(ents))
				}
			}
		})
	}
}

func TestOpenRefusesUnsafeRoot(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "spool")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link, Options{}); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Open of a symlink: %v, want ErrUnsafe", err)
	}
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(open, Options{}); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Open of a world-writable directory: %v, want ErrUnsafe", err)
	}
}

// Every refusal is logged with its reason and the entry's owner; a file
// is trusted only for its owner (Options.Admit).
func TestDrainLogsRefusals(t *testing.T) {
	var logs bytes.Buffer
	self := uint32(os.Geteuid())
	s := open(t, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Admit: func(uid uint32) bool { return uid != self }})
	if _, err := s.Put(Report{Kind: "spam", Reporter: "alice@example.org", Raw: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(s.Dir(), "new", "2.link")); err != nil {
		t.Fatal(err)
	}
	st, err := drain(s, func(context.Context, Report) error { return errors.New("nothing may be stored") })
	if err != nil || st != (DrainStats{Refused: 2}) {
		t.Fatalf("Drain: %+v, %v", st, err)
	}
	for _, want := range []string{
		fmt.Sprintf(`"msg":"spool: entry refused","spool":%q,`, s.Dir()),
		fmt.Sprintf(`"reason":"owned by uid %d, which may not report (api.allow_users, api.allow_groups)","uid":%d,"type":"regular file","links":1`, self, self),
		`"file":"2.link","reason":"a symlink, not a regular file"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	if p, _ := s.Pending(); len(p) != 0 {
		t.Errorf("left in new/: %v", p)
	}

	// A refused directory is logged as an error, once per Drain.
	logs.Reset()
	swap(t, s.Dir(), "new", t.TempDir())
	if _, err := drain(s, func(context.Context, Report) error { return nil }); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("Drain of a swapped new/: %v", err)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"spool refused: nothing in it is read, moved or removed until it is repaired"`) ||
		!strings.Contains(logs.String(), "new is a symlink, not a directory") {
		t.Errorf("log:\n%s", logs.String())
	}
}

// A flood of entries is refused and removed entirely, but logged one by
// one only up to maxRefusalLogs.
func TestDrainBoundsRefusalLogs(t *testing.T) {
	var logs bytes.Buffer
	s := open(t, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	const n = maxRefusalLogs + 50
	for i := range n {
		if err := os.Symlink("/etc/passwd", filepath.Join(s.Dir(), "new", fmt.Sprintf("%d.link", i))); err != nil {
			t.Fatal(err)
		}
	}
	st, err := drain(s, func(context.Context, Report) error { return nil })
	if err != nil || st.Refused != n {
		t.Fatalf("Drain: %+v, %v", st, err)
	}
	if got := strings.Count(logs.String(), `"msg":"spool: entry refused"`); got != maxRefusalLogs {
		t.Errorf("%d refusals logged one by one, want %d", got, maxRefusalLogs)
	}
	if !strings.Contains(logs.String(), `"msg":"spool: more entries refused (not logged one by one)","spool":`+fmt.Sprintf("%q", s.Dir())+`,"entries":50`) {
		t.Errorf("no summary line:\n%s", logs.String()[len(logs.String())-300:])
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), "new")); len(ents) != 0 {
		t.Errorf("%d entries left in new/", len(ents))
	}
}
