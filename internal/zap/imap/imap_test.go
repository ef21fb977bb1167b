package imap

import (
	"context"
	"testing"

	"github.com/nddmilter/nddmilter/internal/testutil/dovecot"
	"github.com/nddmilter/nddmilter/internal/zap/move"
)

// The backend against a real Dovecot, logged in as its master user.
func TestIMAPRealDovecot(t *testing.T) {
	s := dovecot.Start(t, "alice", "bob", "carol")
	c, err := New(Options{Addr: s.IMAPAddr, TLS: TLSNone, MasterUser: dovecot.MasterUser, Password: dovecot.MasterPassword})
	if err != nil {
		t.Fatal(err)
	}
	dovecot.Conformance(t, s, c)

	// A wrong master password: an error (retried), nothing moved.
	bad, _ := New(Options{Addr: s.IMAPAddr, TLS: TLSNone, MasterUser: dovecot.MasterUser, Password: "wrong"})
	req := move.Request{User: "alice", MessageID: "c7@spam.example", Sources: []string{"INBOX"}, Junk: "Junk"}
	if _, err := bad.Move(context.Background(), req); err == nil {
		t.Error("a wrong master password moved")
	}
}

func TestIMAPOptions(t *testing.T) {
	for _, o := range []Options{
		{Addr: "nohost", MasterUser: "m", Password: "p"},
		{Addr: "127.0.0.1:143", TLS: "ssl3", MasterUser: "m", Password: "p"},
		{Addr: "127.0.0.1:143", MasterUser: "m"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if got := headerID([]byte("Message-ID: <a@b>\r\n\r\n")); got != "a@b" {
		t.Errorf("headerID = %q", got)
	}
}
