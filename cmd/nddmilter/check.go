package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/mailbox"
)

// checkLine is the JSON form of one checked message.
type checkLine struct {
	Path string `json:"path"`
	campaign.Verdict
	Error string `json:"error,omitempty"`
}

func newCheckCmd(gf *globalFlags) *cobra.Command {
	var (
		af        apiFlags
		asJSON    bool
		filesFrom string
		record    bool
	)
	cmd := &cobra.Command{
		Use:   "check [--json] [--files-from FILE] PATH...",
		Short: "Tell what the milter would do with messages, and why",
		Long: `Check messages against the known campaigns: one line per message,
"path action campaign score rule", or with --json one JSON object per line
with path, action (accept|tag|quarantine|reject), campaign, score, rule,
evidence (the matched signatures) and warnings.

PATH is a message file, a directory (read recursively), an mbox, a Maildir,
or - for standard input; --files-from FILE reads paths one per line. By
default the check is a dry run; --record counts matched messages in the
campaigns' statistics as the milter does.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths := args
			if filesFrom != "" {
				more, err := mailbox.ReadFilesFrom(filesFrom)
				if err != nil {
					return err
				}
				paths = append(paths, more...)
			}
			if len(paths) == 0 {
				return fmt.Errorf("no message given: name files, directories, mboxes, Maildirs or - (stdin)")
			}
			be, err := openBackend(cmd.Context(), gf, &af, cmd.ErrOrStderr(), false)
			if err != nil {
				return err
			}
			defer be.Close()
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			enc := json.NewEncoder(out)
			enc.SetEscapeHTML(false)
			nerr, n := 0, 0
			opts := mailbox.Options{OnSkip: func(path string, reason error) error {
				fmt.Fprintf(errw, "%s: skipped: %v\n", path, reason)
				return nil
			}}
			walkErr := mailbox.Walk(cmd.Context(), paths, opts, func(m mailbox.Message) error {
				n++
				v, err := be.Check(cmd.Context(), m.Raw, record)
				if err != nil {
					nerr++
					if cmd.Context().Err() != nil {
						return cmd.Context().Err()
					}
				}
				if asJSON {
					line := checkLine{Path: m.Path, Verdict: v}
					if line.Evidence == nil {
						line.Evidence = []campaign.Evidence{}
					}
					if err != nil {
						line.Error = err.Error()
					}
					return enc.Encode(line)
				}
				if err != nil {
					fmt.Fprintf(errw, "%s: %v\n", m.Path, err)
				}
				fmt.Fprintf(out, "%s\t%s\t%d\t%.4f\t%s\n", m.Path, v.Action, v.Campaign, v.Score, oneLine(v.Rule))
				return nil
			})
			if walkErr != nil {
				return fmt.Errorf("check: %w", walkErr)
			}
			if nerr > 0 {
				return fmt.Errorf("%d of %d messages could not be checked", nerr, n)
			}
			return nil
		},
	}
	af.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	cmd.Flags().StringVar(&filesFrom, "files-from", "", "read more paths from FILE, one per line (- for stdin)")
	cmd.Flags().BoolVar(&record, "record", false, "count matched messages in the campaigns' statistics (default: dry run)")
	return cmd
}
