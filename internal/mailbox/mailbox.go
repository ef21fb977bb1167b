// Package mailbox reads messages (or plain-text documents) from the places
// administrators keep them: single files (.eml or any regular file), mbox
// files, directories searched recursively (which covers Maildir: cur/ and
// new/ are read, tmp/ is skipped), and standard input.
//
// Every message is read with a size bound, so a huge file is reported and
// skipped rather than loaded. Errors always name the path.
package mailbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Message is one message (or document) and where it came from.
type Message struct {
	// Path names the source: a file path, "file.mbox#N" for the N-th
	// (1-based) message of an mbox with several, "-" for standard input
	// ("-#N" for an mbox on standard input). An mbox holding one message
	// (a saved message starting with a "From " line) is named by its
	// path alone.
	Path string
	// Raw is the message bytes (for an mbox message, with the "From "
	// separator line removed and ">From " lines unescaped).
	Raw []byte
	// Reused is true when Raw's buffer is reused after fn returns (mbox
	// messages): copy Raw to keep it. Otherwise Raw is the caller's.
	Reused bool
}

// DefaultMaxBytes is the default per-message size bound.
const DefaultMaxBytes = 32 << 20

// Options configure Walk. The zero value selects the defaults.
type Options struct {
	// MaxBytes bounds the size of one message; larger messages are skipped
	// and reported to OnSkip. Default DefaultMaxBytes (32 MiB).
	MaxBytes int64
	// OnSkip is called for every message or file that is skipped (too
	// large, unreadable, not a regular file) with its path and the reason.
	// When nil, skipped items are silently ignored. Returning an error stops
	// the walk with that error.
	OnSkip func(path string, reason error) error
	// Mbox selects how regular files are read: MboxAuto (default) treats
	// a file whose first line starts with "From " as an mbox, MboxNever
	// reads every file as one message, MboxAlways splits every file.
	Mbox MboxMode
	// Stdin replaces os.Stdin for the path "-" (tests).
	Stdin io.Reader
}

// MboxMode selects mbox detection.
type MboxMode int

// Mbox detection modes.
const (
	MboxAuto MboxMode = iota
	MboxNever
	MboxAlways
)

// ErrTooLarge is the reason given to OnSkip for a message larger than
// Options.MaxBytes.
var ErrTooLarge = errors.New("message larger than the size limit")

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.OnSkip == nil {
		o.OnSkip = func(string, error) error { return nil }
	}
	return o
}

// Walk calls fn for every message found under paths, in a deterministic
// order (paths in the given order, directory entries sorted by name, mbox
// messages in file order). It stops at the first error returned by fn or
// OnSkip, at a read error of a named path, or when ctx is done. Message.Raw
// is only valid during the call of fn when Message.Reused is set (mbox
// messages: the buffer is reused); copy it to keep it.
func Walk(ctx context.Context, paths []string, opts Options, fn func(Message) error) error {
	o := opts.withDefaults()
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "-" {
			if err := walkReader(ctx, "-", o.Stdin, o, fn); err != nil {
				return err
			}
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("mailbox: %w", err)
		}
		if fi.IsDir() {
			if err := walkDir(ctx, p, o, fn); err != nil {
				return err
			}
			continue
		}
		if err := walkFile(ctx, p, fi, o, fn, failPath); err != nil {
			return err
		}
	}
	return nil
}

// walkDir reads a directory tree. Dotfiles and dot-directories, and tmp/
// directories of Maildirs, are skipped.
func walkDir(ctx context.Context, root string, o Options, fn func(Message) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return fmt.Errorf("mailbox: %w", err)
			}
			return o.OnSkip(p, err)
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		name := d.Name()
		if p != root && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if p != root && name == "tmp" && isMaildir(filepath.Dir(p)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			if d.Type()&fs.ModeSymlink != 0 {
				fi, serr := os.Stat(p)
				if serr == nil && fi.Mode().IsRegular() {
					return walkFile(ctx, p, fi, o, fn, o.OnSkip)
				}
			}
			return o.OnSkip(p, errors.New("not a regular file"))
		}
		return walkFile(ctx, p, nil, o, fn, o.OnSkip) // stat the open file: no second path lookup
	})
}

// isMaildir reports whether dir has the cur, new and tmp subdirectories.
func isMaildir(dir string) bool {
	for _, sub := range []string{"cur", "new", "tmp"} {
		fi, err := os.Stat(filepath.Join(dir, sub))
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// failPath turns a read error of a named path into the walk's error.
func failPath(p string, err error) error { return fmt.Errorf("mailbox: %s: %w", p, err) }

// walkFile reads one regular file (fi: its information, nil to stat it
// once open); read errors go to ioErr (OnSkip inside
// directories, failPath for named paths), size-limit skips to OnSkip. A
// file within the size limit is read whole, in one buffer of its size, and
// sniffed for an mbox in memory; a larger one is split as an mbox (which
// holds one message at a time) when it starts like one, else skipped.
func walkFile(ctx context.Context, p string, fi fs.FileInfo, o Options, fn func(Message) error, ioErr func(string, error) error) error {
	if fi != nil && !fi.Mode().IsRegular() {
		return ioErr(p, errors.New("not a regular file"))
	}
	f, err := os.Open(p)
	if err != nil {
		return ioErr(p, err)
	}
	defer f.Close()
	if fi == nil {
		if fi, err = f.Stat(); err != nil {
			return ioErr(p, err)
		}
		if !fi.Mode().IsRegular() {
			return ioErr(p, errors.New("not a regular file"))
		}
	}
	if fi.Size() > o.MaxBytes {
		mbox, err := o.isMbox(f)
		if err != nil {
			return ioErr(p, err)
		}
		if mbox {
			return readMbox(ctx, p, f, o, fn)
		}
		return o.OnSkip(p, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, fi.Size(), o.MaxBytes))
	}
	raw, err := readSized(f, fi.Size(), o.MaxBytes)
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return o.OnSkip(p, err)
		}
		return ioErr(p, err)
	}
	if o.Mbox == MboxAlways || (o.Mbox == MboxAuto && bytes.HasPrefix(raw, []byte("From "))) {
		return readMbox(ctx, p, bytes.NewReader(raw), o, fn)
	}
	return fn(Message{Path: p, Raw: raw})
}

// readSized reads f, expected to hold size bytes, into one buffer of that
// size (plus the byte that finds the end), failing with ErrTooLarge beyond
// max bytes (the file may have grown since it was measured).
func readSized(f *os.File, size, max int64) ([]byte, error) {
	buf := make([]byte, 0, size+1)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 4096) // the file grew
		}
	}
}

// isMbox peeks at the start of f and rewinds it.
func (o Options) isMbox(f *os.File) (bool, error) {
	switch o.Mbox {
	case MboxNever:
		return false, nil
	case MboxAlways:
		return true, nil
	}
	var head [5]byte
	n, err := io.ReadFull(f, head[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	return n == 5 && string(head[:]) == "From ", nil
}

// readBounded reads r fully, failing with ErrTooLarge beyond max bytes.
func readBounded(r io.Reader, max int64) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
	}
	return raw, nil
}

// walkReader reads standard input: an mbox when it starts with "From ",
// else one message.
func walkReader(ctx context.Context, name string, r io.Reader, o Options, fn func(Message) error) error {
	br := bufio.NewReaderSize(r, 64*1024)
	head, _ := br.Peek(5)
	mbox := o.Mbox == MboxAlways || (o.Mbox == MboxAuto && string(head) == "From ")
	if mbox {
		return readMbox(ctx, name, br, o, fn)
	}
	raw, err := readBounded(br, o.MaxBytes)
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return o.OnSkip(name, err)
		}
		return fmt.Errorf("mailbox: read %s: %w", name, err)
	}
	return fn(Message{Path: name, Raw: raw})
}

// readMbox splits an mbox (mboxrd/mboxo: messages start at lines beginning
// with "From "; lines ">From ", ">>From "… lose one '>'). A message larger
// than MaxBytes is skipped without being held in memory.
func readMbox(ctx context.Context, name string, r io.Reader, o Options, fn func(Message) error) error {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64*1024)
	}
	var (
		buf      []byte
		n        int  // 1-based index of the current message
		started  bool // a "From " line was seen
		tooLarge bool
		size     int64
	)
	flush := func(atEOF bool) error {
		if !started {
			return nil
		}
		// The first message is flushed when the second starts, or at the
		// end when it is the only one: then the path alone names it.
		path := name + "#" + strconv.Itoa(n)
		if atEOF && n == 1 {
			path = name
		}
		if tooLarge {
			return o.OnSkip(path, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, o.MaxBytes))
		}
		// The line break before the next "From " line belongs to the
		// separator, not to the message.
		msg := buf
		if atEOF {
			return fn(Message{Path: path, Raw: msg, Reused: true})
		}
		if bytes.HasSuffix(msg, []byte("\r\n")) {
			msg = msg[:len(msg)-2]
		} else if bytes.HasSuffix(msg, []byte("\n")) {
			msg = msg[:len(msg)-1]
		}
		return fn(Message{Path: path, Raw: msg, Reused: true})
	}
	prevBlank := true // the file start counts as a blank line
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A very long line: accumulate it in pieces.
			long := slices.Clone(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				if int64(len(long)) <= o.MaxBytes {
					long = append(long, line...)
				}
			}
			line = long
		}
		if len(line) > 0 {
			if bytes.HasPrefix(line, []byte("From ")) && (prevBlank || !started) {
				if ferr := flush(false); ferr != nil {
					return ferr
				}
				if cerr := ctx.Err(); cerr != nil {
					return cerr
				}
				n++
				started = true
				buf, size, tooLarge = buf[:0], 0, false
			} else {
				if !started {
					// Content before the first "From " line: treat the file
					// as starting with a message anyway.
					n++
					started = true
				}
				body := unescapeFrom(line)
				size += int64(len(body))
				if size > o.MaxBytes {
					tooLarge = true
					buf = buf[:0]
				} else if !tooLarge {
					buf = append(buf, body...)
				}
			}
			prevBlank = len(bytes.TrimRight(line, "\r\n")) == 0
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return flush(true)
			}
			return fmt.Errorf("mailbox: read %s: %w", name, err)
		}
	}
}

// unescapeFrom removes one '>' from lines matching ^>+From (mboxrd).
func unescapeFrom(line []byte) []byte {
	if len(line) < 6 || line[0] != '>' {
		return line
	}
	i := 0
	for i < len(line) && line[i] == '>' {
		i++
	}
	if bytes.HasPrefix(line[i:], []byte("From ")) {
		return line[1:]
	}
	return line
}

// ReadFilesFrom reads a list of paths, one per line; blank lines and lines
// starting with '#' are skipped, surrounding white space is trimmed. "-"
// reads the list from standard input.
func ReadFilesFrom(path string) ([]string, error) {
	var r io.Reader
	if path == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("mailbox: files-from: %w", err)
		}
		defer f.Close()
		r = f
	}
	return readList(path, r)
}

func readList(name string, r io.Reader) ([]string, error) {
	var paths []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		paths = append(paths, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mailbox: files-from %s: %w", name, err)
	}
	return paths, nil
}
