package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/buildinfo"
	"github.com/nddmilter/nddmilter/internal/daemon"
)

// stampHint says how to name a build that carries no version control
// information (go build -buildvcs=false, or a copy of the tree without
// .git): the toolchain has nothing to fall back on.
const stampHint = `note: this binary carries no commit (built with -buildvcs=false, or outside a git checkout). ` +
	`Stamp it: go build -ldflags "-X github.com/nddmilter/nddmilter/internal/buildinfo.Version=VERSION ` +
	`-X github.com/nddmilter/nddmilter/internal/buildinfo.Commit=$(git rev-parse HEAD)" ./cmd/nddmilter ` +
	`(scripts/build-package.sh does this)`

func newVersionCmd(gf *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, Go version, signature formats, lexicon and model ids",
		Long: `Print the build (version, commit, Go version), the signature wire formats,
and the ids of the lexicon and ANDD model of the configuration (--config,
else the embedded ones): the same labels as the nddmilter_build_info
metric of a running daemon.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := versions(gf)
			out := cmd.OutOrStdout()
			if asJSON {
				if err := json.NewEncoder(out).Encode(v); err != nil {
					return err
				}
				return err
			}
			fmt.Fprintf(out, "nddmilter %s\ncommit     %s\ngo         %s\n", v.Version, v.Commit, v.GoVersion)
			if v.Commit == "unknown" {
				fmt.Fprintln(cmd.ErrOrStderr(), stampHint)
			}
			if err == nil {
				fmt.Fprintf(out, "signatures %s\nlexicon    %s\nmodel      %s\n", v.SignatureVersion, v.Lexicon, v.Model)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

// versions describes the build with the configuration's lexicon and
// model; on an error the build alone.
func versions(gf *globalFlags) (daemon.Versions, error) {
	build := daemon.Versions{Info: buildinfo.Get()}
	cfg, err := loadConfig(gf)
	if err != nil {
		return build, err
	}
	lex, err := daemon.LoadLexicon(cfg)
	if err != nil {
		return build, err
	}
	model, err := daemon.LoadModel(cfg)
	if err != nil {
		return build, err
	}
	return daemon.NewVersions(lex, model), nil
}
