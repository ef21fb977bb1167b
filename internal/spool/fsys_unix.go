//go:build unix

package spool

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The spool's directories are group-writable: a member of the group can
// rename tmp/, new/ or bad/ and put a symlink or a directory of its own in
// their place, and put any entry in them. So the spool never resolves a
// path below its root: it opens the root once per operation without
// following a symlink, its subdirectories relative to that descriptor, and
// entries relative to theirs, each with O_NOFOLLOW, and checks what it
// opened with fstat; it renames and removes only between descriptors it
// opened and checked itself.

// dirFD is a directory the spool opened and checked itself.
type dirFD struct {
	f    *os.File
	fd   int
	name string // its path, for messages
	info fileInfo
}

func (d *dirFD) close() {
	if d != nil {
		d.f.Close()
	}
}

func infoOf(st *unix.Stat_t) fileInfo {
	var typ fs.FileMode
	switch uint32(st.Mode) & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		typ = fs.ModeDir
	case unix.S_IFLNK:
		typ = fs.ModeSymlink
	case unix.S_IFIFO:
		typ = fs.ModeNamedPipe
	case unix.S_IFSOCK:
		typ = fs.ModeSocket
	case unix.S_IFCHR, unix.S_IFBLK:
		typ = fs.ModeDevice
	default:
		typ = fs.ModeIrregular
	}
	return fileInfo{typ: typ, mode: uint32(st.Mode) & 0o7777, uid: st.Uid, nlink: uint64(st.Nlink), size: st.Size,
		mtime: time.Unix(int64(st.Mtim.Sec), int64(st.Mtim.Nsec)), dev: uint64(st.Dev), ino: uint64(st.Ino)}
}

// isSymlinkErr tells whether opening with O_NOFOLLOW failed on a symlink
// (ELOOP; EMLINK on FreeBSD).
func isSymlinkErr(err error) bool {
	return errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK)
}

// retry runs a system call again when a signal interrupted it.
func retry(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// openRoot opens the spool's root directory itself: a symlink in its
// place is refused (the path's other components are the administrator's).
func openRoot(path string) (*dirFD, error) {
	var fd int
	err := retry(func() (err error) { fd, err = unix.Open(path, dirFlags, 0); return err })
	if err != nil {
		var st unix.Stat_t
		if lerr := unix.Lstat(path, &st); lerr == nil && !infoOf(&st).isDir() {
			return nil, fmt.Errorf("spool %s is a %s, not a directory: %w", path, infoOf(&st).kind(), ErrUnsafe)
		}
		return nil, fmt.Errorf("spool: %w", &fs.PathError{Op: "open", Path: path, Err: err})
	}
	return newDirFD(fd, path)
}

// openSub opens the directory name in d without following a symlink.
// A name that is not a directory is refused (ErrUnsafe); a missing one is
// fs.ErrNotExist.
func (d *dirFD) openSub(name string) (*dirFD, error) {
	path := d.name + "/" + name
	var fd int
	err := retry(func() (err error) { fd, err = unix.Openat(d.fd, name, dirFlags, 0); return err })
	if err != nil {
		if st, serr := d.lstat(name); serr == nil && !st.isDir() {
			return nil, fmt.Errorf("spool: %s is a %s, not a directory: %w", path, st.kind(), ErrUnsafe)
		}
		return nil, fmt.Errorf("spool: %w", &fs.PathError{Op: "open", Path: path, Err: err})
	}
	return newDirFD(fd, path)
}

func newDirFD(fd int, path string) (*dirFD, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("spool: %w", &fs.PathError{Op: "fstat", Path: path, Err: err})
	}
	info := infoOf(&st)
	if !info.isDir() {
		unix.Close(fd)
		return nil, fmt.Errorf("spool: %s is a %s, not a directory: %w", path, info.kind(), ErrUnsafe)
	}
	return &dirFD{f: os.NewFile(uintptr(fd), path), fd: fd, name: path, info: info}, nil
}

// lstat stats the entry name of d without following a symlink.
func (d *dirFD) lstat(name string) (fileInfo, error) {
	var st unix.Stat_t
	err := retry(func() error { return unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	if err != nil {
		return fileInfo{}, &fs.PathError{Op: "lstat", Path: d.name + "/" + name, Err: err}
	}
	return infoOf(&st), nil
}

// names lists at most limit entries of d, by name only: nothing is
// resolved. Call it once per dirFD.
func (d *dirFD) names(limit int) ([]string, error) {
	var all []string
	for len(all) < limit {
		ns, err := d.f.Readdirnames(min(limit-len(all), 1024))
		all = append(all, ns...)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return all, fmt.Errorf("spool: list %s: %w", d.name, err)
		}
	}
	return all, nil
}

// openEntry opens the entry name of d for reading, never following a
// symlink nor blocking on a fifo, and returns it with its fstat.
func (d *dirFD) openEntry(name string) (*os.File, fileInfo, error) {
	var fd int
	err := retry(func() (err error) {
		fd, err = unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, fileInfo{}, &fs.PathError{Op: "open", Path: d.name + "/" + name, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fileInfo{}, &fs.PathError{Op: "fstat", Path: d.name + "/" + name, Err: err}
	}
	return os.NewFile(uintptr(fd), d.name+"/"+name), infoOf(&st), nil
}

// create makes the new file name in d (never through a symlink, never
// an existing one).
func (d *dirFD) create(name string, mode os.FileMode) (*os.File, error) {
	var fd int
	err := retry(func() (err error) {
		fd, err = unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode.Perm()))
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: d.name + "/" + name, Err: err}
	}
	return os.NewFile(uintptr(fd), d.name+"/"+name), nil
}

// mkdir makes the directory name in d with exactly mode (permission,
// setgid and sticky bits), whatever the umask; it is not an error that
// it exists.
func (d *dirFD) mkdir(name string, mode uint32) error {
	err := retry(func() error { return unix.Mkdirat(d.fd, name, 0o700) })
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: d.name + "/" + name, Err: err}
	}
	sub, err := d.openSub(name)
	if err != nil {
		return err
	}
	defer sub.close()
	if err := unix.Fchmod(sub.fd, mode); err != nil {
		return &fs.PathError{Op: "chmod", Path: sub.name, Err: err}
	}
	return nil
}

// renameTo moves the entry name of d to the same name in to.
func (d *dirFD) renameTo(name string, to *dirFD) error {
	if err := retry(func() error { return unix.Renameat(d.fd, name, to.fd, name) }); err != nil {
		return &os.LinkError{Op: "rename", Old: d.name + "/" + name, New: to.name + "/" + name, Err: err}
	}
	return nil
}

// remove removes the entry name of d (an empty directory too); a
// symlink is removed itself, never its target.
func (d *dirFD) remove(name string, isDir bool) error {
	flags := 0
	if isDir {
		flags = unix.AT_REMOVEDIR
	}
	if err := retry(func() error { return unix.Unlinkat(d.fd, name, flags) }); err != nil {
		return &fs.PathError{Op: "remove", Path: d.name + "/" + name, Err: err}
	}
	return nil
}

// sync makes d's entries durable.
func (d *dirFD) sync() error { return d.f.Sync() }

func euid() uint32 { return uint32(os.Geteuid()) }
