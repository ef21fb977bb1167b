package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newBenchStoreCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "store",
		Short: "(not implemented yet)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("bench store: not implemented yet")
		},
	}
}
