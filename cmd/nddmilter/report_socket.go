package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nddmilter/nddmilter/internal/store"
	"io"
	"time"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/reportclient"
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
	kind                       store.Kind
	timeout                    time.Duration
	maxBytes                   int64
	verbose                    bool
}

func (sr socketReport) run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	res, err := reportclient.Send(ctx, reportclient.Options{
		Socket: sr.socket, SpoolDir: sr.spoolDir, Reporter: sr.reporter,
		Kind: api.KindName(sr.kind), Timeout: sr.timeout, MaxBytes: sr.maxBytes,
	}, stdin)
	if err != nil {
		return fmt.Errorf("report --socket: %w", err)
	}
	switch res.Status {
	case reportclient.Reported:
		if sr.verbose {
			var o api.Outcome
			if json.Unmarshal([]byte(res.Detail), &o) == nil {
				fmt.Fprintln(stdout, describeOutcome(o))
			}
		}
	case reportclient.Spooled:
		if sr.verbose {
			fmt.Fprintln(stdout, res.Detail)
		}
	case reportclient.Refused:
		fmt.Fprintf(stderr, "nddmilter report: %s\n", res.Detail)
	default:
		fmt.Fprintf(stderr, "nddmilter report: %s: not reported\n", res.Detail)
	}
	return nil
}

// defaultSocketTimeout bounds a report over the socket before it is
// spooled: well below Dovecot's sieve_pipe_exec_timeout (10s).
const defaultSocketTimeout = 3 * time.Second

// socketKind reads --kind (spam, ham, …), or --not-spam.
func socketKind(kind string, notSpam bool) (store.Kind, error) {
	if notSpam {
		if kind != "" {
			return 0, errors.New("report: --kind and --not-spam together")
		}
		return store.KindHam, nil
	}
	return api.ParseKind(kind)
}
