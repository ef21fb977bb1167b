package main

import (
	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/daemon"
)

func newServeCmd(gf *globalFlags) *cobra.Command {
	var o daemon.Options
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the milter daemon (Postfix/Sendmail) with its HTTP API and metrics",
		Long: `Run the milter: Postfix or Sendmail connect to --listen and every message is
checked against the known campaigns. The HTTP listener serves the report
API (/v1/...), Prometheus /metrics, /healthz and /readyz.

Without --config the embedded defaults apply (see config/nddmilter.yaml);
--store, --listen and --http override the file. SIGHUP reloads the
configuration, lexicon and model without dropping connections; SIGTERM or
SIGINT stop the daemon after the sessions in flight.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ConfigPath, o.StoreDir = gf.config, gf.store
			return daemon.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.MilterListen, "listen", "", "milter socket, inet:HOST:PORT or unix:/path (overrides milter.listen; default "+config.DefaultMilterListen+")")
	cmd.Flags().StringVar(&o.HTTPListen, "http", "", "HTTP listener HOST:PORT, \"off\" to disable (overrides http.listen; default "+config.DefaultHTTPListen+")")
	return cmd
}
