package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newReportCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "report",
		Short: "(not implemented yet)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("report: not implemented yet")
		},
	}
}
