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
// the commands' own help: the short description, the usage line and the
// flags of each. The global flags are listed once, under the root command.
// cobra's completion command is left out: `nddmilter completion --help`
// documents it.
func writeMarkdown(w io.Writer, root *cobra.Command) error {
	var b bytes.Buffer
	b.WriteString("# Command-line reference\n\n")
	b.WriteString("Generated from the commands' help by `go run -tags gendocs ./cmd/nddmilter gendocs --markdown " + cliPage + "`; ")
	b.WriteString("edit the help in cmd/nddmilter, not this page. ")
	b.WriteString("Each command's `--help` and its man page (`man nddmilter-report`) hold its full description.\n")
	shared := sharedFlags(root)
	if len(shared) > 0 {
		b.WriteString("\nThe commands that may reach a running daemon also take these flags, not repeated below:\n\n")
		for _, name := range []string{"api", "token"} {
			if f, ok := shared[name]; ok {
				b.WriteString(flagLine(f) + "\n")
			}
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root && !c.IsAvailableCommand() {
			return
		}
		if c.Name() == "completion" {
			return
		}
		// A group that only holds subcommands gets no section of its
		// own: its subcommands' paths name it.
		if c == root || c.Runnable() {
			writeCommand(&b, c, c == root, shared)
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
func writeCommand(b *bytes.Buffer, c *cobra.Command, isRoot bool, shared map[string]*pflag.Flag) {
	fmt.Fprintf(b, "\n## %s\n\n", c.CommandPath())
	// One line each: the page is an index of the commands and their
	// flags; `--help` and the man pages hold the long descriptions.
	text := strings.TrimSpace(c.Short)
	if text != "" && !strings.HasSuffix(text, ".") {
		text += "."
	}
	if text != "" {
		b.WriteString(text + "\n\n")
	}
	fmt.Fprintf(b, "    %s\n", c.UseLine())
	flags := c.LocalNonPersistentFlags()
	if isRoot {
		flags = c.PersistentFlags()
	}
	lines := flagLines(flags, shared)
	if len(lines) == 0 {
		return
	}
	if isRoot {
		b.WriteString("\nGlobal flags, accepted by every command:\n")
	}
	b.WriteString("\n")
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
}

// sharedFlags are the --api and --token flags of the commands that may
// reach a running daemon, when every command that has one describes it
// alike: the page lists them once.
func sharedFlags(root *cobra.Command) map[string]*pflag.Flag {
	shared := map[string]*pflag.Flag{}
	same := map[string]bool{"api": true, "token": true}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if !same[f.Name] {
				return
			}
			if first, ok := shared[f.Name]; ok && first.Usage != f.Usage {
				same[f.Name] = false
			}
			if _, ok := shared[f.Name]; !ok {
				shared[f.Name] = f
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for name, ok := range same {
		if !ok {
			delete(shared, name)
		}
	}
	return shared
}

// flagLines are fs's flags as list items, without the help flag every
// command has, hidden flags and the shared ones.
func flagLines(fs *pflag.FlagSet, shared map[string]*pflag.Flag) []string {
	var lines []string
	fs.VisitAll(func(f *pflag.Flag) {
		if s, ok := shared[f.Name]; f.Name == "help" || f.Hidden || ok && s.Usage == f.Usage {
			return
		}
		lines = append(lines, flagLine(f))
	})
	return lines
}

// flagLine is one flag as a list item: `-s, --name type`: usage (default).
func flagLine(f *pflag.Flag) string {
	name := "--" + f.Name
	if f.Shorthand != "" {
		name = "-" + f.Shorthand + ", " + name
	}
	typ, usage := pflag.UnquoteUsage(f)
	if typ != "" {
		name += " " + typ
	}
	line := "- `" + name + "`: " + usage
	if def := f.DefValue; def != "" && def != "0" && def != "false" && def != "[]" && def != "0s" {
		if f.Value.Type() == "string" {
			def = fmt.Sprintf("%q", def)
		}
		line += " (default " + def + ")"
	}
	return line
}
