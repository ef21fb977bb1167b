package djmilter

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/lab/cputime"
	"github.com/nddmilter/nddmilter/internal/lab/mtadial"
	"github.com/nddmilter/nddmilter/internal/metrics"
	"github.com/nddmilter/nddmilter/internal/milter"
)

// fixedChecker returns the same verdict at no cost: the benchmark
// measures the milter path alone.
type fixedChecker struct{ v campaign.Verdict }

func (c fixedChecker) CheckWith(context.Context, []byte, campaign.CheckOptions) (campaign.Verdict, error) {
	return c.v, nil
}

// BenchmarkServers is internal/milter's BenchmarkSession for each server:
// one message through the milter protocol over loopback TCP as Postfix
// sends it (MAIL, RCPT, 9 headers, end of headers, a 5 KB body, end of
// message; protocol 6, no reply before end of message), the info log line
// written to io.Discard and the metrics counted, with go-milter's client
// in the same process. cpu-µs/op is the CPU time of the whole process per
// message (less disturbed by other load than ns/op).
func BenchmarkServers(b *testing.B) {
	for _, server := range []string{"own", "d--j", "d--j-buffered"} {
		for _, tc := range []struct {
			name string
			v    campaign.Verdict
		}{
			{"accept", campaign.Verdict{Action: action.Accept, Rule: "accept: no campaign matched"}},
			{"tag", campaign.Verdict{Action: action.Tag, Campaign: 42, Score: 0.93, Rule: "tag: p=0.9300 > 0.6667",
				Evidence: []campaign.Evidence{{Family: campaign.FamilyIMatch, Bag: 0, Key: "0102"}, {Family: campaign.FamilyANDD, Key: "0304", Similarity: 0.92}}}},
		} {
			b.Run(server+"/"+tc.name, func(b *testing.B) {
				own, err := milter.New(fixedChecker{tc.v}, milter.Options{
					Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
					Metrics: metrics.New(),
				})
				if err != nil {
					b.Fatal(err)
				}
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				serve, shutdown := own.Serve, own.Shutdown
				if server != "own" {
					s := New(own, Options{Buffered: server == "d--j-buffered"})
					serve, shutdown = s.Serve, s.Shutdown
				}
				go serve(ln)
				defer func() {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					defer cancel()
					shutdown(ctx)
				}()
				c := gomilter.NewClientWithOptions("tcp", ln.Addr().String(), gomilter.ClientOptions{
					ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
					ActionMask:   gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
					ProtocolMask: mtadial.PostfixProtocol,
					Dialer:       mtadial.Dialer{},
				})
				s, err := c.Session()
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				headers := [][2]string{
					{"Received", "from mx1.example.net (mx1.example.net [192.0.2.1])\n\tby mail.example.org (Postfix) with ESMTP id 4ABC123"},
					{"From", "Sender <sender@example.net>"}, {"To", "user@example.org"}, {"Subject", "Quarterly figures"},
					{"Date", "Sun, 22 Nov 2026 04:00:00 +0000"}, {"Message-ID", "<abc@example.net>"},
					{"MIME-Version", "1.0"}, {"Content-Type", "text/plain; charset=utf-8"}, {"Content-Transfer-Encoding", "8bit"},
				}
				body := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog again and again.\r\n", 80))
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				cpu0 := cputime.Process()
				for b.Loop() {
					if err := sendOne(s, headers, body); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

func sendOne(s *gomilter.ClientSession, headers [][2]string, body []byte) error {
	if _, err := s.Mail("<sender@example.net>", nil); err != nil {
		return err
	}
	if _, err := s.Rcpt("<user@example.org>", nil); err != nil {
		return err
	}
	for _, h := range headers {
		if _, err := s.HeaderField(h[0], h[1]); err != nil {
			return err
		}
	}
	if _, err := s.HeaderEnd(); err != nil {
		return err
	}
	if _, err := s.BodyChunk(body); err != nil {
		return err
	}
	if err := s.Macros(gomilter.CodeEOB, "i", "4ABC123"); err != nil {
		return err
	}
	_, _, err := s.End()
	return err
}
