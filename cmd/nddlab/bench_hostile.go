package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/lab/flood"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
)

// newBenchHostileCmd is a thin front to flood.RunHostile.
func newBenchHostileCmd() *cobra.Command {
	var o flood.HostileOptions
	var addr string
	var kinds []string
	cmd := &cobra.Command{
		Use:   "hostile",
		Short: "Hostile content against a running daemon: copies of a rejected campaign made costly to check",
		Long: `Report a spam campaign through a running daemon's API (--api, --token) from
--reporters accounts, then send --copies copies of it made hostile (each
kind of hostile content in turn: 340,000 x U+FDFA appended to the body,
a Subject of base64 encoded-words, deep nesting, ...) and --ordinary plain
copies over --sessions parallel milter sessions (loopback). Prints what
each kind got (reject, tag, "unchecked timeout", ...), the daemon's CPU
time per MB scanned (--pid, from /proc/PID/stat), the time until the last
reply, the CPU used after it, and how the API answers a --api-bytes
encoded-word message. See docs/SECURITY.md, "Hostile content".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			network, a, err := config.SplitListen(addr)
			if err != nil {
				return err
			}
			o.Network, o.Addr = network, a
			for _, k := range kinds {
				h, err := spamgen.ParseHostile(k)
				if err != nil {
					return err
				}
				o.Kinds = append(o.Kinds, h)
			}
			res, err := flood.RunHostile(cmd.Context(), o)
			res.Print(cmd.OutOrStdout(), o)
			if err != nil {
				return fmt.Errorf("bench hostile: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", config.DefaultMilterListen, "the daemon's milter socket (inet:HOST:PORT or unix:/path)")
	f.StringVar(&o.APIURL, "api", "http://"+config.DefaultHTTPListen, "the daemon's API URL")
	f.StringVar(&o.Token, "token", "", "the daemon's API token")
	f.IntVar(&o.PID, "pid", 0, "the daemon's process id, to read its CPU time")
	f.IntVar(&o.Reporters, "reporters", 5, "accounts reporting the campaign")
	f.IntVar(&o.Sessions, "sessions", 16, "parallel milter sessions")
	f.IntVar(&o.Copies, "copies", 48, "hostile copies (the kinds in turn)")
	f.IntVar(&o.Ordinary, "ordinary", 16, "plain copies interleaved with them (-1: none)")
	f.StringSliceVar(&kinds, "kinds", nil, "hostile kinds (default all)")
	f.IntVar(&o.BodyBytes, "body-bytes", 340_000*3, "hostile content of a body kind")
	f.IntVar(&o.HeaderBytes, "header-bytes", 512<<10, "hostile content of a header kind")
	f.IntVar(&o.MaxBodyBytes, "max-body-bytes", 1<<20, "the daemon's milter.max_body_bytes (to count scanned bytes)")
	f.IntVar(&o.APIBytes, "api-bytes", 4_200_000, "encoded-word message posted to /v1/check and /v1/reports (-1: none)")
	f.IntVar(&o.Alone, "alone", 0, "first send each kind this many times alone, one copy after the other, to measure its CPU time")
	f.DurationVar(&o.IdleWindow, "idle-window", time.Second, "how long the daemon's CPU time is watched after the last reply, twice")
	f.DurationVar(&o.Timeout, "timeout", 3*time.Minute, "bound on the whole run")
	return cmd
}
