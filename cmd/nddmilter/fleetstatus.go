package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/fleet"
)

// newFleetStatusCmd is `nddmilter fleet status`: every node of the fleet
// as the running daemon sees it (GET /v1/fleet/status).
func newFleetStatusCmd(gf *globalFlags) *cobra.Command {
	af := &apiFlags{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Each node of the fleet: applied sequence, lag, outbox, state hash (equal on converged nodes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := fleetAPI(gf, af, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var nodes []fleet.Status
			if err := c.FleetStatus(cmd.Context(), &nodes); err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(nodes)
			}
			return printFleetStatus(cmd.OutOrStdout(), nodes)
		},
	}
	af.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// newFleetForgetCmd is `nddmilter fleet forget NODE`: a retired node's
// status leaves the fleet's (DELETE /v1/fleet/nodes/{node}).
func newFleetForgetCmd(gf *globalFlags) *cobra.Command {
	af := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "forget NODE",
		Short: "Stop listing a node retired from the fleet (it must have stopped publishing its status: silent)",
		Long: `Removes the status of a node retired from the fleet, so that fleet status
and the dashboard stop listing it. Only a silent node (one that stopped
publishing its status) can be forgotten; the events it published stay
applied on every node. A node that is not forgotten leaves the list by
itself once its status is older than the status bucket's retention
(7 days). A forgotten node that starts again is listed again.`,
		Args: cobra.ExactArgs(1),
		RunE: fleetAdmin(gf, af, (*api.Client).FleetForget, "forgot node %s\n"),
	}
	af.register(cmd)
	return cmd
}

// newFleetRemoveServerCmd is `nddmilter fleet remove-server NAME`: an
// embedded NATS server that left for good leaves the JetStream cluster
// (DELETE /v1/fleet/servers/{server}).
func newFleetRemoveServerCmd(gf *globalFlags) *cobra.Command {
	af := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "remove-server NAME",
		Short: "Remove a retired host's embedded NATS server from the fleet's JetStream cluster",
		Long: `Removes the embedded NATS server NAME (it is named after its host's
fleet.node) from the fleet's JetStream cluster, once its host has left
for good. Until then the cluster counts it as an offline member: the
stream keeps a replica on it and places none elsewhere, so one more
server down would cost the stream its quorum. After the removal the
stream's replica moves to a server that holds none, if there is one:
start the new host first, then remove the old one.

Run it against a daemon with an embedded server (and users): it sends the
request NATS's own "nats server raft peer-remove NAME" sends, from a
system-account user only that daemon knows. A server still connected is
refused. With an external NATS cluster, use the NATS CLI instead.`,
		Args: cobra.ExactArgs(1),
		RunE: fleetAdmin(gf, af, (*api.Client).FleetRemoveServer, "removed server %s from the JetStream cluster\n"),
	}
	af.register(cmd)
	return cmd
}

// fleetAdmin runs an administrative request of the fleet on its one
// argument through the daemon's API, and prints done with it.
func fleetAdmin(gf *globalFlags, af *apiFlags, req func(*api.Client, context.Context, string) error, done string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := fleetAPI(gf, af, cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		if err := req(c, cmd.Context(), args[0]); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), done, args[0])
		return nil
	}
}

func printFleetStatus(w io.Writer, nodes []fleet.Status) error {
	return printFleetStatusAt(w, nodes, time.Now())
}

// printFleetStatusAt prints nodes as seen at now (dates of statuses older
// than a day are printed whole).
func printFleetStatusAt(w io.Writer, nodes []fleet.Status, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNATS\tAPPLIED\tLAG\tOUTBOX\tSTATE HASH\tAS OF\tVERSION\tERROR")
	live, silent := 0, 0
	var unread []string             // nodes whose status was not read
	builds := map[string][]string{} // build → its live nodes
	maxEvents := 0
	for _, s := range nodes {
		nats := "connected"
		switch {
		case s.Unread != "":
			nats = "UNREAD"
			unread = append(unread, fmt.Sprintf("%s (%s)", s.Node, s.Unread))
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t%s\n", s.Node, nats, s.Unread)
			continue
		case s.Silent:
			nats = "silent"
		case s.Halted != nil:
			nats = "HALTED"
		case !s.Connected:
			nats = "unreachable"
		case !s.Ready:
			nats = "not ready"
		case s.StreamUnreachable:
			nats = "no stream"
		}
		asOf := s.Time.Local().Format("15:04:05")
		if now.Sub(s.Time) > 20*time.Hour {
			asOf = s.Time.Local().Format("2006-01-02 15:04")
		}
		h := s.StateHash
		if len(h) > 16 {
			h = h[:16]
		}
		if s.StateHash != "" {
			h = fmt.Sprintf("%s@%d", h, s.StateHashSeq)
		}
		if s.Silent {
			silent++
		} else {
			live++
			if s.Version != "" {
				builds[s.Version] = append(builds[s.Version], s.Node)
			}
			maxEvents = max(maxEvents, s.Events)
		}
		version := s.Version
		if version == "" {
			version = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", s.Node, nats, s.Applied, s.Lag, s.Outbox, h,
			asOf, version, s.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Silent nodes are left out of the comparison: their hash is old.
	if line := fleet.Compare(nodes).Summary(); line != "" {
		fmt.Fprintln(w, line)
	}
	if len(builds) > 1 {
		var names []string
		for b, nodes := range builds {
			names = append(names, fmt.Sprintf("%s (%s)", b, strings.Join(nodes, ", ")))
		}
		slices.Sort(names)
		fmt.Fprintf(w, "%d builds running: %s (an upgrade under way, or a host left out of one)\n", len(builds), strings.Join(names, ", "))
	}
	var older []string
	for _, s := range nodes {
		if !s.Silent && s.Events > 0 && s.Events < maxEvents {
			older = append(older, s.Node)
		}
	}
	if len(older) > 0 {
		fmt.Fprintf(w, "upgrade %s: a newer build publishes events of version %d, which stop a node that applies older ones until it is upgraded\n", strings.Join(older, ", "), maxEvents)
	}
	printClocks(w, nodes)
	for _, s := range nodes {
		if s.NameClash {
			fmt.Fprintf(w, "node name %s: another process publishes its status under it too (a configuration copied without changing fleet.node?): its row mixes two hosts; give each host its own fleet.node\n", s.Node)
		}
	}
	if diff := fleet.SettingsDiffer(nodes); len(diff) > 0 {
		fmt.Fprintf(w, "settings differ between nodes (they do not share one campaign view until these agree: the same lexicon, model and settings on every node):\n")
		for _, d := range diff {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
	if silent > 0 {
		fmt.Fprintf(w, "%d silent (no status for a while: stopped, cut off from NATS or retired; `nddmilter fleet forget NODE` for a retired one)\n", silent)
	}
	if len(unread) > 0 {
		fmt.Fprintf(w, "status not read: %s: nothing is known of these nodes now (run fleet status again)\n", strings.Join(unread, ", "))
	}
	for _, s := range nodes {
		if s.PeersUnread != "" {
			fmt.Fprintf(w, "%s could not list the other nodes' statuses (%s): the fleet's other nodes are not shown\n", s.Node, s.PeersUnread)
		}
	}
	printReplicas(w, nodes)
	return nil
}

// clockShown is the clock offset from which `fleet status` names a node:
// NTP keeps hosts within milliseconds.
const clockShown = time.Second

// printClocks names the live nodes whose clocks are off from the median
// of the nodes' clocks (fleet.Status.ClockOffset).
func printClocks(w io.Writer, nodes []fleet.Status) {
	var off []string
	for _, s := range nodes {
		if s.Silent || s.ClockOffset.Abs() < clockShown {
			continue
		}
		dir := "ahead"
		if s.ClockOffset < 0 {
			dir = "behind"
		}
		off = append(off, fmt.Sprintf("%s %s %s", s.Node, s.ClockOffset.Abs().Round(time.Second), dir))
	}
	if len(off) > 0 {
		fmt.Fprintf(w, "clocks off from the median of the nodes' clocks: %s; a node off by more than fleet.max_clock_offset (default 1m) publishes no expiry decision: fix its time (NTP)\n", strings.Join(off, ", "))
	}
}

// printReplicas says how the stream's copies stand, as the freshest live
// node with an answer sees them: how many servers the stream can still
// lose, and which copies are offline or behind.
func printReplicas(w io.Writer, nodes []fleet.Status) {
	reps := fleet.StreamCopies(nodes)
	if len(reps) == 0 {
		return
	}
	online := 0 // copies that take part in the stream's quorum (behind ones catch up)
	var leader string
	var bad []string
	for _, r := range reps {
		switch {
		case r.Leader:
			leader = r.Server
		case r.Offline && r.Seen >= time.Second:
			bad = append(bad, fmt.Sprintf("%s offline (last heard %s ago)", r.Server, r.Seen.Round(time.Second)))
		case r.Offline: // no time known for it
			bad = append(bad, r.Server+" offline")
		case !r.Current:
			bad = append(bad, fmt.Sprintf("%s behind by %d events", r.Server, r.Lag))
		}
		if r.Leader || !r.Offline {
			online++
		}
	}
	if len(reps) == 1 {
		fmt.Fprintf(w, "stream: 1 replica, leader %s (no other copy: fleet.replicas is 1)\n", leader)
		return
	}
	// The copies are as one node's server saw them at its last status: a
	// node silent or unread may have taken its (embedded) server down
	// since, so no margin is claimed then.
	var unknown []string
	for _, s := range nodes {
		if s.Silent || s.Unread != "" {
			unknown = append(unknown, s.Node)
		}
	}
	line := fmt.Sprintf("stream: %d replicas, leader %s", len(reps), leader)
	quorum := len(reps)/2 + 1
	switch {
	case len(bad) == 0 && len(unknown) == 0:
		line += ", all current"
	case len(bad) == 0:
		line += ", all current as last seen"
	default:
		line += "; " + strings.Join(bad, ", ")
	}
	switch spare := online - quorum; {
	case len(bad) > 0 && spare <= 0:
		line += ": one more server down and the stream stops taking events (reports queue in the outboxes)"
	case len(unknown) > 0:
		line += fmt.Sprintf("; %s silent or unread: their servers may be down too, how many more servers the stream can lose is not known", strings.Join(unknown, ", "))
	case len(bad) > 0:
		line += fmt.Sprintf(": the stream can lose %d more server(s)", spare)
	}
	fmt.Fprintln(w, line)
	for _, r := range reps {
		if r.Offline {
			fmt.Fprintf(w, "  a server retired for good stays a member until removed: `nddmilter fleet remove-server %s` (embedded servers; start its replacement first)\n", r.Server)
		}
	}
}
