package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newEvalCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "eval",
		Short: "(not implemented yet)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("eval: not implemented yet")
		},
	}
}
