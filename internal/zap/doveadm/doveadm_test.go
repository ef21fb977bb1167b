package doveadm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/testutil/dovecot"
	"github.com/nddmilter/nddmilter/internal/zap/move"
)

// The backend against a real Dovecot's doveadm HTTP API, with the API
// key and with the password.
func TestDoveadmRealDovecot(t *testing.T) {
	s := dovecot.Start(t, "alice", "bob", "carol")
	c, err := New(Options{URL: s.HTTPURL, APIKey: dovecot.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	dovecot.Conformance(t, s, c)

	pw, err := New(Options{URL: s.HTTPURL, Password: dovecot.DoveadmPass})
	if err != nil {
		t.Fatal(err)
	}
	req := move.Request{User: "nobody-here", MessageID: "x@y", Sources: []string{"INBOX"}, Junk: "Junk"}
	if res, err := pw.Move(context.Background(), req); err != nil || res.Outcome != move.Failed || res.Reason != move.ReasonNoUser {
		t.Errorf("unknown user: %+v, %v", res, err)
	}
	bad, _ := New(Options{URL: s.HTTPURL, APIKey: "wrong"})
	if _, err := bad.Move(context.Background(), req); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong key: %v", err)
	}
}

func TestDoveadmAnswers(t *testing.T) {
	for _, c := range []struct {
		name, body string
		final      bool
		reason     string
	}{
		{"garbage", `not json`, false, ""},
		{"temp failure", `[["error",{"type":"exitCode","exitCode":75},"c"]]`, false, ""},
		{"no mailbox", `[["error",{"type":"exitCode","exitCode":68},"c"]]`, true, move.ReasonNoMailbox},
		{"odd rows", `[["doveadmResponse",[{"uid":"x"},{"uid":"0"}],"c"]]`, true, move.ReasonNotFound},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(c.body)) }))
		cl, _ := New(Options{URL: srv.URL, APIKey: "k"})
		res, err := cl.Move(context.Background(), move.Request{User: "u", MessageID: "a@b", Sources: []string{"INBOX"}, Junk: "Junk"})
		srv.Close()
		if c.final != (err == nil) || (c.final && res.Reason != c.reason) {
			t.Errorf("%s: %+v, %v", c.name, res, err)
		}
	}
	if _, err := New(Options{URL: "ftp://x"}); err == nil {
		t.Error("bad URL accepted")
	}
	if _, err := New(Options{URL: "http://x"}); err == nil {
		t.Error("no credentials accepted")
	}
}
