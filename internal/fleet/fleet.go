// Package fleet replicates campaign state across the mail servers of a
// site through one NATS JetStream stream of campaign events (issue 12,
// docs/FLEET.md).
//
// Every node keeps its local Badger store and answers checks from it
// alone. Writes — reports, not-spam reports, state changes, deletions,
// expiry decisions and aggregated hit counts — are published as events
// (deduplicated with Nats-Msg-Id) instead of being written locally; every
// node, the publisher included, applies the stream's events in stream
// order with a deterministic function of (state, event): campaign ids
// come from the stream sequence, times from the event, and the applied
// sequence is written in the same Badger transaction as the change. An
// event that cannot be published waits in the store's durable outbox.
// A snapshot of the store (store.Badger.Backup) in a JetStream object
// store lets a new or wiped node start from it and the events after it.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"golang.org/x/sync/singleflight"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Options configure a Node. Zero values select the documented defaults.
type Options struct {
	// Node names this node (status, event origin). Default the host name.
	Node string
	// URLs are the NATS servers to connect to. Default nats.DefaultURL.
	URLs []string
	// NATS are extra connection options: credentials, nkeys, TLS.
	NATS []nats.Option
	// Stream is the JetStream stream of events. Default "NDDMILTER"; its
	// subject is Stream+".events", its snapshot bucket Stream+"_snapshot"
	// and its status bucket Stream+"_nodes".
	Stream string
	// Replicas is the replication factor of the stream and buckets.
	// Default 3.
	Replicas int
	// MaxAge bounds the stream's retention by age; it must be at least
	// the campaign expiry. Default 60 days.
	MaxAge time.Duration
	// HitsEvery is how often aggregated hit counts are published.
	// Default 2s.
	HitsEvery time.Duration
	// SnapshotEvery is how often the node stores a snapshot when the
	// stream moved on since the last one. Default 1h; negative: never.
	SnapshotEvery time.Duration
	// StatusEvery is how often the node publishes its status (with its
	// state hash) for `fleet status`. Default 10s.
	StatusEvery time.Duration
	// ForgetAfter is how long the status of a node that stopped
	// publishing it stays in the status bucket (a retired host leaves
	// `fleet status` after it; Node.Forget removes it at once).
	// Default 7 days.
	ForgetAfter time.Duration
	// PublishTimeout bounds a publish before a report is queued.
	// Default 2s.
	PublishTimeout time.Duration
	// ApplyTimeout bounds how long a report published by this node waits
	// for its local application (to answer with its campaign). Default 5s.
	ApplyTimeout time.Duration
	// StallAfter is how long the node waits for the next event while the
	// stream holds events it has not applied before it recreates its
	// consumer (watchLoop). Default 5s: longer than the client's own
	// recovery from missed heartbeats (two of consumerHeartbeat), which
	// is not enough when the consumer's server is cut off and the
	// client's recreation waits on it.
	StallAfter time.Duration
	// Logger receives the node's messages. Default slog.Default().
	Logger *slog.Logger
	// Clock is the time events carry (what applying stores as "now").
	// Default time.Now.
	Clock func() time.Time
	// Version names the build the node runs, shown beside it in `fleet
	// status` so that an upgrade's progress can be followed. Default "".
	Version string
	// Settings are what every node must share to sign and apply reports
	// alike (name → value: the lexicon's and model's ids, the signature
	// formats, the settings the apply depends on), published in its
	// status; `fleet status` names those the live nodes disagree on
	// (settings.go). Default none.
	Settings map[string]string
	// MaxClockOffset is how far this host's clock may be from the
	// fleet's median clock before the node stops publishing expiry
	// decisions (clock.go). Default 1m.
	MaxClockOffset time.Duration
	// Signer is this node's nkey (a user seed): it signs every event
	// the node publishes and the snapshots it stores (sign.go). Required:
	// Start fails with ErrNoSigner without it, or when Nodes does not
	// list its public key under Node.
	Signer nkeys.KeyPair
	// Nodes are the fleet's nodes and their public keys: events are
	// applied only when signed by the key listed for the node they name.
	// Every node must have the same list.
	Nodes []NodeKey
	// Unsigned accepts unsigned events of the nodes it names during a
	// rolling upgrade from a build that did not sign (sign.go). Default:
	// none.
	Unsigned UnsignedWindow
	// ReplayWindow is how far apart the time an event was signed and the
	// time the stream stored it may be (either way: clocks differ, a
	// publish is retried) for the event to be applied; within it, an
	// event is applied once (replay.go). Every node must have the same.
	// Default 5m.
	ReplayWindow time.Duration

	// beforeApply, when set (tests), is called by the applier with the
	// stream sequence of each event it received, before applying it.
	beforeApply func(seq uint64)
}

func (o Options) withDefaults() Options {
	if o.Node == "" {
		o.Node, _ = os.Hostname()
		if o.Node == "" {
			o.Node = "node"
		}
	}
	if len(o.URLs) == 0 {
		o.URLs = []string{nats.DefaultURL}
	}
	if o.Stream == "" {
		o.Stream = "NDDMILTER"
	}
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 60 * 24 * time.Hour
	}
	if o.HitsEvery <= 0 {
		o.HitsEvery = 2 * time.Second
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = time.Hour
	}
	if o.StatusEvery <= 0 {
		o.StatusEvery = 10 * time.Second
	}
	if o.ForgetAfter <= 0 {
		o.ForgetAfter = 7 * 24 * time.Hour
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = 2 * time.Second
	}
	if o.ApplyTimeout <= 0 {
		o.ApplyTimeout = 5 * time.Second
	}
	if o.StallAfter <= 0 {
		o.StallAfter = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.MaxClockOffset <= 0 {
		o.MaxClockOffset = time.Minute
	}
	if o.ReplayWindow <= 0 {
		o.ReplayWindow = 5 * time.Minute
	}
	return o
}

func (o Options) subject() string        { return o.Stream + ".events" }
func (o Options) snapshotBucket() string { return o.Stream + "_snapshot" }
func (o Options) nodesBucket() string    { return o.Stream + "_nodes" }

// ErrBehind is returned by Start when the stream no longer holds the
// events after the store's applied sequence: the node must start from a
// snapshot (wipe its store; Bootstrap).
var ErrBehind = errors.New("fleet: the store is older than the stream's retention")

// ErrNewerEvent stops applying the stream at an event of a newer version
// than this node's: the node waits, checking from its store, until it is
// upgraded.
var ErrNewerEvent = errors.New("fleet: an event of a newer version than this node applies")

// Node is one member of a fleet: it publishes the engine's writes and
// applies the stream to the local store.
type Node struct {
	opts Options
	eng  atomic.Pointer[campaign.Engine] // SetEngine swaps it (reload)
	st   *store.Badger
	log  *slog.Logger
	nc   *nats.Conn
	js   jetstream.JetStream

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // wakes the outbox publisher
	// waiting is true while the applier waits for the next event;
	// unstall asks it to recreate its consumer (watchLoop).
	waiting atomic.Bool
	unstall chan struct{}
	// reportJobs hands Report calls to the batcher (unbuffered: a call
	// is taken or, once batcherDone is closed, not); batch.go.
	reportJobs  chan *reportJob
	batcherDone chan struct{}
	// dropEvents makes the consumer drop what it delivers, as a stalled
	// one delivers nothing (tests of watchLoop).
	dropEvents atomic.Bool
	// reportV is the version report events are published in: the
	// newest every live node applies (reportVersion), jsonVersion until
	// the nodes' statuses say.
	reportV atomic.Int64
	// clockOffset is this node's clock offset from the fleet's median
	// (nanoseconds) as last measured (clock.go), valid once clockMeasured;
	// testSkew shifts the clocks of its statuses and events, as a host's
	// clock off would (tests of clock.go).
	clockOffset   atomic.Int64
	clockMeasured atomic.Bool
	serverSkew    atomic.Int64 // this host's clock minus the status bucket's server's
	skews         skewWindows  // each node's recent skews (clock.go)
	// instance tells this process's statuses from those of another
	// process configured with the same node name; putRev is the revision
	// of its last status put and clashSeen when (UnixNano) a status of
	// another instance under its name was last read (name.go).
	instance  string
	putRev    atomic.Uint64
	clashSeen atomic.Int64
	// settings are published in the status; settingsDiff is what the
	// live nodes disagree on, as last read (settings.go).
	settings     atomic.Pointer[map[string]string]
	settingsDiff atomic.Value
	testSkew     atomic.Int64
	// testSlowStatus delays Status after it read the time (nanoseconds),
	// as the stream's queries do while it has no leader (tests).
	testSlowStatus atomic.Int64
	// streamOK is whether the last query of the stream (streamState)
	// answered with a leader, streamAt when it started (UnixNano; 0: none
	// yet); streamQuery shares a query among concurrent callers.
	streamOK    atomic.Bool
	streamAt    atomic.Int64
	streamQuery singleflight.Group
	// pubDownAt is when a publish last got no answer (UnixNano; 0: the
	// last publish was acknowledged, or none failed): reports are queued
	// without trying until a publish of the outbox is acknowledged, or,
	// with nothing queued, a query started later finds a leader.
	pubDownAt atomic.Int64
	// qlog keeps an outage's queued events to a few log lines.
	qlog queueLog
	// divergence names the events after which this node's state hash
	// and another live node's differ, as last read (compare.go).
	divergence atomic.Value

	// prov holds the reports queued while the stream is unreachable,
	// which protect this host until applied (provisional.go).
	prov *provisional
	// sign signs the events this node publishes; trust verifies the
	// stream's (sign.go).
	sign  *signer
	trust *trust
	// replay decides which signed events are stale or replayed
	// (replay.go); only the applier uses it.
	replay replayGuard

	mu        sync.Mutex
	rejected  map[string]uint64 // events skipped, by reason (sign.go)
	halted    *Halt             // applying stopped at an event of a newer version
	ready     bool              // stream set up
	applied   uint64
	lastErr   string
	waiters   map[string]chan applyResult
	appliedCh chan struct{} // closed and replaced at every applied event
	hits      map[hitKey]*hitAgg
	published uint64 // events published by this node
	queued    uint64 // events queued (publish failed)
	snapSeq   uint64 // sequence of the last snapshot stored or seen
	// hash is the node's last state hash, taken after the whole event
	// hashSeq (maintLoop, Status with the hash).
	hash     string
	hashSeq  uint64
	restarts uint64 // consumers recreated by watchLoop
}

// Start connects the node and starts applying the stream from the store's
// applied sequence through eng. The caller makes the node eng's Writer
// and HitCounter, and gives its Checker the node's Provisional reports
// (the daemon does when it wires the engine). NATS being down
// is not an error: the node keeps trying, checks answer from the local
// store and reports queue in the outbox. The caller closes the node
// (Close) before the store.
func Start(ctx context.Context, eng *campaign.Engine, st *store.Badger, opts Options) (*Node, error) {
	opts = opts.withDefaults()
	applied, err := st.Applied(ctx)
	if err != nil {
		return nil, err
	}
	n := &Node{
		opts:        opts,
		st:          st,
		log:         opts.Logger.With("fleet_node", opts.Node),
		kick:        make(chan struct{}, 1),
		unstall:     make(chan struct{}, 1),
		reportJobs:  make(chan *reportJob),
		batcherDone: make(chan struct{}),
		applied:     applied,
		waiters:     make(map[string]chan applyResult),
		appliedCh:   make(chan struct{}),
		hits:        make(map[hitKey]*hitAgg),
		rejected:    make(map[string]uint64),
	}
	if n.trust, err = newTrust(opts.Nodes, opts.Unsigned); err != nil {
		return nil, err
	}
	if n.sign, err = newSigner(opts.Node, opts.Signer); err != nil {
		return nil, err
	}
	if nk, ok := n.trust.keyOf(n.sign.pub); !ok || nk.Name != opts.Node {
		return nil, fmt.Errorf("%w: its public key %s is not listed for node %s in the fleet's nodes (fleet.nodes)", ErrNoSigner, n.sign.pub, opts.Node)
	}
	n.reportV.Store(jsonVersion)
	n.instance = newInstanceID()
	n.SetSettings(opts.Settings)
	n.eng.Store(eng)
	// Reports queued before a restart protect this host again at once.
	n.prov = newProvisional(n.log)
	if items, _, err := st.OutboxList(ctx, math.MaxInt); err == nil {
		for _, it := range items {
			if ev, err := decodeEvent(it.Data); err == nil {
				n.prov.add(eng, ev)
			}
		}
	}
	n.nc, err = connect(opts, n.log)
	if err != nil {
		return nil, err
	}
	n.js, err = jetstream.New(n.nc)
	if err != nil {
		n.nc.Close()
		return nil, fmt.Errorf("fleet: jetstream: %w", err)
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	// The stream must exist before the node applies or publishes; with
	// NATS unreachable, setup retries in the background.
	if err := n.setup(ctx, min(setupFirstWait, n.opts.PublishTimeout)); err != nil {
		if errors.Is(err, ErrBehind) {
			n.Close()
			return nil, err
		}
		n.log.Warn("fleet: stream not reachable yet, reports queue locally", "err", err)
	}
	n.wg.Add(6)
	go n.batchLoop()
	go n.applyLoop()
	go n.watchLoop()
	go n.outboxLoop()
	go n.hitsLoop()
	go n.maintLoop()
	return n, nil
}

// connect opens the NATS connection; it keeps reconnecting for ever, and
// a first connection that fails is retried in the background.
func connect(opts Options, log *slog.Logger) (*nats.Conn, error) {
	o := []nats.Option{
		nats.Name("nddmilter " + opts.Node),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("fleet: disconnected from NATS", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("fleet: reconnected to NATS", "url", c.ConnectedUrlRedacted()) }),
	}
	o = append(o, opts.NATS...)
	nc, err := nats.Connect(strings.Join(opts.URLs, ","), o...)
	if err != nil {
		return nil, fmt.Errorf("fleet: connect to NATS: %w", err)
	}
	return nc, nil
}

// setupFirstWait bounds a first try at setting the stream up; later tries
// (applyLoop) wait longer, up to PublishTimeout.
const setupFirstWait = time.Second

// setup creates (or updates) the stream and buckets, and checks that the
// stream still holds the events after the applied sequence; wait bounds
// the try.
func (n *Node) setup(ctx context.Context, wait time.Duration) error {
	n.mu.Lock()
	ready := n.ready
	n.mu.Unlock()
	if ready {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	cfg := jetstream.StreamConfig{
		Name:       n.opts.Stream,
		Subjects:   []string{n.opts.subject()},
		Replicas:   n.opts.Replicas,
		MaxAge:     n.opts.MaxAge,
		Storage:    jetstream.FileStorage,
		Duplicates: 10 * time.Minute,
		Retention:  jetstream.LimitsPolicy,
		Discard:    jetstream.DiscardOld,
	}
	objCfg := jetstream.ObjectStoreConfig{Bucket: n.opts.snapshotBucket(), Replicas: n.opts.Replicas, Storage: jetstream.FileStorage}
	kvCfg := jetstream.KeyValueConfig{Bucket: n.opts.nodesBucket(), Replicas: n.opts.Replicas, Storage: jetstream.FileStorage, TTL: n.opts.ForgetAfter}
	// Nodes configured with other replicas or expiry rewrite the stream's
	// settings at each start: say so (fleet status names the nodes that
	// differ, settings.go). Only a node that stores snapshots may change
	// them (its NATS user may, natsd.Permissions); the others create what
	// does not exist yet.
	old, err := n.js.Stream(ctx, n.opts.Stream)
	if err == nil {
		if c := old.CachedInfo().Config; c.Replicas != n.opts.Replicas || c.MaxAge != n.opts.MaxAge {
			if n.admin() {
				n.log.Warn("fleet: this node changes the stream's settings to its own (fleet.replicas, and the age limit from store.expiry); nodes configured otherwise change them back when they start",
					"stream", n.opts.Stream, "replicas", c.Replicas, "to_replicas", n.opts.Replicas, "max_age", c.MaxAge, "to_max_age", n.opts.MaxAge)
			} else {
				n.log.Warn("fleet: the stream's settings differ from this node's (fleet.replicas, the age limit from store.expiry); only a node with snapshots: true in fleet.nodes sets them",
					"stream", n.opts.Stream, "replicas", c.Replicas, "node_replicas", n.opts.Replicas, "max_age", c.MaxAge, "node_max_age", n.opts.MaxAge)
			}
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("fleet: stream %s: %w", n.opts.Stream, err)
	}
	var s jetstream.Stream
	if n.admin() {
		s, err = n.js.CreateOrUpdateStream(ctx, cfg)
		if err == nil {
			_, err = n.js.CreateOrUpdateObjectStore(ctx, objCfg)
		}
		if err == nil {
			_, err = n.js.CreateOrUpdateKeyValue(ctx, kvCfg)
		}
	} else {
		s = old
		if old == nil {
			s, err = n.js.CreateStream(ctx, cfg)
		}
		if err == nil {
			if _, err = n.js.ObjectStore(ctx, objCfg.Bucket); errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
				_, err = n.js.CreateObjectStore(ctx, objCfg)
			}
		}
		if err == nil {
			if _, err = n.js.KeyValue(ctx, kvCfg.Bucket); errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
				_, err = n.js.CreateKeyValue(ctx, kvCfg)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("fleet: stream %s and its buckets: %w", n.opts.Stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("fleet: stream %s: %w", n.opts.Stream, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if info.State.Msgs > 0 && info.State.FirstSeq > n.applied+1 {
		return fmt.Errorf("%w: applied %d, stream starts at %d", ErrBehind, n.applied, info.State.FirstSeq)
	}
	n.ready = true
	return nil
}

// SetEngine makes eng the engine the node applies the stream through,
// signs its reports' evidence with and keeps its provisional reports
// with (the daemon's reload builds a new engine). The daemon also gives
// eng's Ingester the node as its Writer, and its Checker the node as its
// HitCounter and the node's provisional reports (Provisional).
func (n *Node) SetEngine(eng *campaign.Engine) {
	n.eng.Store(eng)
}

// Provisional is the node's queued reports, which protect this host
// until the fleet's stream orders them (provisional.go): the engine's
// Checker consults them (campaign.Checker.SetProvisional).
func (n *Node) Provisional() campaign.Provisional { return n.prov }

func (n *Node) engine() *campaign.Engine { return n.eng.Load() }

// admin reports whether this node stores snapshots (fleet.nodes): it
// sets the stream's settings, purges it after a snapshot and forgets
// retired nodes; its NATS user may (natsd.Permissions).
func (n *Node) admin() bool {
	nk, ok := n.trust.keyOf(n.sign.pub)
	return ok && nk.Snapshots
}

func (n *Node) isReady() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ready
}

func (n *Node) setErr(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err == nil {
		n.lastErr = ""
	} else {
		n.lastErr = err.Error()
	}
}

// clearErr clears the last error, if any.
func (n *Node) clearErr() {
	n.mu.Lock()
	n.lastErr = ""
	n.mu.Unlock()
}

// Close publishes the last hit counts and stops the node (the drain of
// the daemon's shutdown): events still queued stay in the outbox, and
// writes made through the engine afterwards are queued there too.
func (n *Node) Close() error {
	if n.cancel == nil {
		return nil
	}
	if n.isReady() && n.nc.IsConnected() {
		ctx, cancel := context.WithTimeout(context.Background(), n.opts.PublishTimeout)
		n.flushHits(ctx)
		cancel()
	}
	n.cancel()
	grace := closeGrace
	if !n.nc.IsConnected() {
		grace = 0 // nothing in flight can be answered
	}
	done := make(chan struct{})
	go func() {
		n.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		// A request in flight to a server that does not answer holds its
		// goroutine until the request's own timeout (the ordered consumer
		// re-creating itself waits up to 10 s and does not see Stop):
		// closing the connection fails it now. Reports not yet
		// acknowledged stay in the spool.
		n.log.Debug("fleet: closing the NATS connection to end requests in flight")
		n.nc.Close()
		<-done
	}
	n.nc.Close()
	n.prov.close()
	return nil
}

// closeGrace is how long Close lets the node's goroutines finish on their
// own (a publish in flight, its acknowledgement) before it closes the
// connection under them; none when the connection is down.
const closeGrace = time.Second

// sleep waits d or until the node stops; false when it stopped.
func (n *Node) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-n.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
