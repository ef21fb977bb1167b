package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newLexiconCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "lexicon",
		Short: "(not implemented yet)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("lexicon: not implemented yet")
		},
	}
}
