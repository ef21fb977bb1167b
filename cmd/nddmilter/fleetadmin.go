package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

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
			if seedFile == "" {
				seed, pub, err := natsd.NewUserKey()
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "seed:   %s\npublic: %s\n", seed, pub)
				return nil
			}
			pub, err := writeSeed(seedFile)
			if err != nil {
				return fmt.Errorf("fleet nkey: %w", err)
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

// writeSeed makes a user nkey pair, writes its seed into the new file
// path (mode 0600, never overwriting one) and returns the public key.
func writeSeed(path string) (string, error) {
	seed, pub, err := natsd.NewUserKey()
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("%s exists: not overwriting a seed (remove it first)", path)
	}
	if err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(f, "%s\n", seed); err != nil {
		f.Close()
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return pub, nil
}

// newFleetInitCmd is `nddmilter fleet init`: what a node needs to join a
// fleet, its key (which authenticates it to the NATS servers and signs
// its events and snapshots) and its entry in fleet.nodes.
func newFleetInitCmd() *cobra.Command {
	var node, seedFile string
	var snapshots bool
	cmd := &cobra.Command{
		Use:   "init --node NAME --seed FILE",
		Short: "Make this node's fleet key and print its fleet.nodes entry",
		Long: `Make this node's nkey: the seed goes into FILE (created with mode 0600; an
existing file is never overwritten), which authenticates the node to the
fleet's NATS servers and signs every event and snapshot it publishes. The
output is the node's entry for fleet.nodes, the list every node of the
fleet has (the same everywhere: events are applied only when signed by the
key listed for the node they name) and, with embedded servers, the list of
users those servers admit. --snapshots marks the node that stores the
fleet's snapshots (and may purge the stream and change its settings):
give it to one or two nodes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node == "" || seedFile == "" {
				return fmt.Errorf("fleet init: --node and --seed are required")
			}
			pub, err := writeSeed(seedFile)
			if err != nil {
				return fmt.Errorf("fleet init: %w", err)
			}
			extra := ""
			if snapshots {
				extra = ", snapshots: true"
			}
			fmt.Fprintf(cmd.OutOrStdout(), `# %s: this node's key (keep it on this host). Its configuration:
#   fleet: {node: %s, nats: {nkey_seed: %s}}
# Add this entry to fleet.nodes on every node of the fleet:
    - {name: %s, key: %s%s}
`, seedFile, node, seedFile, node, pub, extra)
			return nil
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "this node's name (fleet.node)")
	cmd.Flags().StringVar(&seedFile, "seed", "", "write the node's seed into this new file (mode 0600)")
	cmd.Flags().BoolVar(&snapshots, "snapshots", false, "this node stores the fleet's snapshots")
	return cmd
}

// newFleetNatsConfCmd is `nddmilter fleet nats-conf`: a configuration file
// for Debian's nats-server program (a fleet on external NATS servers) with
// the same users, permissions, cluster and TLS the embedded server has.
func newFleetNatsConfCmd() *cobra.Command {
	var (
		o                  natsd.Options
		nodeKeys, readKeys []string
		nodes, adminKeys   []string
		monitor            string
	)
	cmd := &cobra.Command{
		Use:   "nats-conf",
		Short: "Print a nats-server configuration for one server of a fleet's NATS cluster",
		Long: `Print the configuration of one nats-server (Debian's nats-server package, or
any 2.9 or later) of a fleet's external NATS cluster: client and route
listeners, JetStream in --dir, the fleet's users with the permissions
nddmilter's embedded server gives them (--node-nkey: publishes events;
--read-nkey: reads the stream, cannot publish), TLS and route
authentication. Run it once per server with its own --name, addresses and
--dir, the same --route list, users and files. Password files are read and
their contents written: keep the output readable by nats-server only.
docs/FLEET.md explains each setting.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, k := range nodeKeys {
				o.Users = append(o.Users, natsd.User{Nkey: k, Role: natsd.RoleNode})
			}
			for _, n := range nodes {
				u, err := parseNodeFlag(n)
				if err != nil {
					return fmt.Errorf("fleet nats-conf: --node %s: %w", n, err)
				}
				o.Users = append(o.Users, u)
			}
			for _, k := range adminKeys {
				o.Users = append(o.Users, natsd.User{Nkey: k, Role: natsd.RoleAdmin})
			}
			for _, k := range readKeys {
				o.Users = append(o.Users, natsd.User{Nkey: k, Role: natsd.RoleRead})
			}
			text, err := o.ConfigFile(monitor)
			if err != nil {
				return fmt.Errorf("fleet nats-conf: %w", err)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), text)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Name, "name", "", "server name in the cluster (default: host name and client port)")
	f.StringVar(&o.Listen, "listen", natsd.DefaultListen, "client listener host:port")
	f.StringVar(&o.ClusterListen, "cluster-listen", natsd.DefaultClusterListen, `route listener host:port ("-": no cluster)`)
	f.StringVar(&o.ClusterName, "cluster-name", natsd.DefaultClusterName, "cluster name (the same on every server)")
	f.StringArrayVar(&o.Routes, "route", nil, "another server's route URL nats-route://host:port (repeat for each)")
	f.StringVar(&o.Dir, "dir", "", "JetStream storage directory (required)")
	f.Int64Var(&o.MaxStore, "max-store-bytes", 0, "bound on JetStream's disk use (0: the server's default)")
	f.Int32Var(&o.MaxPayload, "max-payload-bytes", 0, "bound on one message, so on one reported message (0: the server's 1 MiB)")
	f.StringArrayVar(&nodeKeys, "node-nkey", nil, "public nkey of a node (nddmilter fleet nkey makes one); repeat for each")
	f.StringArrayVar(&readKeys, "read-nkey", nil, "public nkey of a read-only client; repeat for each")
	f.StringArrayVar(&nodes, "node", nil, "a node of fleet.nodes as NAME=KEY or NAME=KEY,snapshots: it may write only its own status, and store snapshots only with snapshots; repeat for each")
	f.StringArrayVar(&adminKeys, "admin-nkey", nil, "public nkey of an operator allowed everything (repairs such as nats stream rmm); repeat for each")
	f.StringVar(&o.Stream, "stream", natsd.DefaultStream, "the fleet's stream (fleet.stream): nodes may publish events to STREAM.>")
	f.StringVar(&o.TLS.CA, "tls-ca", "", "CA file verifying client certificates")
	f.StringVar(&o.TLS.Cert, "tls-cert", "", "server certificate of the client listener")
	f.StringVar(&o.TLS.Key, "tls-key", "", "key of --tls-cert")
	f.BoolVar(&o.TLS.Verify, "tls-verify", false, "require client certificates signed by --tls-ca")
	f.StringVar(&o.ClusterTLS.CA, "cluster-tls-ca", "", "CA of the routes' mutual TLS")
	f.StringVar(&o.ClusterTLS.Cert, "cluster-tls-cert", "", "this server's route certificate")
	f.StringVar(&o.ClusterTLS.Key, "cluster-tls-key", "", "key of --cluster-tls-cert")
	f.StringVar(&o.ClusterUser, "cluster-user", "", "user authenticating routes")
	f.StringVar(&o.ClusterPasswordFile, "cluster-password-file", "", "file holding --cluster-user's password")
	f.StringVar(&monitor, "monitor", "", "HTTP monitoring listener host:port (default: none)")
	return cmd
}

// parseNodeFlag reads NAME=KEY[,snapshots].
func parseNodeFlag(v string) (natsd.User, error) {
	name, rest, ok := strings.Cut(v, "=")
	key, flag, _ := strings.Cut(rest, ",")
	switch {
	case !ok || name == "":
		return natsd.User{}, errors.New("want NAME=KEY or NAME=KEY,snapshots")
	case flag != "" && flag != "snapshots":
		return natsd.User{}, fmt.Errorf("%q: the only flag is snapshots", flag)
	}
	return natsd.User{Nkey: key, Role: natsd.RoleNode, Node: name, Snapshots: flag == "snapshots"}, nil
}
