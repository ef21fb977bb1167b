package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/spool"
)

// socketReport is `nddmilter report --socket`: one message on standard
// input, reported over the daemon's report socket (api.socket) as the
// IMAPSieve pipe of contrib/dovecot runs it. It must never hold up or
// fail the user's move: it gives up on the daemon after timeout, then
// spools the report (when spoolDir is set) for the daemon to ingest
// later, and it returns an error only for a mistake of its caller (no
// reporter, a bad kind); every other problem is written to stderr.
type socketReport struct {
	socket, spoolDir, reporter string
	kind                       campaign.Kind
	timeout                    time.Duration
	maxBytes                   int64
	verbose                    bool
}

func (sr socketReport) run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	if sr.reporter == "" {
		return errors.New("report --socket: --reporter is required (the IMAP user)")
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, sr.maxBytes+1))
	if err != nil {
		fmt.Fprintf(stderr, "nddmilter report: read message: %v: not reported\n", err)
		return nil
	}
	if int64(len(raw)) > sr.maxBytes {
		fmt.Fprintf(stderr, "nddmilter report: message larger than %d bytes: not reported\n", sr.maxBytes)
		return nil
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		fmt.Fprintln(stderr, "nddmilter report: empty message: not reported")
		return nil
	}
	c := api.NewSocketClient(sr.socket, sr.timeout)
	rctx, cancel := context.WithTimeout(ctx, sr.timeout)
	defer cancel()
	o, err := c.Report(rctx, raw, sr.kind, sr.reporter)
	if err == nil {
		if sr.verbose {
			fmt.Fprintln(stdout, describeOutcome(o))
		}
		return nil
	}
	var ae *api.Error
	if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 &&
		ae.Status != http.StatusRequestTimeout && ae.Status != http.StatusTooManyRequests {
		// Refused (not allowed, malformed): spooling would not help.
		fmt.Fprintf(stderr, "nddmilter report: refused by the daemon: %v\n", err)
		return nil
	}
	if sr.spoolDir == "" {
		fmt.Fprintf(stderr, "nddmilter report: %v: not reported (no --spool)\n", err)
		return nil
	}
	sp, serr := spool.Open(sr.spoolDir, spool.Options{MaxMessage: sr.maxBytes})
	if serr == nil {
		_, serr = sp.Put(spool.Report{Kind: api.KindName(sr.kind), Reporter: sr.reporter, Raw: raw})
	}
	if serr != nil {
		fmt.Fprintf(stderr, "nddmilter report: %v; and could not spool it: %v: not reported\n", err, serr)
		return nil
	}
	if sr.verbose {
		fmt.Fprintf(stdout, "spooled in %s (daemon unavailable: %v)\n", sr.spoolDir, err)
	}
	return nil
}

// defaultSocketTimeout bounds a report over the socket before it is
// spooled: well below Dovecot's sieve_pipe_exec_timeout (10s).
const defaultSocketTimeout = 3 * time.Second

// socketKind reads --kind (spam, ham, …), or --not-spam.
func socketKind(kind string, notSpam bool) (campaign.Kind, error) {
	if notSpam {
		if kind != "" {
			return 0, errors.New("report: --kind and --not-spam together")
		}
		return campaign.KindHam, nil
	}
	return api.ParseKind(kind)
}
