package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
)

// newFleetNkeyCmd is `nddmilter fleet nkey`: a user nkey pair for a node's
// NATS identity (fleet.nats.nkey_seed on the node, the public key in the
// servers' fleet.embedded.users or an external server's authorization).
func newFleetNkeyCmd() *cobra.Command {
	var seedFile, publicOf string
	cmd := &cobra.Command{
		Use:   "nkey",
		Short: "Make a NATS user nkey pair for a fleet node (or print a seed's public key)",
		Long: `Make a NATS user nkey pair. With --seed FILE the secret seed goes into FILE
(created with mode 0600; an existing file is never overwritten) and only the
public key is printed: give FILE to the node as fleet.nats.nkey_seed and the
public key to the NATS servers (fleet.embedded.users[].nkey, or an external
nats-server's authorization { users = [ { nkey: U… } ] }). Without --seed both
are printed. --public FILE prints the public key of an existing seed file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if publicOf != "" {
				b, err := os.ReadFile(publicOf)
				if err != nil {
					return fmt.Errorf("fleet nkey: %w", err)
				}
				pub, err := natsd.UserSeedPublicKey(b)
				if err != nil {
					return fmt.Errorf("fleet nkey: %s: %w", publicOf, err)
				}
				fmt.Fprintln(out, pub)
				return nil
			}
			seed, pub, err := natsd.NewUserKey()
			if err != nil {
				return err
			}
			if seedFile == "" {
				fmt.Fprintf(out, "seed:   %s\npublic: %s\n", seed, pub)
				return nil
			}
			f, err := os.OpenFile(seedFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("fleet nkey: %s exists: not overwriting a seed (remove it first)", seedFile)
			}
			if err != nil {
				return fmt.Errorf("fleet nkey: %w", err)
			}
			if _, err := fmt.Fprintf(f, "%s\n", seed); err != nil {
				f.Close()
				return fmt.Errorf("fleet nkey: %s: %w", seedFile, err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("fleet nkey: %s: %w", seedFile, err)
			}
			fmt.Fprintln(out, pub)
			return nil
		},
	}
	cmd.Flags().StringVar(&seedFile, "seed", "", "write the seed into this new file (mode 0600) and print only the public key")
	cmd.Flags().StringVar(&publicOf, "public", "", "print the public key of this seed file instead")
	cmd.MarkFlagsMutuallyExclusive("seed", "public")
	return cmd
}
