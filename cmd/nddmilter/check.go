package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newCheckCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "(not implemented yet)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("check: not implemented yet")
		},
	}
}
