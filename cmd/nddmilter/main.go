// Command nddmilter is a milter that recognizes and stops email spam
// campaigns: every copy of a campaign that users reported as junk, however
// randomized. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/buildinfo"
)

// globalFlags are shared by every subcommand.
type globalFlags struct {
	config string // --config FILE
	store  string // --store DIR
}

func newRootCmd() *cobra.Command {
	gf := &globalFlags{}
	root := &cobra.Command{
		Use:           "nddmilter",
		Short:         "Stop email spam campaigns at the mail server",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Get().Version,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			resolveConfigFlag(cmd, gf)
		},
	}
	root.PersistentFlags().StringVar(&gf.config, "config", "",
		"configuration file (YAML); default: $"+configEnv+", else "+installedConfig+" when it exists, else embedded defaults (--config '' selects them)")
	root.PersistentFlags().StringVar(&gf.store, "store", "", "store directory (overrides the configuration file)")
	root.AddCommand(
		newServeCmd(gf),
		newReportCmd(gf),
		newCheckCmd(gf),
		newCampaignsCmd(gf),
		newStoreCmd(gf),
		newConfigCmd(gf),
		newFleetCmd(gf),
		newVersionCmd(gf),
	)
	root.AddCommand(genDocsCmds()...)
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nddmilter:", err)
		os.Exit(1)
	}
}
