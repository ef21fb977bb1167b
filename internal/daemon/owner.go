package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
)

// ErrStoreOwner means that root was about to open a store directory that
// belongs to another user (the package's nddmilter): the files Badger
// would create or rewrite there would belong to root, and the daemon,
// running as that user, could no longer open its store.
var ErrStoreOwner = errors.New("the store belongs to another user")

// checkStoreOwner returns ErrStoreOwner, with what to do instead, when
// this process runs as root and dir exists and belongs to another user.
// owner returns a file's owner uid (ok false where unknown).
func checkStoreOwner(dir string, euid int, owner func(os.FileInfo) (int, bool)) error {
	if euid != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil // not there: whoever creates it owns it
	}
	uid, ok := owner(fi)
	if !ok || uid == 0 {
		return nil
	}
	name := strconv.Itoa(uid)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	return fmt.Errorf("%w: %s belongs to user %s, and files root wrote there would lock that user's daemon out; "+
		"run the command as that user (runuser -u %s -- nddmilter …), or start the daemon (commands then go through its API)",
		ErrStoreOwner, dir, name, name)
}
