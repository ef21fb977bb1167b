package fleet

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Node names.
//
// Each node publishes its status under its name (Options.Node). Two
// processes given the same name (a configuration copied to another host
// without changing fleet.node) would overwrite each other's status:
// `fleet status` would show one node whose figures jump between two
// hosts', and the clock measure would mix two clocks. Events are not at
// risk (their ids are random, and every node reads the whole stream), but
// the administrator must know. Each process marks its statuses with a
// random instance id; a status under its own name that another instance
// put after this process's last put is a clash, named in its status,
// /readyz and the log until none was seen for clashFor.

// Name is the node's name (Options.Node).
func (n *Node) Name() string { return n.opts.Node }

// clashFor is how long a clash is reported after the last status of
// another instance under this node's name was read.
func (n *Node) clashFor() time.Duration { return 3*n.opts.StatusEvery + n.opts.SilentAfter() }

func newInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// noteOwnKey looks at the status stored under this node's name (revision
// rev, put by instance) and reports whether it is this process's: a
// status another instance put after this process's last put is a clash.
// Before this process's first put, the stored status may be its previous
// run's: neither its own nor a clash.
func (n *Node) noteOwnKey(rev uint64, instance string) (own bool) {
	last := n.putRev.Load()
	if last == 0 {
		return false
	}
	if instance == n.instance {
		return true
	}
	if rev > last && instance != "" {
		if prev := n.clashSeen.Swap(time.Now().UnixNano()); prev == 0 || time.Since(time.Unix(0, prev)) >= n.clashFor() {
			n.log.Error("fleet: another process publishes its status under this node's name: give each host its own fleet.node",
				"node", n.opts.Node)
		}
	}
	return false
}

// nameClash reports whether another process published a status under
// this node's name within clashFor.
func (n *Node) nameClash() bool {
	seen := n.clashSeen.Load()
	return seen != 0 && time.Since(time.Unix(0, seen)) < n.clashFor()
}

// NameWarning says that another process uses this node's name, "" when
// none was seen lately.
func (n *Node) NameWarning() string {
	if !n.nameClash() {
		return ""
	}
	return "another process publishes its status as node " + n.opts.Node + ": give each host its own fleet.node"
}
