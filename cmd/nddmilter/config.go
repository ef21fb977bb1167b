package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/daemon"
)

func newConfigCmd(gf *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check a configuration file or print the defaults",
	}
	check := &cobra.Command{
		Use:   "check [FILE]",
		Short: "Validate a configuration file and print the effective configuration",
		Long: `Validate FILE (or --config) as serve would before it listens, and print the
effective configuration as YAML, every default filled in. Unknown keys and
bad values are errors naming the key, its line and the allowed values; the
lexicon, model and token files are read and the engine is built from them
(the store is not opened). The exit status is then 1.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := gf.config
			if len(args) == 1 {
				path = args[0]
			}
			if path == "" {
				return fmt.Errorf("config check: name a file (or use --config)")
			}
			cfg, err := daemon.LoadConfig(path, gf.store)
			if err != nil {
				return err
			}
			// What serve checks before it listens, with the same code.
			vers, err := daemon.CheckConfig(cfg)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			for _, w := range cfg.Fleet.PlaintextWarnings() {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
			}
			if cfg.HTTP.Token != "" {
				cfg.HTTP.Token = "<redacted: set>"
			}
			b, err := cfg.Marshal()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "# %s: OK (lexicon %s, model %s, signatures %s); effective configuration:\n",
				path, vers.Lexicon, vers.Model, vers.SignatureVersion)
			if _, err := out.Write(b); err != nil {
				return err
			}
			fmt.Fprintln(out, "# policy: action chosen for an estimated campaign-spam probability p")
			for _, line := range cfg.Policy.DescribeThresholds() {
				fmt.Fprintf(out, "#   %s\n", line)
			}
			return nil
		},
	}
	def := &cobra.Command{
		Use:   "default",
		Short: "Print the default configuration (config/nddmilter.yaml has it with comments)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := config.Default().Marshal()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	cmd.AddCommand(check, def)
	return cmd
}
