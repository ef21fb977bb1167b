package main

import (
	"os"

	"github.com/spf13/cobra"
)

// Where a command finds its configuration when --config is not given.
const (
	// installedConfig is the package's configuration file.
	installedConfig = "/etc/nddmilter/nddmilter.yaml"
	// configEnv names a configuration file; set and empty, it selects the
	// embedded defaults.
	configEnv = "NDDMILTER_CONFIG"
)

// resolveConfig returns the configuration file a command uses, "" for the
// embedded defaults. In order: --config when given (--config "" selects
// the embedded defaults), then $NDDMILTER_CONFIG when set, then the
// installed package's file when it exists. So on an installed system every
// command acts on the daemon's store without naming its configuration.
func resolveConfig(flag string, flagSet bool, lookupEnv func(string) (string, bool), exists func(string) bool) string {
	if flagSet {
		return flag
	}
	if v, ok := lookupEnv(configEnv); ok {
		return v
	}
	if exists(installedConfig) {
		return installedConfig
	}
	return ""
}

// regularFileExists reports whether path names a regular file (through
// symlinks, as the package may install the configuration as one).
func regularFileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// resolveConfigFlag sets gf.config once, before any subcommand runs.
func resolveConfigFlag(cmd *cobra.Command, gf *globalFlags) {
	gf.config = resolveConfig(gf.config, cmd.Flags().Changed("config"), os.LookupEnv, regularFileExists)
}
