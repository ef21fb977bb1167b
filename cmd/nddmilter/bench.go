package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newBenchCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "bench",
		Short: "(not implemented yet)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("bench: not implemented yet")
		},
	}
}
