//go:build linux

package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const diskFullHelperEnv = "NDD_STORE_DISKFULL_DIR"

// diskFullReports is how many reports the helper acknowledges before the
// disk is filled.
const diskFullReports = 300

// diskFullMin is the helper's and the tests' store.min_free_bytes.
const diskFullMin = 16 << 20

// TestHelperDiskFull is not a test: run as a child process by the
// disk-full tests, it opens the store in $NDD_STORE_DISKFULL_DIR,
// acknowledges diskFullReports reports (killReport), prints "acked",
// and on a line "close" on its standard input closes the store, prints
// "closed: ERR" and exits 0 (a SIGBUS kills it instead).
func TestHelperDiskFull(t *testing.T) {
	dir := os.Getenv(diskFullHelperEnv)
	if dir == "" {
		t.Skip("helper process for the disk-full tests")
	}
	s, err := Open(dir, Options{MinFreeBytes: diskFullMin, Logger: testLogger(t)})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	for i := 0; i < diskFullReports; i++ {
		if _, err := s.Report(ctx, killReport(i)); err != nil {
			fmt.Println("report:", err)
			os.Exit(2)
		}
	}
	fmt.Println("acked")
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(line) != "close" {
		os.Exit(3)
	}
	fmt.Printf("closed: %v\n", s.Close())
	os.Exit(0)
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// at the end of the test; the test is skipped when this process may not
// mount (not root, no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("nddmilter-test", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes path until its filesystem has no space left, as
// another process filling the disk would.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for chunk := len(buf); chunk >= 512; {
		if _, err := f.Write(buf[:chunk]); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			chunk /= 2
		}
	}
	if free, err := freeSpace(filepath.Dir(path)); err != nil || free > 64<<10 {
		t.Fatalf("filled, yet %d bytes free (%v)", free, err)
	}
}

// A store on a filesystem another process filled: a Close (or a crash)
// there does not die with SIGBUS, the store opens read-only on the full
// disk (Badger's write-ahead log replayed in memory) with every
// acknowledged report, and read-write again once space is freed, every
// acknowledged report still there. On a real tmpfs (mounted here: root
// only), where Badger's memory maps fault on a full disk even when read.
func TestFullDiskCloseAndRestart(t *testing.T) {
	if os.Getenv(diskFullHelperEnv) != "" {
		t.Skip("in the helper")
	}
	for _, end := range []string{"close", "kill"} {
		t.Run(end, func(t *testing.T) {
			mnt := mountTmpfs(t, 96<<20)
			dir := filepath.Join(mnt, "store")
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDiskFull$", "-test.count=1")
			cmd.Env = append(os.Environ(), diskFullHelperEnv+"="+dir)
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := make(chan string, 16)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			next := func() string {
				select {
				case l := <-lines:
					return l
				case <-time.After(60 * time.Second):
					cmd.Process.Kill()
					t.Fatal("helper silent for 60 s")
					return ""
				}
			}
			if l := next(); l != "acked" {
				cmd.Wait()
				t.Fatalf("helper: %q", l)
			}
			fillDisk(t, filepath.Join(mnt, "filler"))

			if end == "close" {
				io.WriteString(in, "close\n")
				l := next()
				err := cmd.Wait()
				if err != nil {
					t.Fatalf("the store's Close on a full disk: helper %v (%q)", err, l)
				}
				if !strings.HasPrefix(l, "closed: ") || !strings.Contains(l, "disk nearly full") {
					t.Fatalf("Close on a full disk: %q, want an ErrDiskFull error", l)
				}
			} else {
				cmd.Process.Kill()
				cmd.Wait()
			}

			// Started on the full disk: read-only, everything there.
			opts := Options{MinFreeBytes: diskFullMin}
			ro := openTest(t, dir, opts)
			if _, full, _ := ro.DiskState(); !full {
				t.Error("DiskState does not say full")
			}
			for i := 0; i < diskFullReports; i++ {
				if lookupOne(t, ro, fmt.Sprintf("kill-%d", i)) == 0 {
					t.Fatalf("read-only on a full disk: acknowledged report %d missing", i)
				}
			}
			if _, err := ro.Report(ctx, killReport(diskFullReports)); !errors.Is(err, ErrDiskFull) || !errors.Is(err, ErrReadOnly) {
				t.Fatalf("report on a read-only start: %v, want ErrDiskFull and ErrReadOnly", err)
			}
			if err := ro.Close(); err != nil {
				t.Fatalf("close read-only: %v", err)
			}

			// Space freed: read-write, the log replayed, writes go on.
			if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
				t.Fatal(err)
			}
			s := openTest(t, dir, opts)
			for i := 0; i < diskFullReports; i++ {
				if lookupOne(t, s, fmt.Sprintf("kill-%d", i)) == 0 {
					t.Fatalf("after space was freed: acknowledged report %d missing", i)
				}
			}
			mustReport(t, s, killReport(diskFullReports))
			verifyClean(t, s)
			if err := s.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*"+walExt)); len(left) != 0 {
				t.Errorf("write-ahead logs left after a clean close: %v", left)
			}
		})
	}
}

// killedHelper runs TestHelperDiskFull on dir until it has acknowledged
// its reports, and kills it (no Close: as a crash or kill -9 leaves the
// store).
func killedHelper(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDiskFull$", "-test.count=1")
	cmd.Env = append(os.Environ(), diskFullHelperEnv+"="+dir)
	if _, err := cmd.StdinPipe(); err != nil { // kept open: the helper waits on it
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	got := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		got <- strings.TrimSpace(l)
	}()
	select {
	case l := <-got:
		if l != "acked" {
			t.Fatalf("helper: %q", l)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("helper silent for 60 s")
	}
}

// A store killed while idle, then started on a full disk: it comes up
// read-only with every acknowledged report, its write-ahead log replayed
// in memory (Badger's own recovery would need a read-write open that
// writes new files). The full disk is the injected free space here (no
// root needed).
func TestReadOnlyStartAfterCrashOnFullDisk(t *testing.T) {
	if os.Getenv(diskFullHelperEnv) != "" {
		t.Skip("in the helper")
	}
	dir := t.TempDir()
	killedHelper(t, dir)
	wals, _ := filepath.Glob(filepath.Join(dir, "*"+walExt))
	if len(wals) == 0 {
		t.Fatal("the killed store left no write-ahead log")
	}
	full := Options{MinFreeBytes: diskFullMin, FreeSpace: func(string) (int64, error) { return 0, nil }}
	ro := openTest(t, dir, full)
	for i := 0; i < diskFullReports; i++ {
		if lookupOne(t, ro, fmt.Sprintf("kill-%d", i)) == 0 {
			t.Fatalf("acknowledged report %d missing", i)
		}
	}
	if _, err := ro.Report(ctx, killReport(diskFullReports)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("report on a read-only start: %v, want ErrDiskFull", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, dir, Options{MinFreeBytes: diskFullMin})
	for i := 0; i < diskFullReports; i++ {
		if lookupOne(t, s, fmt.Sprintf("kill-%d", i)) == 0 {
			t.Fatalf("read-write after the read-only start: acknowledged report %d missing", i)
		}
	}
	verifyClean(t, s)
}

// trimWAL cuts only zeros: a log with anything but zeros after its last
// complete transaction (a transaction torn by a crash) is left whole for
// Badger's recovery; zeros after it are cut, and Badger's read-only open
// then takes the log (it refuses one longer than its valid end).
func TestTrimWAL(t *testing.T) {
	if os.Getenv(diskFullHelperEnv) != "" {
		t.Skip("in the helper")
	}
	dir := t.TempDir()
	killedHelper(t, dir)
	wals, _ := filepath.Glob(filepath.Join(dir, "*"+walExt))
	var path string
	var end, size int64
	for _, p := range wals {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		e, err := walValidEnd(f, fi.Size())
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if e > walHeaderSize {
			path, end, size = p, e, fi.Size()
		}
	}
	if path == "" {
		t.Fatalf("no write-ahead log with entries among %v", wals)
	}
	if end >= size {
		t.Fatalf("log %s: valid end %d, size %d: not left sparse by the crash", path, end, size)
	}
	log := testLogger(t)

	// A torn transaction after the valid end: nothing cut.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{0x40, 0, 12, 3}, end+1000); err != nil {
		t.Fatal(err)
	}
	if changed, err := trimWAL(path, log); err != nil || changed {
		t.Fatalf("trimWAL with a torn tail: changed %v, %v; want left alone", changed, err)
	}
	if fi, _ := f.Stat(); fi.Size() != size {
		t.Fatalf("torn tail: size %d, want %d", fi.Size(), size)
	}

	// Zeros after it: cut at the valid end.
	if _, err := f.WriteAt(make([]byte, 4), end+1000); err != nil {
		t.Fatal(err)
	}
	if changed, err := trimWAL(path, log); err != nil || !changed {
		t.Fatalf("trimWAL: changed %v, %v", changed, err)
	}
	if fi, _ := f.Stat(); fi.Size() != end {
		t.Fatalf("trimmed to %d bytes, want %d", fi.Size(), end)
	}
	ro := openTest(t, dir, Options{ReadOnly: true})
	for i := 0; i < diskFullReports; i++ {
		if lookupOne(t, ro, fmt.Sprintf("kill-%d", i)) == 0 {
			t.Fatalf("after trimming: acknowledged report %d missing", i)
		}
	}
}

// Badger's write-ahead log is preallocated: with the disk filled by
// another process after the guard last measured it (here, a guard that
// sees plenty of space), writes go on into the log, not a SIGBUS.
func TestWALPreallocated(t *testing.T) {
	if os.Getenv(diskFullHelperEnv) != "" {
		t.Skip("in the helper")
	}
	mnt := mountTmpfs(t, 96<<20)
	dir := filepath.Join(mnt, "store")
	var blind atomic.Bool
	blind.Store(true)
	opts := Options{MinFreeBytes: diskFullMin, FreeSpace: func(d string) (int64, error) {
		if blind.Load() {
			return 1 << 40, nil
		}
		return freeSpace(d)
	}}
	s := openTest(t, dir, opts)
	mustReport(t, s, killReport(0))
	wals, _ := filepath.Glob(filepath.Join(dir, "*"+walExt))
	if len(wals) != 1 {
		t.Fatalf("write-ahead logs %v, want one", wals)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(wals[0], &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 < walPreallocBytes {
		t.Fatalf("write-ahead log %s: %d bytes allocated, want %d", wals[0], st.Blocks*512, walPreallocBytes)
	}
	fillDisk(t, filepath.Join(mnt, "filler"))
	for i := 1; i < 2000; i++ {
		mustReport(t, s, killReport(i))
	}
	blind.Store(false)
	if err := s.Close(); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Close on the full disk: %v, want ErrDiskFull", err)
	}
}
