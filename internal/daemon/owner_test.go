package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckStoreOwner: root may not open a store directory that belongs
// to another user (the package's nddmilter); anyone else, or a directory
// root owns or that does not exist yet, passes.
func TestCheckStoreOwner(t *testing.T) {
	dir := t.TempDir()
	owner := func(uid int) func(os.FileInfo) (int, bool) {
		return func(os.FileInfo) (int, bool) { return uid, true }
	}
	tests := []struct {
		name    string
		dir     string
		euid    int
		owner   func(os.FileInfo) (int, bool)
		wantErr bool
	}{
		{"root on another user's store", dir, 0, owner(999), true},
		{"root on its own store", dir, 0, owner(0), false},
		{"the owner itself", dir, 999, owner(999), false},
		{"another non-root user", dir, 1000, owner(999), false},
		{"root, no store yet", filepath.Join(dir, "new"), 0, owner(999), false},
		{"root, owner unknown", dir, 0, func(os.FileInfo) (int, bool) { return 0, false }, false},
	}
	for _, tt := range tests {
		err := checkStoreOwner(tt.dir, tt.euid, tt.owner)
		if got := errors.Is(err, ErrStoreOwner); got != tt.wantErr {
			t.Errorf("%s: %v, want ErrStoreOwner %v", tt.name, err, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "runuser -u") {
			t.Errorf("%s: %v does not say what to do", tt.name, err)
		}
	}
}
