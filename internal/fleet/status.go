package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
)

// Status is one node's view of its fleet membership.
type Status struct {
	Node      string `json:"node"`
	Connected bool   `json:"connected"`
	// Version is the build the node runs (Options.Version), and Events
	// the newest event version it applies: during an upgrade, a node
	// with a lower Events stops at the first event of a newer version
	// (ErrNewerEvent) until it is upgraded. Both are empty in the status
	// of builds before them.
	Version string `json:"version,omitempty"`
	Events  int    `json:"events,omitempty"`
	// Ready is true once the stream is set up and the node applies it.
	Ready bool `json:"ready"`
	// StreamUnreachable is set when the node is connected and ready but
	// its last query of the stream got no answer within PublishTimeout,
	// or one without a stream leader, or a publish got no answer since
	// the last acknowledged one: its server is cut off from the stream's
	// quorum (a partition, its server alone), and the reports it takes
	// queue (Outbox) until a publish is acknowledged again.
	StreamUnreachable bool `json:"stream_unreachable,omitempty"`
	// Applied is the last stream sequence applied to the local store;
	// StreamLast the stream's last sequence (0 when unknown) and Lag the
	// difference.
	Applied    uint64 `json:"applied"`
	StreamLast uint64 `json:"stream_last"`
	Lag        uint64 `json:"lag"`
	// StreamEvents and StreamBytes are the stream's size (0 when
	// unknown).
	StreamEvents uint64 `json:"stream_events"`
	StreamBytes  uint64 `json:"stream_bytes"`
	// Replicas are the stream's copies as the node's server sees them,
	// the leader first; nil when unknown (not connected, no answer).
	Replicas []Replica `json:"replicas,omitempty"`
	// Outbox is the number of events queued on this node.
	Outbox int `json:"outbox"`
	// StateHash is the hash of the replicated campaign state
	// (store.Badger.StateHash) after applying StateHashSeq: equal on
	// nodes at the same sequence.
	StateHash    string `json:"state_hash,omitempty"`
	StateHashSeq uint64 `json:"state_hash_seq,omitempty"`
	Published    uint64 `json:"published"`
	Queued       uint64 `json:"queued"`
	SnapshotSeq  uint64 `json:"snapshot_seq,omitempty"`
	// ConsumerRestarts counts the stream consumers the node recreated
	// because they stalled (Options.StallAfter) since it started.
	ConsumerRestarts uint64 `json:"consumer_restarts,omitempty"`
	// Rejected counts the events of the stream the node skipped since it
	// started, by reason (RejectReasons): unsigned, signed by a key not
	// the fleet's or not the named node's, or unreadable (sign.go), or
	// published again (replay.go: stale, replayed).
	Rejected map[string]uint64 `json:"rejected,omitempty"`
	// Halted is set while the node stopped applying the stream at an
	// event of a newer version than it applies, signed by a node of the
	// fleet: it checks from a state that no longer follows the fleet's
	// until it is upgraded (or the event is taken out of the stream).
	Halted *Halt  `json:"halted,omitempty"`
	Error  string `json:"error,omitempty"`
	// Time is when the node took this status (its own clock).
	Time time.Time `json:"time"`
	// ClockOffset is how far the node's clock is from the fleet's
	// median clock, as the reading node measures it from the times NATS
	// stored the statuses at (clock.go); 0 when it cannot be measured. A
	// node whose clock is off by more than Options.MaxClockOffset
	// publishes no expiry decision.
	ClockOffset time.Duration `json:"clock_offset,omitempty"`
	// Instance is a random id of the process publishing the status, and
	// NameClash is set on this node's own status while another process
	// publishes statuses under the same node name (name.go).
	Instance  string `json:"instance,omitempty"`
	NameClash bool   `json:"name_clash,omitempty"`
	// Settings are what the node signs and applies reports with
	// (Options.Settings); SettingsDiffer compares them.
	Settings map[string]string `json:"settings,omitempty"`
	// Unread is set, with the error, on the row of a node whose status
	// the reading node could not read (a timeout, a server that does not
	// answer): nothing else of the row is known. PeersUnread is set on
	// the reading node's own status when it could not list the others':
	// the list is then this node alone.
	Unread      string `json:"unread,omitempty"`
	PeersUnread string `json:"peers_unread,omitempty"`
	// Silent is set on another node's status older than SilentAfter (by
	// the time NATS stored it, so whatever the nodes' clocks say): that
	// node stopped publishing it (stopped, crashed, cut off from NATS,
	// or retired: Forget removes it), and what the status says is only
	// as of Time.
	Silent bool `json:"silent,omitempty"`
}

// Halt is where a node stopped applying the stream: the event and its
// version.
type Halt struct {
	Seq     uint64 `json:"seq"`
	Version int    `json:"version"`
}

// String says what the halt is and what to do.
func (h Halt) String() string {
	return fmt.Sprintf("halted: event %d of version %d needs an upgrade (this build applies up to %d)", h.Seq, h.Version, eventVersion)
}

// Replica is one copy of the stream, on one NATS server.
type Replica struct {
	Server string `json:"server"`
	Leader bool   `json:"leader,omitempty"`
	// Current: it has every event the leader has. Offline: its server is
	// not reachable from the leader. Lag counts the events it lacks, and
	// Seen is how long ago the leader last heard from it.
	Current bool          `json:"current"`
	Offline bool          `json:"offline,omitempty"`
	Lag     uint64        `json:"lag,omitempty"`
	Seen    time.Duration `json:"seen,omitempty"`
}

// Healthy reports whether the replica can count towards the stream's
// quorum now.
func (r Replica) Healthy() bool { return r.Leader || (r.Current && !r.Offline) }

// StreamCopies are the stream's copies as the freshest live node among
// nodes that knows them sees them (nil when none does): the view `fleet
// status` and the dashboard show.
func StreamCopies(nodes []Status) []Replica {
	var reps []Replica
	var asOf time.Time
	for _, s := range nodes {
		if !s.Silent && len(s.Replicas) > 0 && s.Time.After(asOf) {
			reps, asOf = s.Replicas, s.Time
		}
	}
	return reps
}

// replicas lists the stream's copies from its cluster information.
func replicas(ci *jetstream.ClusterInfo) []Replica {
	if ci == nil || ci.Leader == "" {
		return nil
	}
	out := []Replica{{Server: ci.Leader, Leader: true, Current: true}}
	for _, p := range ci.Replicas {
		if p == nil {
			continue
		}
		out = append(out, Replica{Server: p.Name, Current: p.Current, Offline: p.Offline, Lag: p.Lag, Seen: p.Active})
	}
	return out
}

// SilentAfter is how old another node's status may be before it is
// called silent: three of the reading node's status intervals and a
// publish timeout (32 s by default). Nodes publish their status every
// Options.StatusEvery; their clocks are assumed to agree within seconds,
// as NTP keeps them.
func (o Options) SilentAfter() time.Duration {
	o = o.withDefaults()
	return 3*o.StatusEvery + o.PublishTimeout
}

// Status returns this node's status; withHash computes the state hash
// (a scan of the store).
func (n *Node) Status(ctx context.Context, withHash bool) Status {
	n.mu.Lock()
	s := Status{
		Node: n.opts.Node, Version: n.opts.Version, Events: eventVersion, Ready: n.ready, Applied: n.applied, Published: n.published,
		Queued: n.queued, SnapshotSeq: n.snapSeq, ConsumerRestarts: n.restarts,
		Error: n.lastErr, Time: n.statusTime(),
	}
	if n.halted != nil {
		h := *n.halted
		s.Halted = &h
	}
	for r, c := range n.rejected {
		if s.Rejected == nil {
			s.Rejected = make(map[string]uint64, len(n.rejected))
		}
		s.Rejected[r] = c
	}
	n.mu.Unlock()
	if n.clockMeasured.Load() {
		s.ClockOffset = time.Duration(n.clockOffset.Load())
	}
	if d := n.testSlowStatus.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	s.Settings = n.currentSettings()
	s.Instance, s.NameClash = n.instance, n.nameClash()
	s.Connected = n.nc.IsConnected()
	if _, total, err := n.st.OutboxList(ctx, 0); err == nil {
		s.Outbox = total
	}
	if info, ok := n.streamState(ctx); ok {
		st := info.State
		s.StreamLast, s.StreamEvents, s.StreamBytes = st.LastSeq, st.Msgs, st.Bytes
		s.Replicas = replicas(info.Cluster)
	}
	s.StreamUnreachable = s.Connected && s.Ready && n.streamUnreachable()
	if s.StreamLast > s.Applied {
		s.Lag = s.StreamLast - s.Applied
	}
	if withHash {
		if _, err := n.hashState(ctx); err != nil {
			s.Error = err.Error()
		}
	}
	n.mu.Lock()
	s.StateHash, s.StateHashSeq = n.hash, n.hashSeq
	n.mu.Unlock()
	return s
}

// hashState takes the node's state hash and keeps it unless it was taken
// in the middle of an event (a report event applied in several
// transactions): a hash is compared with others' after the same whole
// event. It returns whether the hash was kept.
func (n *Node) hashState(ctx context.Context) (bool, error) {
	h, p, err := n.st.StateHashAt(ctx)
	if err != nil || p.Partial {
		return false, err
	}
	n.mu.Lock()
	n.hash, n.hashSeq = h, p.Seq
	n.mu.Unlock()
	return true, nil
}

// WaitApplied waits until the node applied stream sequence seq, or ctx
// ends.
func (n *Node) WaitApplied(ctx context.Context, seq uint64) error {
	for {
		n.mu.Lock()
		applied, ch := n.applied, n.appliedCh
		n.mu.Unlock()
		if applied >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Fleet returns the status of every node that published one (this node's
// fresh, with a fresh state hash), sorted by node name.
func (n *Node) Fleet(ctx context.Context) ([]Status, error) { return n.fleet(ctx, true) }

// Peers is Fleet with this node's last state hash instead of a fresh one
// (which reads the whole store): cheap enough for a page an administrator
// keeps open.
func (n *Node) Peers(ctx context.Context) ([]Status, error) { return n.fleet(ctx, false) }

func (n *Node) fleet(ctx context.Context, withHash bool) ([]Status, error) {
	self := n.Status(ctx, withHash)
	out := []Status{self}
	if !self.Connected || !self.Ready {
		return out, nil
	}
	keys, err := n.statusKeys(ctx)
	var kv jetstream.KeyValue
	if err == nil {
		kv, err = n.js.KeyValue(ctx, n.opts.nodesBucket())
	}
	if err != nil {
		out[0].PeersUnread = err.Error()
		return out, err
	}
	n.skews.keep(keys)
	var errs []error
	var unread []Status // rows of the nodes whose status was not read
	// out[i]'s clock minus the bucket's server's, and when NATS stored
	// it (out[0], this node, is filled from its last stored status).
	skews, created := []time.Duration{0}, []time.Time{{}}
	selfSkew, selfStored := time.Duration(0), false
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // forgotten (purged) or expired
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("fleet: status of %s: %w", k, err))
			if k != kvKey(n.opts.Node) {
				unread = append(unread, Status{Node: k, Unread: err.Error()})
			}
			continue
		}
		var s Status
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			unread = append(unread, Status{Node: k, Unread: "not a status: " + err.Error()})
			continue
		}
		if k == kvKey(n.opts.Node) {
			// This node's last status, only for the skew of its clock,
			// unless another process put it.
			if n.noteOwnKey(e.Revision(), s.Instance) {
				selfSkew, selfStored = n.skews.add(k, e.Revision(), s.Time.Sub(e.Created())), true
			}
			continue
		}
		if s.StreamLast < self.StreamLast {
			s.StreamLast = self.StreamLast
			s.Lag = s.StreamLast - min(s.Applied, s.StreamLast)
		}
		s.ClockOffset = 0
		out = append(out, s)
		skews = append(skews, n.skews.add(k, e.Revision(), s.Time.Sub(e.Created())))
		created = append(created, e.Created())
	}
	// Silent: by the servers' clock when this node's own status tells
	// how far its clock is from theirs, else by this node's clock.
	serverNow := self.Time
	if selfStored {
		serverNow = self.Time.Add(-selfSkew)
	}
	for i := 1; i < len(out); i++ {
		if selfStored {
			out[i].Silent = serverNow.Sub(created[i]) > n.opts.SilentAfter()
		} else {
			out[i].Silent = self.Time.Sub(out[i].Time) > n.opts.SilentAfter()
		}
	}
	if selfStored {
		skews[0] = selfSkew
		setClockOffsets(out, skews)
		n.serverSkew.Store(int64(selfSkew))
		n.noteClockOffset(out[0])
	} else {
		out[0].ClockOffset = 0
	}
	out = append(out, unread...)
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Node, b.Node) })
	return out, errors.Join(errs...)
}

// statusKeys lists the keys of the status bucket from its stream's
// subjects: one request, whatever is written meanwhile (a key watcher,
// as KeyValue.ListKeys, was seen to end early while statuses were being
// published). Forgotten keys are listed too (their purge marker).
func (n *Node) statusKeys(ctx context.Context) ([]string, error) {
	return statusKeys(ctx, n.js, n.opts.nodesBucket())
}

func statusKeys(ctx context.Context, js jetstream.JetStream, bucket string) ([]string, error) {
	st, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return nil, fmt.Errorf("fleet: status bucket: %w", err)
	}
	prefix := "$KV." + bucket + "."
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, fmt.Errorf("fleet: status bucket: %w", err)
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subj, prefix))
	}
	slices.Sort(keys)
	return keys, nil
}

// ReadStatuses reads the statuses the nodes of the fleet of stream (""
// for the default) published, without being a node: what `fleet check
// --connect` compares a configuration with before its node starts. A
// status NATS stored more than Options.SilentAfter ago, by this host's
// clock, is Silent. A fleet whose bucket does not exist yet has none.
func ReadStatuses(ctx context.Context, js jetstream.JetStream, stream string) ([]Status, error) {
	o := Options{Stream: stream}.withDefaults()
	keys, err := statusKeys(ctx, js, o.nodesBucket())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, o.nodesBucket())
	if err != nil {
		return nil, fmt.Errorf("fleet: status bucket: %w", err)
	}
	var out []Status
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			out = append(out, Status{Node: k, Unread: err.Error()})
			continue
		}
		var s Status
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			out = append(out, Status{Node: k, Unread: "not a status: " + err.Error()})
			continue
		}
		s.Silent = time.Since(e.Created()) > o.SilentAfter()
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}

// kvKey makes a node name a valid key of the status bucket (the one its
// NATS user may write, natsd.Permissions).
func kvKey(node string) string { return natsd.StatusKey(node) }

// maintLoop publishes the node's status and stores snapshots when due.
func (n *Node) maintLoop() {
	defer n.wg.Done()
	var prev uint64
	var next time.Time // the earliest time of the next hash
	// The first status goes out as soon as the node is ready (then every
	// StatusEvery), so that the others see it, and it sees theirs
	// (updateReportVersion), without a whole interval's wait.
	every := min(n.opts.StatusEvery, 200*time.Millisecond)
	for n.sleep(every) {
		if !n.isReady() || !n.nc.IsConnected() {
			continue
		}
		every = n.opts.StatusEvery
		s := n.Status(n.ctx, false)
		// The hash reads the whole store: computed only when the node is
		// idle (caught up, nothing applied since the last tick), and at
		// most a tenth of the time.
		idle := s.Applied == prev && s.Lag == 0
		prev = s.Applied
		if (s.Applied != s.StateHashSeq || s.StateHash == "") && idle && !time.Now().Before(next) {
			start := time.Now()
			if ok, _ := n.hashState(n.ctx); ok {
				n.mu.Lock()
				s.StateHash, s.StateHashSeq = n.hash, n.hashSeq
				n.mu.Unlock()
			}
			next = time.Now().Add(10 * time.Since(start))
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.opts.PublishTimeout)
		if kv, err := n.js.KeyValue(ctx, n.opts.nodesBucket()); err == nil {
			// Stamped now, after the stream and store queries above,
			// which can take seconds while the stream has no leader: the
			// readers take the time from here to the put for clock skew.
			s.Time = n.statusTime()
			if b, err := json.Marshal(s); err == nil {
				if rev, err := kv.Put(ctx, kvKey(n.opts.Node), b); err == nil {
					n.putRev.Store(rev)
				}
			}
		}
		cancel()
		n.updateReportVersion()
		if n.admin() && n.snapshotDue(n.ctx) {
			if _, _, err := n.Snapshot(n.ctx); err != nil {
				n.log.Warn("fleet: snapshot", "err", err)
			}
		}
	}
}

// ReportVersion is the version this node publishes report events in:
// EventVersion once every live node's status says it applies it, before
// that an older one.
func (n *Node) ReportVersion() int { return int(n.reportV.Load()) }

// updateReportVersion sets the version report events are published in
// from the nodes' statuses: the newest that every live node applies (a
// status without Events is from a build before version 3, which applies
// up to 2). A silent node, or one that has not published a status yet,
// is not waited for: if it runs an older build, it stops at the first
// newer event until it is upgraded (fleet status names it). When the statuses cannot all be read, the
// version stays.
func (n *Node) updateReportVersion() {
	ctx, cancel := context.WithTimeout(n.ctx, n.opts.PublishTimeout)
	defer cancel()
	peers, err := n.Peers(ctx)
	if err != nil || len(peers) == 0 {
		return
	}
	n.noteSettings(peers)
	n.noteDivergence(peers)
	v := eventVersion
	for _, s := range peers {
		if s.Silent {
			continue
		}
		events := s.Events
		if events == 0 {
			events = jsonVersion
		}
		v = min(v, events)
	}
	v = max(v, jsonVersion)
	if old := n.reportV.Swap(int64(v)); old != int64(v) {
		n.log.Info("fleet: publishing report events in a new version", "version", v, "was", old)
	}
}

// Errors of Forget.
var (
	// ErrUnknownNode: no status of a node of that name is in the status
	// bucket (never published, forgotten, or expired: ForgetAfter).
	ErrUnknownNode = errors.New("fleet: no such node")
	// ErrNodeAlive: the node still publishes its status (it is not
	// Silent), and would publish it again.
	ErrNodeAlive = errors.New("fleet: the node still publishes its status")
)

// ErrNotAdmin: the request needs a node with snapshots: true in
// fleet.nodes (its NATS user may write every node's status).
var ErrNotAdmin = errors.New("fleet: not a node that stores snapshots")

// forgetTries bounds Forget's reads of a status that changed under it.
const forgetTries = 5

// Forget removes the status of a node retired from the fleet, so that
// `fleet status` and the dashboard stop listing it. Only a Silent node
// can be forgotten: a node that still publishes its status, this one
// included, is refused with ErrNodeAlive. The events the node published
// stay in the stream and applied; if it comes back, it is listed again.
func (n *Node) Forget(ctx context.Context, node string) error {
	if node == n.opts.Node || kvKey(node) == kvKey(n.opts.Node) {
		return fmt.Errorf("%w: %s is this node", ErrNodeAlive, node)
	}
	if !n.isReady() || !n.nc.IsConnected() {
		return fmt.Errorf("fleet: forget %s: not connected to the fleet's NATS servers", node)
	}
	if !n.admin() {
		return fmt.Errorf("%w: forget %s: only a node with snapshots: true in fleet.nodes may remove another node's status", ErrNotAdmin, node)
	}
	kv, err := n.js.KeyValue(ctx, n.opts.nodesBucket())
	if err != nil {
		return fmt.Errorf("fleet: status bucket: %w", err)
	}
	// A read may come from a replica of the bucket a moment behind its
	// leader (direct gets): the purge, conditional on the revision read,
	// then fails, and the status is read again.
	var s Status
	for attempt := 1; ; attempt++ {
		e, err := kv.Get(ctx, kvKey(node))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("%w: %s", ErrUnknownNode, node)
		}
		if err != nil {
			return fmt.Errorf("fleet: status of %s: %w", node, err)
		}
		s = Status{}
		if err := json.Unmarshal(e.Value(), &s); err == nil {
			age := time.Since(s.Time)
			if n.clockMeasured.Load() { // by the time NATS stored it, as for Silent
				age = time.Now().Add(-time.Duration(n.serverSkew.Load())).Sub(e.Created())
			}
			if age <= n.opts.SilentAfter() {
				return fmt.Errorf("%w: %s published it %s ago (stop it first)", ErrNodeAlive, node, age.Round(time.Second))
			}
		}
		// Only the revision read: a status published meanwhile stays.
		err = kv.Purge(ctx, kvKey(node), jetstream.LastRevision(e.Revision()))
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("fleet: forget %s: %w", node, err)
		}
		if attempt == forgetTries {
			return fmt.Errorf("%w: %s published it again", ErrNodeAlive, node)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fleet: forget %s: %w", node, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	n.log.Info("fleet: node forgotten", "node", node, "last_status", s.Time)
	return nil
}
