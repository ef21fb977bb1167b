package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newStoreCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "store",
		Short: "(not implemented yet)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("store: not implemented yet")
		},
	}
}
