// Command nddlab is nddmilter's measurement lab: accuracy and speed
// evaluation, benchmarks of the milter, store, queries and fleet, hostile
// sessions, training the ANDD model and building I-Match lexicons. It
// links the product's packages and the lab's (internal/lab/…); the
// daemon, nddmilter, links none of the lab. See DEVELOPERS.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/buildinfo"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/daemon"
)

// globalFlags are shared by every subcommand.
type globalFlags struct {
	config string // --config FILE
	store  string // --store DIR
}

// loadConfig reads --config (embedded defaults without it) and applies
// the --store flag, as nddmilter does.
func loadConfig(gf *globalFlags) (*config.Config, error) {
	return daemon.LoadConfig(gf.config, gf.store)
}

func newRootCmd() *cobra.Command {
	gf := &globalFlags{}
	root := &cobra.Command{
		Use:           "nddlab",
		Short:         "Measure nddmilter: accuracy, speed, training and lexicons",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Get().Version,
	}
	root.PersistentFlags().StringVar(&gf.config, "config", "", "configuration file (YAML); default: embedded defaults")
	root.PersistentFlags().StringVar(&gf.store, "store", "", "store directory (overrides the configuration file)")
	root.AddCommand(
		newEvalCmd(gf),
		newBenchCmd(gf),
		newTrainCmd(gf),
		newLexiconCmd(gf),
	)
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nddlab:", err)
		os.Exit(1)
	}
}
