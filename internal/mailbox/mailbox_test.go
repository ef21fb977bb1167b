package mailbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

type got struct{ path, raw string }

func collect(t *testing.T, paths []string, opts Options) ([]got, []string, error) {
	t.Helper()
	var msgs []got
	var skipped []string
	if opts.OnSkip == nil {
		opts.OnSkip = func(p string, err error) error {
			skipped = append(skipped, p+": "+err.Error())
			return nil
		}
	}
	err := Walk(context.Background(), paths, opts, func(m Message) error {
		msgs = append(msgs, got{m.Path, string(m.Raw)})
		return nil
	})
	return msgs, skipped, err
}

const mboxText = "From alice@example.com Mon Jan  1 00:00:00 2024\n" +
	"Subject: one\n\nhello\n>From the start\n>>From twice\n\n" +
	"From bob@example.com Mon Jan  1 00:00:01 2024\n" +
	"Subject: two\n\nfirst line\nFrom inside a paragraph is not a separator\nbye\n"

func TestWalk(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "single.eml"), "Subject: a\n\nbody a\n")
	write(t, filepath.Join(dir, "box.mbox"), mboxText)
	write(t, filepath.Join(dir, "saved.eml"), "From alice@example.com Mon Jan  1 00:00:00 2024\nSubject: saved\n\nbody\n")
	md := filepath.Join(dir, "tree", "Maildir")
	write(t, filepath.Join(md, "cur", "1:2,S"), "Subject: cur\n\nx\n")
	write(t, filepath.Join(md, "new", "2"), "Subject: new\n\ny\n")
	write(t, filepath.Join(md, "tmp", "3"), "Subject: tmp\n\nz\n")
	write(t, filepath.Join(dir, "tree", ".hidden"), "nope")
	write(t, filepath.Join(dir, "tree", ".git", "x"), "nope")
	write(t, filepath.Join(dir, "tree", "notes.txt"), "plain text document\n")
	write(t, filepath.Join(dir, "big.eml"), strings.Repeat("x", 200))
	write(t, filepath.Join(dir, "big.mbox"), "From a\n"+strings.Repeat("y", 50)+"\n\nFrom b\nok\n")

	tests := []struct {
		name    string
		paths   []string
		opts    Options
		want    []got
		skipped int
	}{
		{
			name:  "single file",
			paths: []string{filepath.Join(dir, "single.eml")},
			want:  []got{{filepath.Join(dir, "single.eml"), "Subject: a\n\nbody a\n"}},
		},
		{
			name:  "mbox split and unescaped",
			paths: []string{filepath.Join(dir, "box.mbox")},
			want: []got{
				{filepath.Join(dir, "box.mbox") + "#1", "Subject: one\n\nhello\nFrom the start\n>From twice\n"},
				{filepath.Join(dir, "box.mbox") + "#2", "Subject: two\n\nfirst line\nFrom inside a paragraph is not a separator\nbye\n"},
			},
		},
		{
			name:  "a one-message mbox (saved message with a From line) is named by its path",
			paths: []string{filepath.Join(dir, "saved.eml")},
			want:  []got{{filepath.Join(dir, "saved.eml"), "Subject: saved\n\nbody\n"}},
		},
		{
			name:  "stdin one-message mbox",
			paths: []string{"-"},
			opts:  Options{Stdin: strings.NewReader("From a b\nX: 1\n")},
			want:  []got{{"-", "X: 1\n"}},
		},
		{
			name:  "mbox read as one message when mbox detection is off",
			paths: []string{filepath.Join(dir, "box.mbox")},
			opts:  Options{Mbox: MboxNever},
			want:  []got{{filepath.Join(dir, "box.mbox"), mboxText}},
		},
		{
			name:  "directory with Maildir, dotfiles and tmp skipped",
			paths: []string{filepath.Join(dir, "tree")},
			want: []got{
				{filepath.Join(md, "cur", "1:2,S"), "Subject: cur\n\nx\n"},
				{filepath.Join(md, "new", "2"), "Subject: new\n\ny\n"},
				{filepath.Join(dir, "tree", "notes.txt"), "plain text document\n"},
			},
		},
		{
			name:    "too large skipped with reason",
			paths:   []string{filepath.Join(dir, "big.eml"), filepath.Join(dir, "single.eml")},
			opts:    Options{MaxBytes: 100},
			want:    []got{{filepath.Join(dir, "single.eml"), "Subject: a\n\nbody a\n"}},
			skipped: 1,
		},
		{
			name:    "mbox file larger than the limit split, its oversized message skipped",
			paths:   []string{filepath.Join(dir, "big.mbox")},
			opts:    Options{MaxBytes: 10},
			want:    []got{{filepath.Join(dir, "big.mbox") + "#2", "ok\n"}},
			skipped: 1,
		},
		{
			name:  "stdin single message",
			paths: []string{"-"},
			opts:  Options{Stdin: strings.NewReader("Subject: in\n\nstdin\n")},
			want:  []got{{"-", "Subject: in\n\nstdin\n"}},
		},
		{
			name:  "stdin mbox",
			paths: []string{"-"},
			opts:  Options{Stdin: strings.NewReader("From a b\nX: 1\n\nFrom c d\nX: 2\n")},
			want:  []got{{"-#1", "X: 1\n"}, {"-#2", "X: 2\n"}},
		},
		{
			name:    "oversized mbox message skipped, others kept",
			paths:   []string{"-"},
			opts:    Options{MaxBytes: 10, Stdin: strings.NewReader("From a\n" + strings.Repeat("y", 50) + "\n\nFrom b\nok\n")},
			want:    []got{{"-#2", "ok\n"}},
			skipped: 1,
		},
		{
			name:  "empty file is one empty message",
			paths: []string{"-"},
			opts:  Options{Stdin: strings.NewReader("")},
			want:  []got{{"-", ""}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, skipped, err := collect(t, tc.paths, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(msgs, tc.want) {
				t.Errorf("messages:\n got %q\nwant %q", msgs, tc.want)
			}
			if len(skipped) != tc.skipped {
				t.Errorf("skipped %q, want %d", skipped, tc.skipped)
			}
			for _, s := range skipped {
				if !strings.Contains(s, "size limit") {
					t.Errorf("skip reason %q does not say why", s)
				}
			}
		})
	}
}

// TestWalkReused: a file's message is the caller's to keep; an mbox's
// messages share a buffer and say so.
func TestWalkReused(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.eml"), "Subject: a\n\nbody a\n")
	write(t, filepath.Join(dir, "b.mbox"), mboxText)
	var kept []Message
	err := Walk(context.Background(), []string{dir}, Options{}, func(m Message) error {
		kept = append(kept, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{false, true, true}
	if len(kept) != len(want) {
		t.Fatalf("%d messages, want %d", len(kept), len(want))
	}
	for i, m := range kept {
		if m.Reused != want[i] {
			t.Errorf("%s: Reused %v, want %v", m.Path, m.Reused, want[i])
		}
	}
	if string(kept[0].Raw) != "Subject: a\n\nbody a\n" {
		t.Errorf("kept file message changed: %q", kept[0].Raw)
	}
}

func TestWalkErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.eml")
	_, _, err := collect(t, []string{missing}, Options{})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing path: err = %v, want it to name %s", err, missing)
	}
	write(t, filepath.Join(dir, "a"), "x")
	stop := errors.New("stop")
	err = Walk(context.Background(), []string{dir}, Options{}, func(Message) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("callback error not returned: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Walk(ctx, []string{dir}, Options{}, func(Message) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled walk: err = %v", err)
	}
}

func TestReadFilesFrom(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "list")
	write(t, list, "# comment\n\n a.eml \nsub/b.mbox\n  # indented comment\nc\n")
	got, err := ReadFilesFrom(list)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.eml", "sub/b.mbox", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := ReadFilesFrom(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing list: err = %v", err)
	}
}

func FuzzMbox(f *testing.F) {
	f.Add([]byte(mboxText))
	f.Add([]byte("From \n\nFrom \n>From \n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		total := 0
		_ = Walk(context.Background(), []string{"-"}, Options{MaxBytes: 1 << 16, Stdin: strings.NewReader(string(data))},
			func(m Message) error { total += len(m.Raw); return nil })
		if total > len(data) {
			t.Fatalf("messages hold %d bytes, input %d", total, len(data))
		}
	})
}
