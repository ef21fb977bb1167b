package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// serveSocket serves the report socket handler on a real unix socket.
func serveSocket(t *testing.T, o SocketOptions) (string, *store.Badger) {
	t.Helper()
	return serveSocketWith(t, o, campaign.Options{})
}

// serveSocketWith is serveSocket over an engine with options.
func serveSocketWith(t *testing.T, o SocketOptions, eo campaign.Options) (string, *store.Badger) {
	t.Helper()
	eng, st := newEngineWith(t, eo)
	return serveSocketEngine(t, o, eng), st
}

// serveSocketEngine serves the report socket handler over eng and returns
// the socket's path.
func serveSocketEngine(t *testing.T, o SocketOptions, eng *campaign.Engine) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("peer credentials are read on Linux only")
	}
	path := filepath.Join(t.TempDir(), "report.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: NewSocketHandler(eng.Ingester, o), ConnContext: SocketConnContext, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return path
}

// socketClient is a Client of the report socket at path; timeout bounds
// each request, connection included.
func socketClient(path string, timeout time.Duration) *Client {
	var d net.Dialer
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: true,
	}
	return &Client{BaseURL: "http://nddmilter-report-socket", HTTP: &http.Client{Transport: tr, Timeout: timeout}}
}

func TestReportSocket(t *testing.T) {
	path, st := serveSocket(t, SocketOptions{})
	c := socketClient(path, 5*time.Second)
	ctx := context.Background()
	o, err := c.Report(ctx, spamMessage(), store.KindSpam, "alice@example.org")
	if err != nil {
		t.Fatalf("report as our own user: %v", err)
	}
	if !o.Created || o.Campaign == 0 {
		t.Fatalf("outcome %+v", o)
	}
	if o, err = c.Report(ctx, spamMessage(), store.KindSpam, "alice@example.org"); err != nil || !o.Duplicate {
		t.Fatalf("same message again: %+v %v", o, err)
	}
	if reps, _ := st.Reporters(ctx, o.Campaign, 0); len(reps) != 1 || reps[0].Hash != store.ReporterHash("alice@example.org") {
		t.Errorf("reporters %+v", reps)
	}
	tests := []struct {
		name   string
		do     func() error
		status int
	}{
		{"no reporter", func() error { _, err := c.Report(ctx, spamMessage(), store.KindSpam, ""); return err }, http.StatusBadRequest},
		{"long reporter", func() error {
			_, err := c.Report(ctx, spamMessage(), store.KindSpam, strings.Repeat("a", campaign.MaxReporterLen+1))
			return err
		}, http.StatusBadRequest},
		{"a check", func() error { _, err := c.Check(ctx, spamMessage(), false); return err }, http.StatusNotFound},
		{"a listing", func() error { _, err := c.List(ctx, ListQuery{}); return err }, http.StatusNotFound},
		{"a deletion", func() error { return c.Delete(ctx, o.Campaign) }, http.StatusNotFound},
	}
	for _, tc := range tests {
		var ae *Error
		if err := tc.do(); !errors.As(err, &ae) || ae.Status != tc.status {
			t.Errorf("%s: %v, want HTTP %d", tc.name, err, tc.status)
		}
	}
}

func TestReportSocketDown(t *testing.T) {
	c := socketClient(filepath.Join(t.TempDir(), "none.sock"), time.Second)
	start := time.Now()
	if _, err := c.Report(context.Background(), spamMessage(), store.KindSpam, "alice"); err == nil {
		t.Fatal("report to no daemon succeeded")
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("failing took %s", d)
	}
}

func TestSocketAllowed(t *testing.T) {
	self := uint32(os.Getuid())
	s := &socketHandler{uids: []uint32{5000}, gids: []uint32{8}, selfU: self}
	if self == 0 {
		s.selfU = 4242 // as the nddmilter user
	}
	tests := []struct {
		pc PeerCred
		ok bool
	}{
		{PeerCred{UID: 0, GID: 0}, true},
		{PeerCred{UID: s.selfU, GID: 100}, true},
		{PeerCred{UID: 5000, GID: 5000}, true},
		{PeerCred{UID: 1001, GID: 8}, true},
		{PeerCred{UID: 1001, GID: 1001}, false},
		{PeerCred{UID: 65534, GID: 65534}, false},
	}
	for _, tc := range tests {
		if err := s.allowed(tc.pc); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want allowed %v", tc.pc, err, tc.ok)
		}
	}
}

// PeerCredOf reads the peer of a real unix socket.
func TestPeerCred(t *testing.T) {
	path, _ := serveSocket(t, SocketOptions{})
	h := &socketHandler{selfU: uint32(os.Getuid())}
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pc, err := PeerCredOf(conn)
	if err != nil {
		t.Fatalf("PeerCredOf: %v", err)
	}
	// The server sees this process (the same pid): its uid is allowed.
	if pc.PID != int32(os.Getpid()) || pc.UID != uint32(os.Getuid()) || h.allowed(pc) != nil {
		t.Errorf("peer %+v", pc)
	}
	if _, err := PeerCredOf(&net.TCPConn{}); !errors.Is(err, ErrNoPeerCred) {
		t.Errorf("tcp connection: %v", err)
	}
}

// Red-team finding 8 through the report socket (what Dovecot's pipe
// uses): the spellings of one IMAP user are one reporter; an id of white
// space only is no reporter.
func TestReportSocketReporterSpellings(t *testing.T) {
	path, st := serveSocketWith(t, SocketOptions{}, campaign.Options{ReporterRealm: "example.org"})
	c := socketClient(path, 5*time.Second)
	ctx := context.Background()
	var id store.CampaignID
	for i, who := range []string{"mallory", "Mallory", "MALLORY", "mallory@example.org", " Mallory@EXAMPLE.org"} {
		o, err := c.Report(ctx, spamCopy(t, uint64(i+1)), store.KindSpam, who)
		if err != nil {
			t.Fatalf("report as %q: %v", who, err)
		}
		id = o.Campaign
	}
	reps, err := st.Reporters(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].Hash != store.ReporterHash("mallory") {
		t.Errorf("reporters %+v, want mallory once", reps)
	}
	var ae *Error
	if _, err := c.Report(ctx, spamMessage(), store.KindSpam, "   "); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Errorf("white-space reporter: %v, want HTTP 400", err)
	}
}
