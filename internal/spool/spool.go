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
// rather than fill the disk. Files of trusted writers that cannot be read
// as reports are moved to bad/ for the administrator, never retried.
//
// The spool is shared with a group (the mail-delivery user's, mode 2770
// or 3770), and its members are not all trusted: any of them can rename
// tmp/, new/ and bad/, put symlinks or directories of their own in their
// place, and put any file in them. So:
//
//   - No path below the spool's root is ever resolved: the root is opened
//     without following a symlink, tmp/, new/ and bad/ relative to it,
//     entries relative to those, all with O_NOFOLLOW, and files are
//     renamed and removed only between directories opened and checked so
//     (fsys_unix.go). A directory that is a symlink, belongs to another
//     user, or that anyone may write is refused (ErrUnsafe): nothing in it
//     is read, moved or removed.
//   - A report names its reporter, and a file's content is the writer's
//     choice: Drain trusts a file only for its owner, which the kernel
//     sets (Options.Admit: the daemon admits the users its report socket
//     admits). It also refuses, unread, every entry that is not a regular
//     file with a single link, and files that the group or others may
//     write. Refused entries are logged with the reason and the owner's
//     uid, counted (DrainStats.Refused) and removed (a symlink itself,
//     never its target; a hard link's other names stay), never moved to
//     bad/.
//
// Put (the writer's side) follows the same rules for tmp/ and new/, and
// they must belong to the spool's owner (or root): a group member cannot
// make the writer put reports into a directory of its own.
package spool

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
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
	// headerSlack is the room a spool file's header line may take besides
	// the message.
	headerSlack = 4096
	// maxRefusalLogs bounds the refused entries Drain logs one by one;
	// past it, one line counts the others (a group member may make
	// thousands of entries).
	maxRefusalLogs = 100
)

// Mode bits of directories (the same on every Unix).
const (
	modeSetgid = 0o2000
	modeSticky = 0o1000
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
	// ErrUnsafe: the spool, or its tmp/, new/ or bad/, is not a directory
	// the spool can trust: a symlink or another file in its place, a
	// directory of another owner, or one that everyone may write. Nothing
	// is read, written, moved or removed through it.
	ErrUnsafe = errors.New("unsafe spool directory")
)

// Options bound a spool. Zero values select the defaults.
type Options struct {
	// MaxFiles bounds the reports waiting in new/ (and Drain looks at no
	// more than twice as many entries per call). Default 10000.
	MaxFiles int
	// MaxBytes bounds their total size. Default 256 MiB.
	MaxBytes int64
	// MaxMessage bounds one message. Default 10 MiB.
	MaxMessage int64
	// FileMode is the mode of spool files, without group and other write
	// (Drain refuses files that others may rewrite); the directory's mode
	// protects them. Default 0644, so that the daemon reads what the mail
	// user wrote.
	FileMode os.FileMode
	// Admit tells whether Drain trusts a report file owned by uid: a
	// report names any reporter, so only a user trusted to speak for all
	// of them may write one. Default (nil): root and the process's own
	// user.
	Admit func(uid uint32) bool
	// Logger receives a line for each entry Drain refuses (the first 100
	// of a call; then one line counts the others), sets aside or removes,
	// and for a refused directory. Default: discarded.
	Logger *slog.Logger
}

// Report is a spooled report.
type Report struct {
	Kind     string // "spam" or "ham"
	Reporter string
	Time     time.Time // when it was spooled
	Raw      []byte
}

// DrainStats is what one Drain did.
type DrainStats struct {
	Stored   int // reports stored (their files deleted)
	SetAside int // files of trusted writers moved to bad/: not reports, or reports the callback rejected
	Refused  int // entries refused unread (and removed), and refused directories
}

// Spool is a spool directory. It keeps no descriptor open: every call
// opens the directory anew.
type Spool struct {
	dir  string
	opts Options
	log  *slog.Logger
}

// Open opens the spool in dir, which must exist, be a directory (not a
// symlink to one) and not be writable by everyone. When the process owns
// dir it creates the missing tmp/, new/ and bad/: tmp/ and new/ with dir's
// permission and setgid bits plus the sticky bit (so that a group member
// cannot remove or rename another's reports), bad/ without group write
// (only Drain puts files there). Otherwise they must exist (the daemon
// makes them when it starts).
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
	o.FileMode = o.FileMode.Perm() &^ 0o022
	if o.Admit == nil {
		self := euid()
		o.Admit = func(uid uint32) bool { return uid == 0 || uid == self }
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	root, err := openRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.close()
	if err := checkRoot(root, false); err != nil {
		return nil, err
	}
	if root.info.uid == euid() {
		perm := root.info.perm() & (modeSetgid | 0o770)
		for _, sub := range []struct {
			name string
			mode uint32
		}{{"tmp", perm | modeSticky}, {"new", perm | modeSticky}, {"bad", perm &^ 0o020}} {
			if err := root.mkdir(sub.name, sub.mode); err != nil {
				return nil, fmt.Errorf("spool: %w", err)
			}
		}
	}
	return &Spool{dir: dir, opts: o, log: log}, nil
}

// Dir is the spool's directory.
func (s *Spool) Dir() string { return s.dir }

// dirs are the spool's directories, opened and checked for one call.
type dirs struct{ root, tmp, new, bad *dirFD }

func (d *dirs) close() {
	d.root.close()
	d.tmp.close()
	d.new.close()
	d.bad.close()
}

// checkRoot refuses a spool root that everyone may write and, for the
// daemon (drain), one that neither root nor the daemon's user owns.
func checkRoot(root *dirFD, drain bool) error {
	if root.info.perm()&0o002 != 0 {
		return fmt.Errorf("spool %s: mode %04o lets everyone write it (give it a group: 2770 or 3770): %w", root.name, root.info.perm(), ErrUnsafe)
	}
	if drain && root.info.uid != 0 && root.info.uid != euid() {
		return fmt.Errorf("spool %s: owned by uid %d, not by root or this process's user (uid %d): %w", root.name, root.info.uid, euid(), ErrUnsafe)
	}
	return nil
}

// openDirs opens the root and the subdirectories named (tmp, new, bad),
// checked: a subdirectory belongs to the root's owner or to root, and
// nobody else may write it.
func (s *Spool) openDirs(drain bool, subs ...string) (*dirs, error) {
	root, err := openRoot(s.dir)
	if err != nil {
		return nil, err
	}
	d := &dirs{root: root}
	if err := checkRoot(root, drain); err != nil {
		d.close()
		return nil, err
	}
	for _, name := range subs {
		sub, err := root.openSub(name)
		if err != nil {
			d.close()
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w (the daemon creates it when it starts)", err)
			}
			return nil, err
		}
		switch name {
		case "tmp":
			d.tmp = sub
		case "new":
			d.new = sub
		case "bad":
			d.bad = sub
		}
		if sub.info.uid != root.info.uid && sub.info.uid != 0 {
			d.close()
			return nil, fmt.Errorf("spool: %s is owned by uid %d, not by the spool's owner (uid %d): %w", sub.name, sub.info.uid, root.info.uid, ErrUnsafe)
		}
		if sub.info.perm()&0o002 != 0 {
			d.close()
			return nil, fmt.Errorf("spool: %s: mode %04o lets everyone write it: %w", sub.name, sub.info.perm(), ErrUnsafe)
		}
	}
	return d, nil
}

// Put spools a report durably: when it returns nil, the report is in
// new/ and survives a crash. The name it returns is the file's.
func (s *Spool) Put(r Report) (string, error) {
	if int64(len(r.Raw)) > s.opts.MaxMessage {
		return "", fmt.Errorf("spool: %d bytes, at most %d: %w", len(r.Raw), s.opts.MaxMessage, ErrTooLarge)
	}
	d, err := s.openDirs(false, "tmp", "new")
	if err != nil {
		return "", err
	}
	defer d.close()
	n, size, err := s.usage(d.new)
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
	f, err := d.tmp.create(name, s.opts.FileMode)
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
		err = d.tmp.renameTo(name, d.new)
	}
	if err != nil {
		d.tmp.remove(name, false)
		return "", fmt.Errorf("spool: %w", err)
	}
	if err := d.new.sync(); err != nil {
		return "", fmt.Errorf("spool: %w", err)
	}
	return name, nil
}

// usage counts the entries in new/ (at most MaxFiles+1) and the bytes of
// its files.
func (s *Spool) usage(dir *dirFD) (int, int64, error) {
	names, err := dir.names(s.opts.MaxFiles + 1)
	if err != nil {
		return 0, 0, err
	}
	var size int64
	for _, n := range names {
		if fi, err := dir.lstat(n); err == nil && fi.isRegular() {
			size += fi.size
		}
	}
	return len(names), size, nil
}

// Pending lists the files waiting in new/, oldest first (at most twice
// MaxFiles).
func (s *Spool) Pending() ([]string, error) {
	d, err := s.openDirs(false, "new")
	if err != nil {
		return nil, err
	}
	defer d.close()
	names, err := s.list(d.new)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(names, func(n string) bool {
		fi, err := d.new.lstat(n)
		return err != nil || !fi.isRegular()
	}), nil
}

// list names the entries of dir, at most twice MaxFiles, oldest first:
// names start with the time in nanoseconds, so order by length, then
// lexically, is order by time.
func (s *Spool) list(dir *dirFD) ([]string, error) {
	names, err := dir.names(2 * s.opts.MaxFiles)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(names, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	return names, nil
}

// refusal is why an entry of new/ is refused unread.
type refusal struct {
	reason string
	info   fileInfo // of the entry refused (to remove only that one)
}

func (r *refusal) Error() string { return r.reason }

// read opens the entry name of new/ and reads its report when the entry
// may be trusted: a regular file with one link, owned by a user admit
// trusts, that nobody else may write. Otherwise it returns a *refusal.
// A file too large, or not a report, is an error wrapping ErrMalformed.
func (s *Spool) read(dir *dirFD, name string, admit func(uint32) bool) (Report, fileInfo, error) {
	lst, err := dir.lstat(name)
	if err != nil {
		return Report{}, fileInfo{}, fmt.Errorf("spool: %w", err)
	}
	if !lst.isRegular() {
		return Report{}, lst, &refusal{reason: "a " + lst.kind() + ", not a regular file", info: lst}
	}
	// The same checks before opening (so that a file of another user is
	// never opened: one the daemon may not read would stop Drain) and on
	// what was opened.
	if err := s.trust(lst, admit); err != nil {
		return Report{}, lst, err
	}
	f, fi, err := dir.openEntry(name)
	if err != nil {
		if isSymlinkErr(err) {
			return Report{}, lst, &refusal{reason: "replaced by a symlink while opened", info: lst}
		}
		return Report{}, lst, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	if !fi.same(lst) || !fi.isRegular() {
		return Report{}, lst, &refusal{reason: "replaced while opened", info: lst}
	}
	if err := s.trust(fi, admit); err != nil {
		return Report{}, fi, err
	}
	if fi.size > s.opts.MaxMessage+headerSlack {
		return Report{}, fi, fmt.Errorf("spool file %s: %d bytes: %w", name, fi.size, ErrMalformed)
	}
	r, err := parse(io.LimitReader(f, s.opts.MaxMessage+headerSlack+1), name, s.opts.MaxMessage+headerSlack)
	return r, fi, err
}

// trust returns a *refusal unless the regular file fi has one link, an
// owner admit trusts, and no group or other write permission.
func (s *Spool) trust(fi fileInfo, admit func(uint32) bool) error {
	switch {
	case fi.nlink != 1:
		return &refusal{reason: fmt.Sprintf("a hard link (%d names): a spool file has one", fi.nlink), info: fi}
	case !admit(fi.uid):
		return &refusal{reason: fmt.Sprintf("owned by uid %d, which may not report (api.allow_users, api.allow_groups)", fi.uid), info: fi}
	case fi.perm()&0o022 != 0:
		return &refusal{reason: fmt.Sprintf("mode %04o: others may rewrite it", fi.perm()), info: fi}
	}
	return nil
}

// parse reads a spool file's header line and message.
func parse(rd io.Reader, name string, max int64) (Report, error) {
	br := bufio.NewReader(rd)
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
	if int64(len(line)+raw.Len()) > max {
		return Report{}, fmt.Errorf("spool file %s: grew past %d bytes: %w", name, max, ErrMalformed)
	}
	return Report{Kind: q.Get("kind"), Reporter: q.Get("reporter"), Time: t, Raw: raw.Bytes()}, nil
}

// Drain hands every waiting report to store, oldest first, and deletes
// each file once store returned nil. A trusted file that is not a
// report, or whose report store rejects (an error wrapping ErrReject), is
// moved to bad/; an entry that is not trusted (see the package's doc) is
// refused, logged and removed; any other error of store stops Drain (the
// file stays, for the next Drain). It also removes files left in tmp/ for
// over an hour. When a directory is unsafe, Drain does nothing else and
// returns an error wrapping ErrUnsafe.
func (s *Spool) Drain(ctx context.Context, store func(context.Context, Report) error) (DrainStats, error) {
	var st DrainStats
	d, err := s.openDirs(true, "tmp", "new", "bad")
	if err != nil {
		if errors.Is(err, ErrUnsafe) {
			st.Refused++
			s.log.Error("spool refused: nothing in it is read, moved or removed until it is repaired", "spool", s.dir, "err", err)
		}
		return st, err
	}
	defer d.close()
	s.cleanTmp(d.tmp)
	names, err := s.list(d.new)
	if err != nil {
		return st, err
	}
	trusted := map[uint32]bool{} // Admit may look users up: once per owner
	admit := func(uid uint32) bool {
		ok, seen := trusted[uid]
		if !seen {
			ok = s.opts.Admit(uid)
			trusted[uid] = ok
		}
		return ok
	}
	defer func() {
		if st.Refused > maxRefusalLogs {
			s.log.Warn("spool: more entries refused (not logged one by one)", "spool", s.dir, "entries", st.Refused-maxRefusalLogs)
		}
	}()
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		r, fi, err := s.read(d.new, name, admit)
		var ref *refusal
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // another drain took it
		case errors.As(err, &ref):
			st.Refused++
			s.refuse(d.new, name, ref, st.Refused <= maxRefusalLogs)
			continue
		case err == nil:
			err = store(ctx, r)
			if err == nil {
				st.Stored++
				if s.unchanged(d.new, name, fi) {
					if err := d.new.remove(name, false); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return st, fmt.Errorf("spool: %w", err)
					}
				}
				continue
			}
		}
		if errors.Is(err, ErrMalformed) || errors.Is(err, ErrReject) {
			if !s.unchanged(d.new, name, fi) {
				continue
			}
			if merr := d.new.renameTo(name, d.bad); merr != nil {
				return st, fmt.Errorf("spool: set aside %s: %w (after: %w)", name, merr, err)
			}
			st.SetAside++
			s.log.Warn("spool: file set aside in bad/", "spool", s.dir, "file", name, "uid", fi.uid, "reason", err)
			continue
		}
		return st, fmt.Errorf("spool: report %s: %w", name, err)
	}
	return st, nil
}

// unchanged tells whether the entry name of dir is still the file fi
// (a group member may have renamed another into its place meanwhile).
func (s *Spool) unchanged(dir *dirFD, name string, fi fileInfo) bool {
	now, err := dir.lstat(name)
	if err == nil && now.same(fi) {
		return true
	}
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("spool: entry replaced while it was read; left for the next look", "spool", s.dir, "file", name)
	}
	return false
}

// refuse logs a refused entry of new/ (when log) and removes it (a
// symlink itself, an empty directory, one name of a hard link), unless
// it was replaced meanwhile.
func (s *Spool) refuse(dir *dirFD, name string, ref *refusal, log bool) {
	if log {
		s.log.Warn("spool: entry refused", "spool", s.dir, "file", name, "reason", ref.reason,
			"uid", ref.info.uid, "type", ref.info.kind(), "links", ref.info.nlink, "size", ref.info.size)
	}
	if !s.unchanged(dir, name, ref.info) {
		return
	}
	if err := dir.remove(name, ref.info.isDir()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("spool: refused entry not removed", "spool", s.dir, "file", name, "err", err)
	}
}

// cleanTmp removes the files (and symlinks) left in tmp/ for over
// staleTmp.
func (s *Spool) cleanTmp(tmp *dirFD) {
	names, err := tmp.names(2 * s.opts.MaxFiles)
	if err != nil {
		return
	}
	for _, name := range names {
		fi, err := tmp.lstat(name)
		if err != nil || fi.isDir() || time.Since(fi.mtime) <= staleTmp {
			continue
		}
		if err := tmp.remove(name, false); err == nil {
			s.log.Info("spool: stale file removed from tmp/", "spool", s.dir, "file", name, "uid", fi.uid, "type", fi.kind())
		}
	}
}
