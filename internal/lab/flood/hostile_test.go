package flood

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// testToken is the API token of the test daemon (at least 16 characters,
// as config check demands).
const testToken = "hostile-test-token-0123456789"

// The hostile-content attack, small, against the daemon run in process
// with its default settings: every copy gets a verdict, the campaign's
// plain copies and its copies padded after intact text are rejected, and
// the API answers the large encoded-word message.
func TestRunHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	dir := t.TempDir()
	milterAddr, httpAddr := freeAddr(t), freeAddr(t)
	cfgPath := filepath.Join(dir, "nddmilter.yaml")
	cfg := fmt.Sprintf("milter:\n  listen: inet:%s\nhttp:\n  listen: %s\n  token: %s\nstore:\n  dir: %s\nlog:\n  level: error\n",
		milterAddr, httpAddr, testToken, filepath.Join(dir, "store"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, LogOutput: io.Discard}) }()
	defer func() {
		cancel()
		<-done
	}()
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("daemon stopped: %v", err)
		default:
		}
		if i == 300 {
			t.Fatal("daemon not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}

	o := HostileOptions{
		Network: "tcp", Addr: milterAddr, APIURL: "http://" + httpAddr, Token: testToken,
		Sessions: 4, Copies: len(spamgen.HostileKinds()), Ordinary: 2,
		BodyBytes: 64 << 10, HeaderBytes: 32 << 10, APIBytes: 256 << 10,
		IdleWindow: 10 * time.Millisecond, Timeout: time.Minute,
	}
	res, err := RunHostile(context.Background(), o)
	var out strings.Builder
	res.Print(&out, o)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Before != "reject" {
		t.Errorf("a copy of the reported campaign: %s, want reject", res.Before)
	}
	if n := res.Unchecked(); n != 0 {
		t.Errorf("%d copies unchecked or unanswered", n)
	}
	if res.Ordinary.Actions["reject"] != 2 {
		t.Errorf("plain copies: %v, want 2 rejected", res.Ordinary.Actions)
	}
	for _, k := range res.Kinds {
		switch spamgen.Hostile(k.Kind) {
		case spamgen.FDFAPadding, spamgen.EncodedWordFlood, spamgen.LongLine:
			if k.Actions["reject"] != 1 {
				t.Errorf("%s: %v, want rejected (the campaign's text is intact before the padding)", k.Kind, k.Actions)
			}
		}
	}
	for _, a := range res.API {
		if a.Status != http.StatusOK {
			t.Errorf("API %s: status %d (%s)", a.Route, a.Status, a.Answer)
		}
	}
}
