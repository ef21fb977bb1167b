package main

import "github.com/spf13/cobra"

func newBenchCmd(gf *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure speed: store lookups and ingestion, the milter under load",
	}
	cmd.AddCommand(newBenchStoreCmd(gf), newBenchMilterCmd(gf), newBenchFloodCmd())
	return cmd
}
