package main

import (
	"github.com/spf13/cobra"
)

// newFleetCmd groups the commands of a fleet of nddmilter nodes sharing
// campaign state over NATS JetStream (docs/FLEET.md).
func newFleetCmd(gf *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Several mail servers sharing one campaign view (NATS JetStream; docs/FLEET.md)",
	}
	cmd.AddCommand(newFleetInitCmd(), newFleetNkeyCmd(), newFleetNatsConfCmd(), newFleetCheckCmd(gf), newFleetStatusCmd(gf), newFleetForgetCmd(gf), newFleetRemoveServerCmd(gf))
	return cmd
}
