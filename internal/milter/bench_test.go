package milter

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/lab/mtadial"
	"github.com/nddmilter/nddmilter/internal/metrics"
)

// fixedChecker returns the same verdict at no cost: BenchmarkSession
// measures the milter path alone (the engine has its own benchmarks).
type fixedChecker struct{ v campaign.Verdict }

func (c fixedChecker) CheckWith(ctx context.Context, raw []byte, o campaign.CheckOptions) (campaign.Verdict, error) {
	return c.v, nil
}

// BenchmarkSession is one message through the milter protocol over
// loopback TCP, as Postfix sends it (MAIL, RCPT, 9 headers, end of
// headers, a 5 KB body, end of message), with the info log line written
// (to io.Discard) and the metrics counted. ns/op and allocs/op include the
// go-milter client, which runs in the same process, buffering its socket
// as Postfix does. "no-reply" is what Postfix negotiates (protocol 6, no
// reply before end of message); "reply-each-step" is an MTA that waits
// for a reply to every packet (protocol 2).
func BenchmarkSession(b *testing.B) {
	for _, mode := range []struct {
		name  string
		proto gomilter.OptProtocol
	}{{"no-reply", postfixProtocol}, {"reply-each-step", 0}} {
		for _, tc := range []struct {
			name string
			v    campaign.Verdict
		}{
			{"accept", campaign.Verdict{Action: action.Accept, Rule: "accept: no campaign matched"}},
			{"tag", campaign.Verdict{Action: action.Tag, Campaign: 42, Score: 0.93, Rule: "tag: p=0.9300 > 0.6667",
				Evidence: []campaign.Evidence{{Family: campaign.FamilyIMatch, Bag: 0, Key: "0102"}, {Family: campaign.FamilyANDD, Key: "0304", Similarity: 0.92}}}},
		} {
			b.Run(mode.name+"/"+tc.name, func(b *testing.B) {
				srv, err := New(fixedChecker{tc.v}, Options{
					Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
					Metrics: metrics.New(),
				})
				if err != nil {
					b.Fatal(err)
				}
				ln, err := Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				go srv.Serve(ln)
				defer func() {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					defer cancel()
					srv.Shutdown(ctx)
				}()
				c := gomilter.NewClientWithOptions("tcp", ln.Addr().String(), gomilter.ClientOptions{
					ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
					ActionMask: clientActions, ProtocolMask: mode.proto,
					Dialer: mtadial.Dialer{},
				})
				s, err := c.Session()
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				m := simple("Quarterly figures")
				m.headers = append([][2]string{{"Received", "from mx1.example.net (mx1.example.net [192.0.2.1])\n\tby mail.example.org (Postfix) with ESMTP id 4ABC123"}},
					m.headers...)
				m.headers = append(m.headers, [][2]string{{"Date", "Sun, 22 Nov 2026 04:00:00 +0000"}, {"Message-ID", "<abc@example.net>"},
					{"MIME-Version", "1.0"}, {"Content-Type", "text/plain; charset=utf-8"}, {"Content-Transfer-Encoding", "8bit"}}...)
				m.body = strings.Repeat("The quick brown fox jumps over the lazy dog again and again.\r\n", 80)
				b.SetBytes(int64(len(m.body)))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := sendErr(s, m); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
