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
// commands' own help (scripts/build-package.sh puts them in the package),
// or with --markdown FILE the command-line reference page (docs/CLI.md).
// Shell completions come from cobra's built-in `completion` command.
func newGenDocsCmd() *cobra.Command {
	var markdown string
	cmd := &cobra.Command{
		Use:    "gendocs DIR | gendocs --markdown FILE",
		Short:  "Write man pages (section 1) for every command into DIR, or the Markdown reference into FILE",
		Long:   "Write man pages for every command into DIR. The date on the pages is SOURCE_DATE_EPOCH when set (reproducible builds), else today. With --markdown FILE, write one Markdown page of every command instead (docs/CLI.md).",
		Hidden: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if markdown != "" {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			root.DisableAutoGenTag = true
			if markdown != "" {
				return writeMarkdownFile(markdown, root)
			}
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
	cmd.Flags().StringVar(&markdown, "markdown", "", "write the Markdown command reference into FILE (e.g. "+cliPage+")")
	return cmd
}

// writeMarkdownFile writes the Markdown reference into path.
func writeMarkdownFile(path string, root *cobra.Command) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("gendocs: %w", err)
	}
	if err := writeMarkdown(f, root); err != nil {
		f.Close()
		return fmt.Errorf("gendocs: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("gendocs: %s: %w", path, err)
	}
	return nil
}
