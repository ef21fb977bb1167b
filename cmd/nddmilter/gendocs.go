//go:build gendocs

package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/nddmilter/nddmilter/internal/buildinfo"
)

// genDocsCmds gives the hidden gendocs command to a binary built with the
// tag gendocs (scripts/build-package.sh: `go run -tags gendocs
// ./cmd/nddmilter gendocs DIR`), so that the man-page generator (cobra/doc,
// go-md2man) is not linked into the shipped binary.
func genDocsCmds() []*cobra.Command { return []*cobra.Command{newGenDocsCmd()} }

// newGenDocsCmd is the hidden command that writes the man pages from the
// commands' own help (scripts/build-package.sh puts them in the package).
// Shell completions come from cobra's built-in `completion` command.
func newGenDocsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "gendocs DIR",
		Short:  "Write man pages (section 1) for every command into DIR",
		Long:   "Write man pages for every command into DIR. The date on the pages is SOURCE_DATE_EPOCH when set (reproducible builds), else today.",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			root.DisableAutoGenTag = true
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return fmt.Errorf("gendocs: %w", err)
			}
			hdr := &doc.GenManHeader{
				Title:   "NDDMILTER",
				Section: "1",
				Source:  "nddmilter " + buildinfo.Get().Version,
				Manual:  "nddmilter manual",
			}
			if err := doc.GenManTree(root, hdr, args[0]); err != nil {
				return fmt.Errorf("gendocs: %w", err)
			}
			return nil
		},
	}
}
