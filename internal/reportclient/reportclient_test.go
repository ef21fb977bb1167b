package reportclient

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/spool"
)

const msg = "From: a@example.org\r\nSubject: hi\r\n\r\nbody\r\n"

// serve answers on a unix socket with status and body, recording the
// last request's query and body.
func serve(t *testing.T, status int, body string) (sock string, got *http.Request, gotBody *string) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "r.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	got, gotBody = new(http.Request), new(string)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*got, *gotBody = *r, string(b)
		w.WriteHeader(status)
		io.WriteString(w, body)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock, got, gotBody
}

func TestSend(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   string
		spool  bool
		want   Status
		spools int
	}{
		{"taken", 200, `{"campaign":7}`, true, Reported, 0},
		{"refused", 403, `{"error":"uid 1 may not report here"}`, true, Refused, 0},
		{"daemon trouble is spooled", 503, `{"error":"overloaded"}`, true, Spooled, 1},
		{"too many requests is spooled", 429, ``, true, Spooled, 1},
		{"no spool", 500, ``, false, NotReported, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sock, req, body := serve(t, tt.status, tt.body)
			o := Options{Socket: sock, Reporter: "alice@example.org", Kind: "junk"}
			dir := mkSpool(t)
			if tt.spool {
				o.SpoolDir = dir
			}
			res, err := Send(context.Background(), o, strings.NewReader(msg))
			if err != nil || res.Status != tt.want {
				t.Fatalf("Send = %v (%s), %v; want %v", res.Status, res.Detail, err, tt.want)
			}
			if q := req.URL.Query(); q.Get("kind") != "spam" || q.Get("reporter") != "alice@example.org" || *body != msg {
				t.Errorf("request %v body %q", req.URL, *body)
			}
			if n := countFiles(t, filepath.Join(dir, "new")); n != tt.spools {
				t.Errorf("%d spooled, want %d", n, tt.spools)
			}
		})
	}
}

func TestSendDaemonDown(t *testing.T) {
	dir := t.TempDir()
	o := Options{Socket: filepath.Join(dir, "none.sock"), SpoolDir: mkSpool(t),
		Reporter: "bob", Kind: "ham", Timeout: time.Second}
	res, err := Send(context.Background(), o, strings.NewReader(msg))
	if err != nil || res.Status != Spooled {
		t.Fatalf("Send = %v (%s), %v", res.Status, res.Detail, err)
	}
	if n := countFiles(t, filepath.Join(o.SpoolDir, "new")); n != 1 {
		t.Errorf("%d spooled", n)
	}
}

func TestSendHangingDaemonTimesOut(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "h.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // accept and never answer
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	o := Options{Socket: sock, SpoolDir: mkSpool(t), Reporter: "carol", Timeout: 200 * time.Millisecond}
	res, err := Send(context.Background(), o, strings.NewReader(msg))
	if err != nil || res.Status != Spooled {
		t.Fatalf("Send = %v (%s), %v", res.Status, res.Detail, err)
	}
}

func TestSendBadInput(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "x.sock")
	for _, tt := range []struct {
		name  string
		o     Options
		in    string
		usage bool
		want  Status
	}{
		{"no reporter", Options{Socket: sock}, msg, true, 0},
		{"no socket", Options{Reporter: "a"}, msg, true, 0},
		{"bad kind", Options{Socket: sock, Reporter: "a", Kind: "maybe"}, msg, true, 0},
		{"empty", Options{Socket: sock, Reporter: "a"}, " \r\n", false, NotReported},
		{"too large", Options{Socket: sock, Reporter: "a", MaxBytes: 10}, msg, false, NotReported},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Send(context.Background(), tt.o, strings.NewReader(tt.in))
			if tt.usage {
				if !errors.Is(err, ErrUsage) {
					t.Fatalf("err = %v, want ErrUsage", err)
				}
				return
			}
			if err != nil || res.Status != tt.want {
				t.Fatalf("Send = %v, %v", res.Status, err)
			}
		})
	}
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// mkSpool makes a spool directory, as the daemon does (spool.Open wants
// it to exist).
func mkSpool(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "spool")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// A member of the spool's group put a symlink in place of new/ (or of
// tmp/): the report is not written through it, and the pipe says why.
func TestSendSpoolSwapped(t *testing.T) {
	for _, sub := range []string{"tmp", "new"} {
		t.Run(sub, func(t *testing.T) {
			dir := mkSpool(t)
			if _, err := spool.Open(dir, spool.Options{}); err != nil { // the daemon makes tmp/, new/, bad/
				t.Fatal(err)
			}
			elsewhere := t.TempDir()
			p := filepath.Join(dir, sub)
			if err := os.Rename(p, p+".orig"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, p); err != nil {
				t.Fatal(err)
			}
			o := Options{Socket: filepath.Join(dir, "none.sock"), SpoolDir: dir, Reporter: "bob", Timeout: time.Second}
			res, err := Send(context.Background(), o, strings.NewReader(msg))
			if err != nil || res.Status != NotReported || !strings.Contains(res.Detail, "is a symlink, not a directory") {
				t.Fatalf("Send = %v (%s), %v; want not reported, naming the symlink", res.Status, res.Detail, err)
			}
			if n := countFiles(t, elsewhere); n != 0 {
				t.Errorf("%d files written through the symlink", n)
			}
		})
	}
}
