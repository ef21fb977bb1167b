package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/lab/flood"
)

// newBenchFloodCmd is a thin front to flood.Run.
func newBenchFloodCmd() *cobra.Command {
	var o flood.Options
	var addr string
	cmd := &cobra.Command{
		Use:   "flood",
		Short: "Hostile milter sessions against a running daemon: its memory and the latency of normal checks",
		Long: `Open --sessions hostile milter sessions to a running daemon (loopback),
each sending large headers, a large body and most of a 1 MiB packet, then
waiting; measure normal checks before and during, and the daemon's VmRSS
(--pid). See docs/SECURITY.md, "Resource budgets".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			network, a, err := config.SplitListen(addr)
			if err != nil {
				return err
			}
			o.Network, o.Addr = network, a
			if o.Sessions == 0 {
				o.Sessions = -1 // none: only the normal messages
			}
			res, err := flood.Run(cmd.Context(), o)
			res.Print(cmd.OutOrStdout(), o)
			if err != nil {
				return fmt.Errorf("bench flood: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", config.DefaultMilterListen, "the daemon's milter socket (inet:HOST:PORT or unix:/path)")
	f.IntVar(&o.PID, "pid", 0, "the daemon's process id, to read its VmRSS")
	f.IntVar(&o.Sessions, "sessions", 500, "hostile sessions (0: none, only normal messages)")
	f.IntVar(&o.HeaderBytes, "header-bytes", 1<<20, "header bytes per hostile session")
	f.IntVar(&o.BodyBytes, "body-bytes", 1<<20, "body bytes per hostile session")
	f.IntVar(&o.PacketBytes, "packet-bytes", 900<<10, "bytes of the last, unfinished 1 MiB packet")
	f.IntVar(&o.Checks, "checks", 200, "normal messages before and again during the attack")
	f.IntVar(&o.Concurrency, "concurrency", 4, "sessions sending the normal messages")
	f.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "bound on the whole run")
	return cmd
}
