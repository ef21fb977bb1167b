package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newTrainCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "train",
		Short: "(not implemented yet)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("train: not implemented yet")
		},
	}
}
