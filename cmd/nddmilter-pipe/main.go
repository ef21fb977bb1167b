// Command nddmilter-pipe is the IMAPSieve pipe program of
// contrib/dovecot: it reports the message on standard input over the
// daemon's report socket, as `nddmilter report --socket` does, and
// spools it when the daemon is down. It is a separate small program
// because Dovecot starts it for every Junk move: it links only the
// standard library and the spool (with golang.org/x/sys/unix for its
// openat calls), not the daemon. It runs as the mail-delivery user, whose
// spool files are the only ones the daemon trusts besides root's and its
// own.
//
// It exits 0 whatever becomes of the report (a user's move never fails
// because of nddmilter) and says on stderr, which Dovecot logs, what went
// wrong; it exits 2 only for a mistake in its own command line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/nddmilter/nddmilter/internal/reportclient"
	"github.com/nddmilter/nddmilter/internal/spool"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nddmilter-pipe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o reportclient.Options
	var verbose bool
	fs.StringVar(&o.Socket, "socket", "/run/nddmilter/report.sock", "the daemon's report socket (api.socket)")
	fs.StringVar(&o.SpoolDir, "spool", "", "spool the report in `DIR` (api.spool_dir) when the daemon does not take it")
	fs.StringVar(&o.Reporter, "reporter", "", "reporter id: the authenticated IMAP user (required)")
	fs.StringVar(&o.Kind, "kind", "spam", "spam or ham (not spam)")
	fs.DurationVar(&o.Timeout, "timeout", reportclient.DefaultTimeout, "give up on the daemon after this long (then spool)")
	fs.Int64Var(&o.MaxBytes, "max-size", spool.DefaultMaxMessage, "largest message reported (bytes)")
	fs.BoolVar(&verbose, "v", false, "print what became of the report")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "nddmilter-pipe: reads one message from standard input: no arguments")
		return 2
	}
	res, err := reportclient.Send(context.Background(), o, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "nddmilter-pipe: %v\n", err)
		if errors.Is(err, reportclient.ErrUsage) {
			return 2
		}
		return 0
	}
	switch res.Status {
	case reportclient.Reported, reportclient.Spooled:
		if verbose {
			fmt.Fprintf(stdout, "%s: %s\n", res.Status, res.Detail)
		}
	default:
		fmt.Fprintf(stderr, "nddmilter-pipe: %s: %s\n", res.Status, res.Detail)
	}
	return 0
}
