//go:build !unix

package spool

import (
	"errors"
	"fmt"
	"os"
)

// The spool needs openat and O_NOFOLLOW (fsys_unix.go): elsewhere every
// operation fails.

var errUnsupported = fmt.Errorf("spool: needs a Unix system: %w", errors.ErrUnsupported)

type dirFD struct {
	name string
	info fileInfo
}

func (d *dirFD) close()                         {}
func openRoot(string) (*dirFD, error)           { return nil, errUnsupported }
func (d *dirFD) openSub(string) (*dirFD, error) { return nil, errUnsupported }
func (d *dirFD) lstat(string) (fileInfo, error) { return fileInfo{}, errUnsupported }
func (d *dirFD) names(int) ([]string, error)    { return nil, errUnsupported }
func (d *dirFD) openEntry(string) (*os.File, fileInfo, error) {
	return nil, fileInfo{}, errUnsupported
}
func (d *dirFD) create(string, os.FileMode) (*os.File, error) { return nil, errUnsupported }
func (d *dirFD) mkdir(string, uint32) error                   { return errUnsupported }
func (d *dirFD) renameTo(string, *dirFD) error                { return errUnsupported }
func (d *dirFD) remove(string, bool) error                    { return errUnsupported }
func (d *dirFD) sync() error                                  { return errUnsupported }
func euid() uint32                                            { return 0 }
func isSymlinkErr(error) bool                                 { return false }
