//go:build gendocs

package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cliPage is where `gendocs --markdown` writes by default, relative to the
// repository's root; TestCLIPageCurrent compares it with the commands.
const cliPage = "docs/CLI.md"

// writeMarkdown writes one Markdown page of every available command, from
// the commands' own help: the description, the usage line and the flags
// of each. The global flags are listed once, under the root command.
// cobra's completion subcommands (one per shell) are left out: `nddmilter
// completion SHELL --help` documents them.
func writeMarkdown(w io.Writer, root *cobra.Command) error {
	var b bytes.Buffer
	b.WriteString("# Command-line reference\n\n")
	b.WriteString("Generated from the commands' help by `go run -tags gendocs ./cmd/nddmilter gendocs --markdown " + cliPage + "`; ")
	b.WriteString("edit the help in cmd/nddmilter, not this page. ")
	b.WriteString("The man pages (`man nddmilter-report`) hold the same text.\n")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root && !c.IsAvailableCommand() {
			return
		}
		writeCommand(&b, c, c == root)
		if c.Name() == "completion" {
			return
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	_, err := w.Write(b.Bytes())
	return err
}

// writeCommand writes one command's section.
func writeCommand(b *bytes.Buffer, c *cobra.Command, isRoot bool) {
	fmt.Fprintf(b, "\n## %s\n\n", c.CommandPath())
	text := strings.TrimSpace(c.Long)
	if text == "" {
		text = strings.TrimSpace(c.Short)
		if text != "" && !strings.HasSuffix(text, ".") {
			text += "."
		}
	}
	if text != "" {
		b.WriteString(text + "\n\n")
	}
	fmt.Fprintf(b, "    %s\n", c.UseLine())
	flags := c.LocalNonPersistentFlags()
	if isRoot {
		flags = c.PersistentFlags()
	}
	usage := flagUsages(flags)
	if usage == "" {
		return
	}
	if isRoot {
		b.WriteString("\nGlobal flags, accepted by every command:\n\n")
	} else {
		b.WriteString("\n")
	}
	for _, line := range strings.Split(strings.TrimRight(usage, "\n"), "\n") {
		b.WriteString("    " + strings.TrimRight(strings.TrimPrefix(line, "  "), " ") + "\n")
	}
}

// flagUsages is pflag's usage text of fs without the help flag, which
// every command has.
func flagUsages(fs *pflag.FlagSet) string {
	out := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && !f.Hidden {
			out.AddFlag(f)
		}
	})
	return out.FlagUsagesWrapped(0)
}
