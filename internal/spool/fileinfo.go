package spool

import (
	"io/fs"
	"time"
)

// fileInfo is what the spool needs of a stat (fsys_unix.go makes them).
type fileInfo struct {
	typ      fs.FileMode // the type bits only (0 for a regular file)
	mode     uint32      // permission, setuid, setgid and sticky bits
	uid      uint32
	nlink    uint64
	size     int64
	mtime    time.Time
	dev, ino uint64
}

func (i fileInfo) isDir() bool     { return i.typ == fs.ModeDir }
func (i fileInfo) isRegular() bool { return i.typ == 0 }
func (i fileInfo) perm() uint32    { return i.mode }

// same tells whether i and j are the same file.
func (i fileInfo) same(j fileInfo) bool { return i.dev == j.dev && i.ino == j.ino }

// kind names the file's type for messages.
func (i fileInfo) kind() string {
	switch i.typ {
	case 0:
		return "regular file"
	case fs.ModeDir:
		return "directory"
	case fs.ModeSymlink:
		return "symlink"
	case fs.ModeNamedPipe:
		return "fifo"
	case fs.ModeSocket:
		return "socket"
	case fs.ModeDevice:
		return "device"
	}
	return "special file"
}
