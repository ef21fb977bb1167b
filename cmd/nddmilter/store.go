package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/store"
)

// storeDir is the store directory selected by the global flags (later
// also by the configuration file).
func storeDir(gf *globalFlags) string {
	if gf.store != "" {
		return gf.store
	}
	return defaultStoreDir
}

func storeLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// configStoreDir is the store directory of --store, else of --config's
// store.dir, else the default.
func configStoreDir(gf *globalFlags) (string, error) {
	cfg, err := loadConfig(gf)
	if err != nil {
		return "", err
	}
	return cfg.Store.Dir, nil
}

// maintenance is what the store commands backup, stats and verify act
// on: the store itself, or the running daemon's API (a consistent online
// backup while the daemon keeps filtering). *store.Badger implements it.
type maintenance interface {
	Backup(ctx context.Context, w io.Writer) (uint64, error)
	Stats(ctx context.Context) (store.Stats, error)
	Verify(ctx context.Context, repair bool) (store.VerifyResult, error)
	Close() error
}

// remoteMaintenance goes through a running daemon's API; it verifies
// without repairing (a repair needs the daemon stopped).
type remoteMaintenance struct{ *api.Client }

// Stats returns the daemon's store counts.
func (r remoteMaintenance) Stats(ctx context.Context) (store.Stats, error) {
	return r.Client.StoreStats(ctx)
}

// Verify verifies the daemon's store; repair is refused.
func (r remoteMaintenance) Verify(ctx context.Context, repair bool) (store.VerifyResult, error) {
	if repair {
		return store.VerifyResult{}, fmt.Errorf("verify --repair needs the store to itself: stop the daemon first (%w)", store.ErrLocked)
	}
	return r.Client.Verify(ctx)
}

// Close does nothing.
func (remoteMaintenance) Close() error { return nil }

// openMaintenance opens the store of the configuration for backup, stats
// and verify (without background expiry or garbage collection, so that
// maintenance never deletes anything by itself; read-only unless
// writable), or, when a running daemon holds it, that daemon's API as
// openBackend finds it; it returns the store directory too. The store
// must exist.
func openMaintenance(gf *globalFlags, af *apiFlags, stderr io.Writer, writable bool) (maintenance, string, error) {
	cfg, err := loadConfig(gf)
	if err != nil {
		return nil, "", err
	}
	dir := cfg.Store.Dir
	if af.url != "" {
		return remoteMaintenance{&api.Client{BaseURL: af.url, Token: af.tokenOrEnv()}}, dir, nil
	}
	if err := requireStore(dir); err != nil {
		return nil, dir, err
	}
	if writable { // root writing into the package's store would lock its daemon out
		if err := daemon.CheckStoreOwner(dir); err != nil {
			return nil, dir, err
		}
	}
	opts := daemon.StoreOptions(cfg, daemon.NewLogger(cfg, stderr))
	opts.ReadOnly, opts.Expiry, opts.GCInterval = !writable, -1, -1
	st, err := store.Open(dir, opts)
	if err == nil {
		return st, dir, nil
	}
	if !errors.Is(err, store.ErrLocked) {
		return nil, dir, err
	}
	if writable {
		return nil, dir, fmt.Errorf("%w (is nddmilter serve running on it? stop it first)", err)
	}
	c, err := daemonAPI(cfg, af, stderr, err)
	if err != nil {
		return nil, dir, err
	}
	return remoteMaintenance{c}, dir, nil
}

// openStoreForMaintenance opens the store without background expiry, so
// that maintenance commands never delete campaigns by themselves.
func openStoreForMaintenance(gf *globalFlags, readOnly bool) (*store.Badger, string, error) {
	dir, err := configStoreDir(gf)
	if err != nil {
		return nil, "", err
	}
	st, err := store.Open(dir, store.Options{ReadOnly: readOnly, Expiry: -1, GCInterval: -1, Logger: storeLogger()})
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return nil, dir, fmt.Errorf("%w (is nddmilter serve running on it? stop it first)", err)
		}
		return nil, dir, err
	}
	return st, dir, nil
}

func newStoreCmd(gf *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Maintain the campaign store: backup, restore, compact, verify, stats",
		Long: `Maintenance of the Badger campaign store selected by --store, else by
store.dir of --config. The store is locked by the process that has it open
read-write. While nddmilter serve runs, backup, stats and verify go through
its HTTP API by themselves (a consistent online backup: the daemon keeps
filtering); restore, compact and verify --repair need the daemon stopped.`,
	}
	cmd.AddCommand(newStoreBackupCmd(gf), newStoreRestoreCmd(gf), newStoreCompactCmd(gf),
		newStoreVerifyCmd(gf), newStoreStatsCmd(gf))
	return cmd
}

func newStoreBackupCmd(gf *globalFlags) *cobra.Command {
	af := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "backup FILE|-",
		Short: "Write a full backup of the store to FILE (or - for standard output), also while the daemon runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, dir, err := openMaintenance(gf, af, cmd.ErrOrStderr(), false)
			if err != nil {
				return err
			}
			defer st.Close()
			start := time.Now()
			if args[0] == "-" {
				w := bufio.NewWriterSize(cmd.OutOrStdout(), 1<<20)
				if _, err := st.Backup(cmd.Context(), w); err != nil {
					return err
				}
				return w.Flush()
			}
			// Write next to the target and rename: a failed backup never
			// replaces a good one.
			tmp, err := os.CreateTemp(filepath.Dir(args[0]), filepath.Base(args[0])+".tmp*")
			if err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			defer os.Remove(tmp.Name())
			w := bufio.NewWriterSize(tmp, 1<<20)
			if _, err := st.Backup(cmd.Context(), w); err != nil {
				tmp.Close()
				return err
			}
			if err := w.Flush(); err != nil {
				tmp.Close()
				return fmt.Errorf("backup: %w", err)
			}
			if err := tmp.Sync(); err != nil {
				tmp.Close()
				return fmt.Errorf("backup: %w", err)
			}
			if err := tmp.Close(); err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			if err := os.Rename(tmp.Name(), args[0]); err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			fi, err := os.Stat(args[0])
			if err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "backed up %s to %s: %d bytes in %v\n", dir, args[0], fi.Size(), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	af.register(cmd)
	return cmd
}

func newStoreRestoreCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "restore FILE|-",
		Short: "Restore a backup into the store directory, which must not exist or be empty",
		Long: `Restore a backup (FILE, or - for standard input) into the store directory,
which must not exist or be empty (stop the daemon first). The file is
checked frame by frame while it is loaded into a temporary directory next
to the store (DIR.tmp-*), which becomes DIR only once the whole backup
loaded and opened; a bad, compressed or truncated file is refused with the
reason and leaves nothing behind.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := configStoreDir(gf)
			if err != nil {
				return err
			}
			var r io.Reader
			if args[0] == "-" {
				r = cmd.InOrStdin()
			} else {
				f, err := os.Open(args[0])
				if errors.Is(err, fs.ErrPermission) {
					// A backup written by root is 0600 root; the service
					// user restores it from standard input.
					return fmt.Errorf("restore: %w\n(this user cannot read the file: give it on standard input, "+
						"as in `runuser -u nddmilter -- nddmilter store restore - < %s`)", err, args[0])
				}
				if err != nil {
					return fmt.Errorf("restore: %w", err)
				}
				defer f.Close()
				r = f
			}
			start := time.Now()
			res, err := store.Restore(cmd.Context(), dir, bufio.NewReaderSize(r, 1<<20), store.Options{Logger: storeLogger()})
			if err != nil {
				return err
			}
			if n := res.Problems(); n > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: the restored store has %d problems (a backup cut short between two frames?); see nddmilter store verify\n", n)
			}
			st, _, err := openStoreForMaintenance(gf, true)
			if err != nil {
				return err
			}
			defer st.Close()
			s, err := st.Stats(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s: %d campaigns, %d signatures in %v\n",
				dir, s.Campaigns, s.Keys, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
}

func newStoreCompactCmd(gf *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "compact",
		Short: "Flatten the LSM tree and garbage-collect the value log",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, dir, err := openStoreForMaintenance(gf, false)
			if err != nil {
				return err
			}
			defer st.Close()
			start := time.Now()
			res, err := st.Compact(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "compacted %s in %v: %d → %d bytes, %d value-log files rewritten\n",
				dir, time.Since(start).Round(time.Millisecond), res.BytesBefore, res.BytesAfter, res.GCRuns)
			return st.Close()
		},
	}
}

func newStoreVerifyCmd(gf *globalFlags) *cobra.Command {
	var repair, asJSON bool
	af := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every key of the store; --repair fixes dangling and orphaned entries",
		Long: `Walks every entry of the store and checks that every signature key points
at an existing campaign that lists it, that every campaign's keys are
indexed, that reporters and daily counters belong to existing campaigns and
that the counts in each campaign record match. Exits with status 1 when
problems remain. --repair deletes dangling and orphaned entries, lists
unlisted keys, drops unreadable records and corrects counts. While the
daemon runs, verify goes through its API (read-only); --repair needs the
daemon stopped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, dir, err := openMaintenance(gf, af, cmd.ErrOrStderr(), repair)
			if err != nil {
				return err
			}
			defer st.Close()
			start := time.Now()
			res, err := st.Verify(cmd.Context(), repair)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := json.NewEncoder(out).Encode(api.NewVerifyAnswer(res)); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "store %s verified in %v\n", dir, time.Since(start).Round(time.Millisecond))
				fmt.Fprintf(out, "  campaigns %d, signature keys %d, key-list entries %d, reporters %d, day counters %d\n",
					res.Campaigns, res.IndexKeys, res.KeyListEntries, res.Reporters, res.DayCounters)
				for _, p := range []struct {
					n    int64
					what string
				}{
					{res.BadRecords, "unreadable campaign records"},
					{res.DanglingIndex, "signature keys pointing at a missing campaign"},
					{res.UnlistedIndex, "signature keys not listed by their campaign"},
					{res.OrphanKeyList, "key-list entries not backed by the index"},
					{res.OrphanReporters, "reporter records of missing campaigns"},
					{res.OrphanDays, "day counters of missing campaigns"},
					{res.ReporterIndex, "entries of the index by reporter missing or without their reporter record"},
					{res.CountMismatch, "campaign records with wrong key or reporter counts"},
				} {
					if p.n > 0 {
						fmt.Fprintf(out, "  %d %s\n", p.n, p.what)
					}
				}
				if res.NoSchema {
					fmt.Fprintln(out, "  the schema version key is missing")
				}
				switch {
				case res.Problems() == 0:
					fmt.Fprintln(out, "  OK: no problems")
				case repair:
					fmt.Fprintf(out, "  repaired %d entries\n", res.Repaired)
				}
			}
			if res.Problems() > 0 && !repair {
				return fmt.Errorf("store %s: %d problems (run nddmilter store verify --repair)", dir, res.Problems())
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&repair, "repair", false, "fix the problems found")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the counts as JSON")
	af.register(cmd)
	return cmd
}

func newStoreStatsCmd(gf *globalFlags) *cobra.Command {
	var asJSON bool
	af := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Print the number of campaigns, signatures and the disk use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, dir, err := openMaintenance(gf, af, cmd.ErrOrStderr(), false)
			if err != nil {
				return err
			}
			defer st.Close()
			s, err := st.Stats(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(api.NewStoreStats(s))
			}
			per := 0.0
			if s.Keys > 0 {
				per = float64(s.DiskBytes) / float64(s.Keys)
			}
			fmt.Fprintf(out, "store       %s (schema v%d)\ncampaigns   %d (active %d, allowed %d, revoked %d)\nsignatures  %d\nreports     %d spam, %d not-spam\nmessages    %d matched\ndisk bytes  %d (%.1f per signature)\n",
				dir, store.SchemaVersion, s.Campaigns, s.Active, s.Allowed, s.Revoked, s.Keys, s.SpamReports, s.HamReports, s.Messages, s.DiskBytes, per)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	af.register(cmd)
	return cmd
}
