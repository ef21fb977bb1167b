// Package spool keeps junk and not-junk reports durably on disk while the
// daemon cannot take them, for `nddmilter report --spool` (the Dovecot
// pipe of contrib/dovecot): the report is written to tmp/, synced, and
// renamed into new/ (as Maildir delivers), so that a file in new/ is
// always complete; the daemon reads new/ at start and periodically,
// deleting each file only once its report is stored.
//
// A spool file is one header line — URL query syntax: v=1, kind,
// reporter, time (RFC 3339) — then the raw message. The spool is bounded
// (Options.MaxFiles, Options.MaxBytes): past them Put fails with ErrFull
// rather than fill the disk. Files that cannot be read as reports are
// moved to bad/ for the administrator, never retried.
//
// Whoever can write into the spool may report as any reporter, as over
// the report socket: give the directory the same group as the socket
// (mode 2770).
package spool

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults of Options.
const (
	DefaultMaxFiles = 10000
	DefaultMaxBytes = 256 << 20
	// DefaultMaxMessage bounds one spooled message (as http.max_body_bytes).
	DefaultMaxMessage = 10 << 20
	DefaultFileMode   = 0o644
	// staleTmp is the age past which Drain removes a file left in tmp/ by
	// a writer that died before its rename.
	staleTmp = time.Hour
)

// Sentinel errors.
var (
	// ErrFull: the spool holds MaxFiles files or MaxBytes bytes already.
	ErrFull = errors.New("spool full")
	// ErrTooLarge: the message is larger than MaxMessage.
	ErrTooLarge = errors.New("message too large to spool")
	// ErrMalformed: a spool file that is not a report (moved to bad/).
	ErrMalformed = errors.New("malformed spool file")
	// ErrReject, wrapped by Drain's callback, says the report can never be
	// stored (the file goes to bad/ instead of being retried).
	ErrReject = errors.New("report rejected")
)

// Options bound a spool. Zero values select the defaults.
type Options struct {
	// MaxFiles bounds the reports waiting in new/. Default 10000.
	MaxFiles int
	// MaxBytes bounds their total size. Default 256 MiB.
	MaxBytes int64
	// MaxMessage bounds one message. Default 10 MiB.
	MaxMessage int64
	// FileMode is the mode of spool files (the directory's mode protects
	// them). Default 0644, so that the daemon reads what the mail user
	// wrote.
	FileMode os.FileMode
}

// Report is a spooled report.
type Report struct {
	Kind     string // "spam" or "ham"
	Reporter string
	Time     time.Time // when it was spooled
	Raw      []byte
}

// Spool is a spool directory.
type Spool struct {
	dir  string
	opts Options
}

// Open opens the spool in dir, creating its tmp/, new/ and bad/
// subdirectories (with dir's permission bits, so that a group-writable
// setgid spool stays one). dir itself must exist.
func Open(dir string, o Options) (*Spool, error) {
	if o.MaxFiles <= 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = DefaultMaxMessage
	}
	if o.FileMode == 0 {
		o.FileMode = DefaultFileMode
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("spool: %s is not a directory", dir)
	}
	for _, sub := range []string{"tmp", "new", "bad"} {
		p := filepath.Join(dir, sub)
		if err := os.Mkdir(p, 0o700); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return nil, fmt.Errorf("spool: %w", err)
		}
		if err := os.Chmod(p, fi.Mode()&(fs.ModePerm|fs.ModeSetgid)); err != nil {
			return nil, fmt.Errorf("spool: %w", err)
		}
	}
	return &Spool{dir: dir, opts: o}, nil
}

// Dir is the spool's directory.
func (s *Spool) Dir() string { return s.dir }

// Put spools a report durably: when it returns nil, the report is in
// new/ and survives a crash. The name it returns is the file's.
func (s *Spool) Put(r Report) (string, error) {
	if int64(len(r.Raw)) > s.opts.MaxMessage {
		return "", fmt.Errorf("spool: %d bytes, at most %d: %w", len(r.Raw), s.opts.MaxMessage, ErrTooLarge)
	}
	n, size, err := s.usage()
	if err != nil {
		return "", err
	}
	if n >= s.opts.MaxFiles || size+int64(len(r.Raw)) > s.opts.MaxBytes {
		return "", fmt.Errorf("spool %s: %d reports, %d bytes waiting (at most %d, %d bytes): is the daemon ingesting it? %w",
			s.dir, n, size, s.opts.MaxFiles, s.opts.MaxBytes, ErrFull)
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("spool: %w", err)
	}
	name := fmt.Sprintf("%d.%d.%s", r.Time.UnixNano(), os.Getpid(), hex.EncodeToString(rnd[:]))
	tmp := filepath.Join(s.dir, "tmp", name)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, s.opts.FileMode)
	if err != nil {
		return "", fmt.Errorf("spool: %w", err)
	}
	hdr := url.Values{"v": {"1"}, "kind": {r.Kind}, "reporter": {r.Reporter}, "time": {r.Time.UTC().Format(time.RFC3339Nano)}}
	_, err = f.Write(append([]byte(hdr.Encode()+"\n"), r.Raw...))
	if err == nil {
		err = f.Chmod(s.opts.FileMode) // whatever the umask
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, "new", name))
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("spool: %w", err)
	}
	if err := syncDir(filepath.Join(s.dir, "new")); err != nil {
		return "", fmt.Errorf("spool: %w", err)
	}
	return name, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// usage counts the files waiting in new/ and their bytes.
func (s *Spool) usage() (int, int64, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "new"))
	if err != nil {
		return 0, 0, fmt.Errorf("spool: %w", err)
	}
	var size int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			size += fi.Size()
		}
	}
	return len(ents), size, nil
}

// Pending lists the files waiting in new/, oldest first.
func (s *Spool) Pending() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "new"))
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	// Names start with the time in nanoseconds: order by length, then
	// lexically, is order by time.
	slices.SortFunc(names, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	return names, nil
}

// Read reads a spooled report; a file that is not one is an error
// wrapping ErrMalformed.
func (s *Spool) Read(name string) (Report, error) {
	f, err := os.Open(filepath.Join(s.dir, "new", name))
	if err != nil {
		return Report{}, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Report{}, fmt.Errorf("spool: %w", err)
	}
	if fi.Size() > s.opts.MaxMessage+4096 {
		return Report{}, fmt.Errorf("spool file %s: %d bytes: %w", name, fi.Size(), ErrMalformed)
	}
	br := bufio.NewReader(f)
	line, err := br.ReadSlice('\n')
	if err != nil {
		return Report{}, fmt.Errorf("spool file %s: no header line: %w", name, ErrMalformed)
	}
	q, err := url.ParseQuery(string(bytes.TrimSpace(line)))
	if err != nil || q.Get("v") != "1" {
		return Report{}, fmt.Errorf("spool file %s: bad header: %w", name, ErrMalformed)
	}
	t, err := time.Parse(time.RFC3339Nano, q.Get("time"))
	if err != nil {
		return Report{}, fmt.Errorf("spool file %s: bad time: %w", name, ErrMalformed)
	}
	var raw bytes.Buffer
	if _, err := raw.ReadFrom(br); err != nil {
		return Report{}, fmt.Errorf("spool: read %s: %w", name, err)
	}
	return Report{Kind: q.Get("kind"), Reporter: q.Get("reporter"), Time: t, Raw: raw.Bytes()}, nil
}

// Drain hands every waiting report to store, oldest first, and deletes
// each file once store returned nil. A file that is not a report, or
// whose report store rejects (an error wrapping ErrReject), is moved to
// bad/; any other error of store stops Drain (the file stays, for the
// next Drain). It also removes files left in tmp/ for over an hour.
// n counts the reports stored.
func (s *Spool) Drain(ctx context.Context, store func(context.Context, Report) error) (n int, err error) {
	s.cleanTmp()
	names, err := s.Pending()
	if err != nil {
		return 0, err
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		r, err := s.Read(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // another drain took it
		}
		if err == nil {
			err = store(ctx, r)
			if err == nil {
				n++
				if err := os.Remove(filepath.Join(s.dir, "new", name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return n, fmt.Errorf("spool: %w", err)
				}
				continue
			}
		}
		if errors.Is(err, ErrMalformed) || errors.Is(err, ErrReject) {
			if merr := os.Rename(filepath.Join(s.dir, "new", name), filepath.Join(s.dir, "bad", name)); merr != nil {
				return n, fmt.Errorf("spool: set aside %s: %w (after: %w)", name, merr, err)
			}
			continue
		}
		return n, fmt.Errorf("spool: report %s: %w", name, err)
	}
	return n, nil
}

func (s *Spool) cleanTmp() {
	ents, err := os.ReadDir(filepath.Join(s.dir, "tmp"))
	if err != nil {
		return
	}
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTmp {
			os.Remove(filepath.Join(s.dir, "tmp", e.Name()))
		}
	}
}
