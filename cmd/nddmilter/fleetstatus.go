package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/fleet"
)

// newFleetStatusCmd is `nddmilter fleet status`: every node of the fleet
// as the running daemon sees it (GET /v1/fleet/status).
func newFleetStatusCmd(gf *globalFlags) *cobra.Command {
	af := &apiFlags{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Each node of the fleet: applied sequence, lag, outbox, state hash (equal on converged nodes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := daemon.FleetAPI(daemon.BackendOptions{ConfigPath: gf.config, StoreDir: gf.store,
				APIURL: af.url, Token: af.tokenOrEnv(), LogOutput: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			var nodes []fleet.Status
			if err := c.FleetStatus(cmd.Context(), &nodes); err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(nodes)
			}
			return printFleetStatus(cmd.OutOrStdout(), nodes)
		},
	}
	af.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printFleetStatus(w io.Writer, nodes []fleet.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNATS\tAPPLIED\tLAG\tOUTBOX\tSTATE HASH\tAS OF\tERROR")
	hashes := map[string]bool{}
	seqs := map[uint64]bool{}
	for _, s := range nodes {
		nats := "connected"
		if !s.Connected {
			nats = "unreachable"
		} else if !s.Ready {
			nats = "not ready"
		}
		h := s.StateHash
		if len(h) > 16 {
			h = h[:16]
		}
		if s.StateHash != "" {
			hashes[s.StateHash] = true
			seqs[s.StateHashSeq] = true
			h = fmt.Sprintf("%s@%d", h, s.StateHashSeq)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", s.Node, nats, s.Applied, s.Lag, s.Outbox, h,
			s.Time.Format("15:04:05"), s.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case len(seqs) > 1:
		fmt.Fprintf(w, "%d nodes, state hashes of %d different sequences: not comparable yet (a node hashes its state when idle)\n", len(nodes), len(seqs))
	case len(hashes) == 1 && len(nodes) > 1:
		fmt.Fprintf(w, "%d nodes, one state hash: converged\n", len(nodes))
	case len(hashes) > 1:
		fmt.Fprintf(w, "%d nodes, %d state hashes: not converged (yet: a node with lag catches up)\n", len(nodes), len(hashes))
	}
	return nil
}
