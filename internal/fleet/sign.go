package fleet

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Signed events. Every event a node publishes carries, in NATS headers,
// the node's name, its public key and an ed25519 signature (the node's
// nkey) over the stream subject, the message id and the exact payload
// bytes. Appliers verify it against the fleet's list of node keys
// (Options.Nodes) before anything else: an event that is unsigned, signed
// by a key not in the list, signed by a key listed for another node than
// the one the event names, or whose signature does not verify, is skipped
// (counted as applied, so that the stream goes on) on every node alike,
// and counted by reason (Status.Rejected). A node's key can therefore not
// publish in another node's name, and a client without a node key cannot
// add an event that any node applies, whatever the NATS permissions.
//
// The decision depends only on the message and the fleet's configuration,
// never on the applying node: nodes with the same list of keys skip the
// same events (the list is among the settings the nodes compare,
// daemon.FleetSettings).

// Headers of a signed event.
const (
	hdrNode = "Nddmilter-Node"
	hdrKey  = "Nddmilter-Key"
	hdrSig  = "Nddmilter-Sig"
)

// signContext is the domain the signatures are made in: a signature over
// an event is never valid for anything else the key signs (NATS's nonce).
const signContext = "nddmilter-fleet-event/1\x00"

// NodeKey is one node of the fleet and the public nkey (a user key,
// starting with U) its events and snapshots are signed with.
type NodeKey struct {
	Name string
	Key  string
	// Snapshots marks a node that stores the fleet's snapshots (and
	// purges the stream after them): a snapshot is restored only when a
	// node so marked signed it.
	Snapshots bool
}

// UnsignedWindow accepts, during a rolling upgrade from a build that did
// not sign its events, the unsigned events that name one of Nodes and
// that the stream stored before Until (the stream's own timestamp, the
// same on every node). Every other unsigned event is skipped.
type UnsignedWindow struct {
	Nodes []string
	Until time.Time
}

// Reasons an event is skipped (the label of
// nddmilter_fleet_events_rejected_total).
const (
	RejectUnsigned     = "unsigned"      // no signature (and not in the upgrade window)
	RejectUnknownKey   = "unknown_key"   // signed by a key not in the fleet's list
	RejectWrongNode    = "wrong_node"    // signed by a key listed for another node
	RejectBadSignature = "bad_signature" // the signature does not verify
	RejectMalformed    = "malformed"     // verified, but not an event this node can read
)

// RejectReasons are every reason an event is skipped for.
var RejectReasons = []string{RejectUnsigned, RejectUnknownKey, RejectWrongNode, RejectBadSignature, RejectMalformed}

// ErrNoSigner is returned by Start when the node has no signing key or
// its public key is not listed for it in Options.Nodes.
var ErrNoSigner = errors.New("fleet: no signing key for this node")

// signedBytes are the bytes a signature covers.
func signedBytes(subject, msgID string, data []byte) []byte {
	b := make([]byte, 0, len(signContext)+len(subject)+len(msgID)+2+len(data))
	b = append(b, signContext...)
	b = append(b, subject...)
	b = append(b, 0)
	b = append(b, msgID...)
	b = append(b, 0)
	return append(b, data...)
}

// signer signs the events one node publishes.
type signer struct {
	node string
	pub  string
	kp   nkeys.KeyPair
}

func newSigner(node string, kp nkeys.KeyPair) (*signer, error) {
	if kp == nil {
		return nil, fmt.Errorf("%w: set fleet.nats.nkey_seed (nddmilter fleet init or fleet nkey makes one)", ErrNoSigner)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSigner, err)
	}
	if _, err := kp.Sign([]byte(signContext)); err != nil {
		return nil, fmt.Errorf("%w: the key cannot sign (a public key, not a seed?): %w", ErrNoSigner, err)
	}
	return &signer{node: node, pub: pub, kp: kp}, nil
}

// header signs data published to subject with msgID.
func (s *signer) header(subject, msgID string, data []byte) (nats.Header, error) {
	sig, err := s.kp.Sign(signedBytes(subject, msgID, data))
	if err != nil {
		return nil, fmt.Errorf("fleet: sign event: %w", err)
	}
	h := nats.Header{}
	h.Set(nats.MsgIdHdr, msgID)
	h.Set(hdrNode, s.node)
	h.Set(hdrKey, s.pub)
	h.Set(hdrSig, base64.RawURLEncoding.EncodeToString(sig))
	return h, nil
}

// trust verifies events against the fleet's node keys.
type trust struct {
	byKey    map[string]NodeKey // public key → node
	unsigned UnsignedWindow

	mu       sync.Mutex
	verifier map[string]nkeys.KeyPair
}

func newTrust(nodes []NodeKey, w UnsignedWindow) (*trust, error) {
	t := &trust{byKey: make(map[string]NodeKey, len(nodes)), unsigned: w, verifier: make(map[string]nkeys.KeyPair)}
	names := map[string]bool{}
	for _, nk := range nodes {
		if !nkeys.IsValidPublicUserKey(nk.Key) {
			return nil, fmt.Errorf("fleet: node %s: %q is not a public user nkey (it starts with U)", nk.Name, nk.Key)
		}
		if nk.Name == "" {
			return nil, fmt.Errorf("fleet: key %s: no node name", nk.Key)
		}
		if _, dup := t.byKey[nk.Key]; dup {
			return nil, fmt.Errorf("fleet: key %s is listed twice: each node has its own", nk.Key)
		}
		if names[nk.Name] {
			return nil, fmt.Errorf("fleet: node %s is listed twice", nk.Name)
		}
		names[nk.Name] = true
		t.byKey[nk.Key] = nk
	}
	return t, nil
}

// keyOf returns the listed node of a key.
func (t *trust) keyOf(key string) (NodeKey, bool) {
	nk, ok := t.byKey[key]
	return nk, ok
}

// verify checks the signature of a message of the stream: the node it
// names and that its key signed it. reason is "" for a verified message,
// RejectUnsigned for one without a signature (whose node is then the
// claimed one, unverified: the caller applies the upgrade window).
func (t *trust) verify(subject string, h nats.Header, data []byte) (node, reason string) {
	key, sig64, claimed := h.Get(hdrKey), h.Get(hdrSig), h.Get(hdrNode)
	if key == "" && sig64 == "" {
		return claimed, RejectUnsigned
	}
	nk, ok := t.byKey[key]
	if !ok {
		return claimed, RejectUnknownKey
	}
	if claimed != nk.Name {
		return claimed, RejectWrongNode
	}
	sig, err := base64.RawURLEncoding.DecodeString(sig64)
	if err != nil {
		return claimed, RejectBadSignature
	}
	v, err := t.pub(key)
	if err != nil {
		return claimed, RejectBadSignature
	}
	if v.Verify(signedBytes(subject, h.Get(nats.MsgIdHdr), data), sig) != nil {
		return claimed, RejectBadSignature
	}
	return nk.Name, ""
}

func (t *trust) pub(key string) (nkeys.KeyPair, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.verifier[key]; ok {
		return v, nil
	}
	v, err := nkeys.FromPublicKey(key)
	if err != nil {
		return nil, err
	}
	t.verifier[key] = v
	return v, nil
}

// unsignedAllowed reports whether an unsigned event naming node, stored
// at stored, falls in the upgrade window.
func (t *trust) unsignedAllowed(node string, stored time.Time) bool {
	w := t.unsigned
	return node != "" && !w.Until.IsZero() && stored.Before(w.Until) && slices.Contains(w.Nodes, node)
}

// verifySnapshot checks a snapshot's signature (its metadata: node, key,
// sig over its sequence and digest) against the nodes that store
// snapshots.
func (t *trust) verifySnapshot(meta map[string]string, digest string) error {
	key, node := meta["key"], meta["node"]
	nk, ok := t.byKey[key]
	switch {
	case meta["sig"] == "" || key == "":
		return fmt.Errorf("%w: unsigned", ErrSnapshotUntrusted)
	case !ok:
		return fmt.Errorf("%w: signed by key %s, not one of the fleet's", ErrSnapshotUntrusted, key)
	case nk.Name != node:
		return fmt.Errorf("%w: signed by %s's key but names %s", ErrSnapshotUntrusted, nk.Name, node)
	case !nk.Snapshots:
		return fmt.Errorf("%w: signed by %s, which does not store snapshots (fleet.nodes[].snapshots)", ErrSnapshotUntrusted, node)
	}
	sig, err := base64.RawURLEncoding.DecodeString(meta["sig"])
	if err != nil {
		return fmt.Errorf("%w: signature: %w", ErrSnapshotUntrusted, err)
	}
	v, err := t.pub(key)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshotUntrusted, err)
	}
	if v.Verify(snapshotSigned(meta["seq"], node, digest), sig) != nil {
		return fmt.Errorf("%w: the signature does not match the snapshot", ErrSnapshotUntrusted)
	}
	return nil
}

// ErrSnapshotUntrusted: the snapshot's signature is missing or not one
// of a snapshot node's; Bootstrap does not restore it.
var ErrSnapshotUntrusted = errors.New("fleet: snapshot not signed by a node of the fleet that stores snapshots")

const snapshotContext = "nddmilter-fleet-snapshot/1\x00"

// snapshotSigned are the bytes a snapshot's signature covers: its
// sequence, node and the SHA-256 digest of its content.
func snapshotSigned(seq, node, digest string) []byte {
	return []byte(snapshotContext + seq + "\x00" + node + "\x00" + digest)
}

// NodesDigest names a list of node keys briefly (the first 12 hex digits
// of the SHA-256 of its sorted entries): nodes whose lists differ would
// skip different events, so they compare it among their settings.
func NodesDigest(nodes []NodeKey) string {
	lines := make([]string, 0, len(nodes))
	for _, n := range nodes {
		lines = append(lines, fmt.Sprintf("%s=%s snapshots=%v", n.Name, n.Key, n.Snapshots))
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return fmt.Sprintf("%d nodes, %x", len(nodes), sum[:6])
}

// String is the window as the nodes compare it among their settings.
func (w UnsignedWindow) String() string {
	if len(w.Nodes) == 0 {
		return "none"
	}
	nodes := slices.Clone(w.Nodes)
	slices.Sort(nodes)
	return strings.Join(nodes, ",") + " until " + w.Until.UTC().Format(time.RFC3339)
}

// SignEvent returns the headers a node signing with kp as node attaches
// to data published to subject with msgID: what every node of the fleet
// verifies (for tests and tools that publish as a node).
func SignEvent(kp nkeys.KeyPair, node, subject, msgID string, data []byte) (nats.Header, error) {
	s, err := newSigner(node, kp)
	if err != nil {
		return nil, err
	}
	return s.header(subject, msgID, data)
}
