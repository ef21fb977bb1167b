package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newBenchMilterCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "milter",
		Short: "(not implemented yet)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("bench milter: not implemented yet")
		},
	}
}
