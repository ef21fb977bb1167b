package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newConfigCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "(not implemented yet)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("config: not implemented yet")
		},
	}
}
