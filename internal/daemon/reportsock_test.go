package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/spool"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/nddmilter/nddmilter/internal/testutil"
)

// The report socket and the spool as the Dovecot pipe uses them: a
// report spooled while the daemon was down is stored when it starts, and
// one sent over the socket is stored at once, under the reporter named.
func TestReportSocketAndSpool(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peer credentials are read on Linux only")
	}
	dir := t.TempDir()
	sock, spoolDir, storeDir := filepath.Join(dir, "report.sock"), filepath.Join(dir, "spool"), filepath.Join(dir, "store")
	if err := os.Mkdir(spoolDir, 0o770); err != nil {
		t.Fatal(err)
	}
	sp, err := spool.Open(spoolDir, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spooled := spamgen.NewMessage("Claim your free luxury chronograph today", "Congratulations! Your address was chosen among our loyal customers to receive a genuine Swiss luxury chronograph, absolutely free of charge, as part of our anniversary celebration. To claim it, confirm your shipping details and cover a small handling fee. Quantities are strictly limited and unclaimed prizes go to the next winner on our waiting list.", false)
	if _, err := sp.Put(spool.Report{Kind: "spam", Reporter: "carol@example.org", Raw: spooled}); err != nil {
		t.Fatal(err)
	}
	// Files that are not reports are set aside, never retried.
	if _, err := sp.Put(spool.Report{Kind: "maybe", Reporter: "x", Raw: spooled}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spoolDir, "new", "1.garbage"), []byte("not a report"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("milter:\n  listen: inet:%s\nhttp:\n  listen: \"\"\napi:\n  socket: %s\n  spool_dir: %s\n  spool_interval: 1s\nstore:\n  dir: %s\nreports:\n  realm: example.org\n",
		freeAddr(t), sock, spoolDir, storeDir)
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{ConfigPath: cfgPath, LogOutput: io.Discard}) }()
	defer func() {
		cancel()
		<-done
	}()

	c := socketClient(sock)
	var o api.Outcome
	deadline := time.Now().Add(15 * time.Second)
	for {
		o, err = c.Report(ctx, spooled, store.KindSpam, "dave@example.org")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("report over the socket: %v", err)
	}
	// The spooled report is ingested at start: the socket's report joins
	// its campaign, or created it and the spooled one joins.
	for time.Now().Before(deadline) {
		if p, _ := sp.Pending(); len(p) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p, _ := sp.Pending(); len(p) != 0 {
		t.Fatalf("spool not ingested: %v", p)
	}
	if bad, _ := os.ReadDir(filepath.Join(spoolDir, "bad")); len(bad) != 2 {
		t.Errorf("set aside: %v, want the 2 files that are not reports", bad)
	}
	if o.Campaign == 0 {
		t.Fatalf("outcome %+v", o)
	}
	// Both reporters are on the campaign (the daemon holds the store:
	// read it through the socket's outcome of a repeat).
	o2, err := c.Report(ctx, spooled, store.KindSpam, "carol@example.org")
	if err != nil || !o2.Duplicate || o2.Campaign != o.Campaign {
		t.Fatalf("carol's report again: %+v %v (her spooled report was not stored?)", o2, err)
	}
	// Red-team finding 8: the spool and the socket normalize reporter
	// ids with reports.realm: " CAROL " is carol@example.org, the same
	// reporter (her repeat of the same message counts once).
	o3, err := c.Report(ctx, spooled, store.KindSpam, " CAROL ")
	if err != nil || !o3.Duplicate || o3.Campaign != o.Campaign {
		t.Fatalf("report as \" CAROL \": %+v %v, want a duplicate of carol@example.org's", o3, err)
	}
}

func TestCheckConfigReportSocket(t *testing.T) {
	tests := []struct {
		users string
		ok    bool
	}{
		{"[root]", true},
		{"[\"0\"]", true},
		{"[no-such-user-ndd]", false},
	}
	for _, tc := range tests {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte("api:\n  socket: /run/x.sock\n  allow_users: "+tc.users+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(path, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := CheckConfig(cfg); (err == nil) != tc.ok {
			t.Errorf("allow_users %s: %v", tc.users, err)
		}
	}
}

// The spool as a member of its group attacks it (docs/SECURITY.md): a
// report file of a user the report socket does not admit, a symlink and
// a hard link to a report outside the spool are refused, logged with
// their reason and counted; the reports of admitted users are stored.
func TestSpoolIngestsOnlyAdmittedOwners(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the spool's owner checks are exercised on Linux")
	}
	root := os.Geteuid() == 0
	if !root {
		t.Log("not root: the files of other owners are left out (they are made with chown)")
	}
	const forgedUID, allowedUID = 4242, 4343
	dir := t.TempDir()
	sock, spoolDir, storeDir := filepath.Join(dir, "report.sock"), filepath.Join(dir, "spool"), filepath.Join(dir, "store")
	if err := os.Mkdir(spoolDir, 0o770); err != nil {
		t.Fatal(err)
	}
	sp, err := spool.Open(spoolDir, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	legit := spamgen.NewMessage("Claim your free luxury chronograph today", "Congratulations! Your address was chosen among our loyal customers to receive a genuine Swiss luxury chronograph, absolutely free of charge, as part of our anniversary celebration. To claim it, confirm your shipping details and cover a small handling fee. Quantities are strictly limited and unclaimed prizes go to the next winner on our waiting list.", false)
	forged := spamgen.NewMessage("Your parcel is waiting at the depot", "We attempted to deliver your parcel today but nobody was at home to sign for it. The parcel is now held at our regional depot for five working days. To arrange a new delivery date, confirm your address and pay the small redelivery fee through our secure customer portal, otherwise the parcel will be returned to the sender.", false)
	if _, err := sp.Put(spool.Report{Kind: "spam", Reporter: "carol@example.org", Raw: legit}); err != nil {
		t.Fatal(err)
	}
	write := func(path, reporter string, raw []byte, uid int) {
		t.Helper()
		hdr := "kind=spam&reporter=" + reporter + "&time=2024-05-01T10%3A00%3A00Z&v=1\n"
		if err := os.WriteFile(path, append([]byte(hdr), raw...), 0o644); err != nil {
			t.Fatal(err)
		}
		if uid >= 0 {
			if err := os.Chown(path, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
	}
	outside := filepath.Join(dir, "outside-report")
	write(outside, "forged@example.org", forged, -1)
	newDir := filepath.Join(spoolDir, "new")
	if err := os.Symlink(outside, filepath.Join(newDir, "3000000000000000000.1.link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(newDir, "3000000000000000000.2.hardlink")); err != nil {
		t.Fatal(err)
	}
	refused := 2
	if root {
		write(filepath.Join(newDir, "3000000000000000000.3.forged"), "forged@example.org", forged, forgedUID)
		write(filepath.Join(newDir, "3000000000000000000.4.allowed"), "dave@example.org", legit, allowedUID)
		refused++
	}
	a := freeAddrs(t, 2)
	httpAddr := a[0]
	cfg := fmt.Sprintf("milter:\n  listen: inet:%s\nhttp:\n  listen: %s\n  token: s3cret-0123456789\napi:\n  socket: %s\n  allow_users: [\"%d\"]\n  spool_dir: %s\n  spool_interval: 1s\nstore:\n  dir: %s\nlog:\n  format: json\n",
		a[1], httpAddr, sock, allowedUID, spoolDir, storeDir)
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.LockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{ConfigPath: cfgPath, LogOutput: logs}) }()
	defer func() {
		cancel()
		<-done
	}()
	waitMetric(t, "http://"+httpAddr, fmt.Sprintf(`nddmilter_errors_total{stage="spool_refused"} %d`, refused))
	if ents, _ := os.ReadDir(newDir); len(ents) != 0 {
		t.Errorf("left in new/: %v", ents)
	}
	if bad, _ := os.ReadDir(filepath.Join(spoolDir, "bad")); len(bad) != 0 {
		t.Errorf("bad/ holds %v: refused entries are removed, not kept", bad)
	}
	if b, err := os.ReadFile(outside); err != nil || !bytes.Contains(b, forged) {
		t.Errorf("the file outside the spool: %v", err)
	}
	for _, want := range []string{`"reason":"a symlink, not a regular file"`, `"reason":"a hard link (2 names): a spool file has one"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s", want)
		}
	}
	if root && !strings.Contains(logs.String(), fmt.Sprintf(`"reason":"owned by uid %d, which may not report (api.allow_users, api.allow_groups)","uid":%d`, forgedUID, forgedUID)) {
		t.Errorf("log lacks the refusal of uid %d's file", forgedUID)
	}

	// The forged message reached no campaign; carol's (and the admitted
	// user's) spooled reports are stored.
	c := socketClient(sock)
	o, err := c.Report(ctx, forged, store.KindSpam, "forged@example.org")
	if err != nil || !o.Created || o.Duplicate {
		t.Errorf("the forged message reported over the socket: %+v, %v; want a new campaign (the spooled forgery was not stored)", o, err)
	}
	reporters := []string{"carol@example.org"}
	if root {
		reporters = append(reporters, "dave@example.org")
	}
	for _, r := range reporters {
		if o, err := c.Report(ctx, legit, store.KindSpam, r); err != nil || !o.Duplicate {
			t.Errorf("%s's report again: %+v, %v; want a duplicate of the spooled one", r, o, err)
		}
	}
}

func TestSpoolAdmit(t *testing.T) {
	// Another user of the system's database, for allow_groups.
	var other *user.User
	for id := 1; id < 1000 && other == nil; id++ {
		if u, err := user.LookupId(strconv.Itoa(id)); err == nil && strconv.Itoa(os.Getuid()) != u.Uid {
			other = u
		}
	}
	type admitCase struct {
		name       string
		uids, gids []uint32
		uid        uint32
		want       bool
	}
	tests := []admitCase{
		{"root", nil, nil, 0, true},
		{"self", nil, nil, uint32(os.Getuid()), true},
		{"listed user", []uint32{4343}, nil, 4343, true},
		{"unlisted user", []uint32{4343}, nil, 4242, false},
		{"unknown user, groups listed", nil, []uint32{4242}, 4242, false},
	}
	if other != nil {
		uid, _ := strconv.ParseUint(other.Uid, 10, 32)
		gid, _ := strconv.ParseUint(other.Gid, 10, 32)
		tests = append(tests,
			admitCase{"primary group listed", nil, []uint32{uint32(gid)}, uint32(uid), true},
			admitCase{"primary group not listed", nil, []uint32{uint32(gid) + 1}, uint32(uid), false})
	} else {
		t.Log("no other user in the user database: allow_groups not checked")
	}
	for _, tc := range tests {
		if got := spoolAdmit(tc.uids, tc.gids)(tc.uid); got != tc.want {
			t.Errorf("%s: uid %d admitted %v, want %v", tc.name, tc.uid, got, tc.want)
		}
	}
}

// socketClient is an API client of the report socket at path.
func socketClient(path string) *api.Client {
	var d net.Dialer
	return &api.Client{BaseURL: "http://nddmilter-report-socket", HTTP: &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		}}}}
}
