package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newCampaignsCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "campaigns",
		Short: "(not implemented yet)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("campaigns: not implemented yet")
		},
	}
}
