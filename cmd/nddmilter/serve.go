package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newServeCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "(not implemented yet)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("serve: not implemented yet")
		},
	}
}
