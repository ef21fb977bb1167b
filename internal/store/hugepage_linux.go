package store

import "golang.org/x/sys/unix"

// adviseHuge asks for transparent huge pages for b (allocSlots).
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
