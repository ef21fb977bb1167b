// Package dovecot runs a private Dovecot for the tests of zero-hour purge
// (internal/zap): IMAP on a loopback port with passwd-file users and a
// master user (login "user*master"), and the doveadm HTTP API with an
// API key and a password. It needs root (Dovecot drops to the mail user)
// and Debian's dovecot-imapd: without them the test is skipped, saying
// so (test/e2e/zap.sh installs it and runs the tests).
package dovecot

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// Credentials of the server.
const (
	MasterUser     = "ndd-master"
	MasterPassword = "master-secret"
	APIKey         = "api-key-secret"
	DoveadmPass    = "doveadm-secret"
)

// Server is a running private Dovecot.
type Server struct {
	t        testing.TB
	Dir      string
	IMAPAddr string // 127.0.0.1:port
	HTTPURL  string // http://127.0.0.1:port/doveadm/v1
	conf     string
	cmd      *exec.Cmd
}

// Start starts a Dovecot with users (password "pw-" + user) whose mail
// processes run as nobody, each with INBOX and Junk. It skips the test
// without root or without Dovecot.
func Start(t testing.TB, users ...string) *Server {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a private Dovecot (test/e2e/zap.sh runs this test as root)")
	}
	if _, err := exec.LookPath("dovecot"); err != nil {
		t.Skip("no dovecot: install Debian's dovecot-imapd (test/e2e/zap.sh does)")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody to run the mail processes as")
	}
	dir, err := os.MkdirTemp("/tmp", "ndd-dovecot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	mail := filepath.Join(dir, "mail")
	for _, d := range []string{"run", "state", "mail"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := exec.Command("chown", nobody.Uid+":"+nobody.Gid, mail).Run(); err != nil {
		t.Fatal(err)
	}
	var ub bytes.Buffer
	for _, u := range users {
		fmt.Fprintf(&ub, "%s:{PLAIN}pw-%s:%s:%s::%s/%s::\n", u, u, nobody.Uid, nobody.Gid, mail, u)
	}
	write(t, filepath.Join(dir, "users"), ub.String())
	write(t, filepath.Join(dir, "masters"), fmt.Sprintf("%s:{PLAIN}%s\n", MasterUser, MasterPassword))
	s := &Server{t: t, Dir: dir, conf: filepath.Join(dir, "dovecot.conf")}
	imapPort, httpPort := freePort(t), freePort(t)
	s.IMAPAddr = fmt.Sprintf("127.0.0.1:%d", imapPort)
	s.HTTPURL = fmt.Sprintf("http://127.0.0.1:%d/doveadm/v1", httpPort)
	write(t, s.conf, fmt.Sprintf(`base_dir = %[1]s/run
state_dir = %[1]s/state
instance_name = ndd-test-%[2]d-%[3]d
log_path = %[1]s/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
auth_master_user_separator = *
first_valid_uid = %[4]s
last_valid_uid = %[4]s
mail_location = maildir:~/Maildir
passdb {
  driver = passwd-file
  args = scheme=PLAIN %[1]s/masters
  master = yes
  result_success = continue
}
passdb {
  driver = passwd-file
  args = scheme=PLAIN %[1]s/users
}
userdb {
  driver = passwd-file
  args = %[1]s/users
}
namespace inbox {
  inbox = yes
  separator = /
  mailbox Junk {
    special_use = \Junk
    auto = create
  }
}
doveadm_api_key = %[7]s
doveadm_password = %[8]s
service doveadm {
  inet_listener http {
    address = 127.0.0.1
    port = %[6]d
  }
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = %[5]d
  }
  inet_listener imaps {
    port = 0
  }
  chroot =
}
service anvil {
  chroot =
}
`, dir, os.Getpid(), imapPort, nobody.Uid, imapPort, httpPort, APIKey, DoveadmPass))
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

func write(t testing.TB, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start starts the server again after Stop.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command("dovecot", "-F", "-c", s.conf)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start dovecot: %v", err)
	}
	s.cmd = cmd
	for range 150 {
		c1, e1 := net.Dial("tcp", s.IMAPAddr)
		c2, e2 := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(s.HTTPURL, "/doveadm/v1"), "http://"))
		if e1 == nil && e2 == nil {
			c1.Close()
			c2.Close()
			return
		}
		if c1 != nil {
			c1.Close()
		}
		if c2 != nil {
			c2.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(s.Dir, "dovecot.log"))
	s.t.Fatalf("dovecot did not start: %s\n%s", out.String(), log)
}

// Stop stops the server (its mail stays).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// Log is the server's log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "dovecot.log"))
	return string(b)
}

func (s *Server) login(u string) *imapclient.Client {
	s.t.Helper()
	c, err := imapclient.DialInsecure(s.IMAPAddr, nil)
	if err != nil {
		s.t.Fatalf("imap dial: %v", err)
	}
	if err := c.Login(u, "pw-"+u).Wait(); err != nil {
		c.Close()
		s.t.Fatalf("imap login %s: %v", u, err)
	}
	return c
}

// Deliver appends a message to a user's mailbox, read (\Seen) or not,
// with its internal date.
func (s *Server) Deliver(u, mailbox string, raw []byte, seen bool, date time.Time) {
	s.t.Helper()
	c := s.login(u)
	defer c.Close()
	var flags []imap.Flag
	if seen {
		flags = append(flags, imap.FlagSeen)
	}
	cmd := c.Append(mailbox, int64(len(raw)), &imap.AppendOptions{Flags: flags, Time: date})
	cmd.Write(raw)
	cmd.Close()
	if _, err := cmd.Wait(); err != nil {
		s.t.Fatalf("append to %s of %s: %v", mailbox, u, err)
	}
}

// Message is a message in a mailbox.
type Message struct {
	UID       uint32
	MessageID string
	Seen      bool
}

// List lists a user's mailbox: the Message-IDs in UID order.
func (s *Server) List(u, mailbox string) []Message {
	s.t.Helper()
	c := s.login(u)
	defer c.Close()
	sd, err := c.Select(mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		s.t.Fatalf("select %s of %s: %v", mailbox, u, err)
	}
	if sd.NumMessages == 0 {
		return nil
	}
	sec := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"Message-ID"}, Peek: true}
	msgs, err := c.Fetch(imap.SeqSet{imap.SeqRange{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, Flags: true, BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
	if err != nil {
		s.t.Fatalf("fetch %s of %s: %v", mailbox, u, err)
	}
	var out []Message
	for _, m := range msgs {
		id := ""
		for _, b := range m.BodySection {
			id = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b.Bytes)), "Message-ID:"))
			id = strings.Trim(id, "<>")
		}
		seen := false
		for _, f := range m.Flags {
			seen = seen || f == imap.FlagSeen
		}
		out = append(out, Message{UID: uint32(m.UID), MessageID: id, Seen: seen})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// IDs are the Message-IDs in a user's mailbox.
func (s *Server) IDs(u, mailbox string) []string {
	var ids []string
	for _, m := range s.List(u, mailbox) {
		ids = append(ids, m.MessageID)
	}
	return ids
}

// MoveAsUser moves the message with Message-ID id from one of the user's
// mailboxes to another, as the user's mail client does.
func (s *Server) MoveAsUser(u, from, to, id string) {
	s.t.Helper()
	c := s.login(u)
	defer c.Close()
	if _, err := c.Select(from, nil).Wait(); err != nil {
		s.t.Fatalf("select %s of %s: %v", from, u, err)
	}
	sd, err := c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: "<" + id + ">"}}}, nil).Wait()
	if err != nil || len(sd.AllUIDs()) != 1 {
		s.t.Fatalf("search %s in %s of %s: %v %v", id, from, u, sd, err)
	}
	if _, err := c.Move(imap.UIDSetNum(sd.AllUIDs()...), to).Wait(); err != nil {
		s.t.Fatalf("move %s of %s: %v", id, u, err)
	}
}

// Raw is a small message with Message-ID id.
func Raw(id, subject string) []byte {
	return []byte("From: sender@example.net\r\nTo: user@example.org\r\nSubject: " + subject +
		"\r\nMessage-ID: <" + id + ">\r\nDate: Sun, 01 Nov 2026 12:00:00 +0000\r\n\r\nBody of " + id + ".\r\n")
}
