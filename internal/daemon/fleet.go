package daemon

import (
	"context"
	"errors"
	"fmt"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/buildinfo"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/dashboard"
	"github.com/nddmilter/nddmilter/internal/fleet"
	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
	"github.com/nddmilter/nddmilter/internal/store"
)

// fleetMember is the daemon's part of a fleet (fleet.enabled): the
// embedded NATS server when it runs one, and the fleet node.
type fleetMember struct {
	srv  *natsd.Server // nil without fleet.embedded
	node *fleet.Node
	log  *slog.Logger
}

// dashboardFleet shows the fleet on the dashboard's now page: every
// node's status with its last state hash (a fresh one reads the whole
// store), their comparison and the stream's copies.
type dashboardFleet struct{ f *fleetMember }

func (d dashboardFleet) Fleet(ctx context.Context) (dashboard.Fleet, error) {
	st, err := d.f.node.Peers(ctx)
	var out dashboard.Fleet
	for _, s := range st {
		n := dashboard.Node{Name: s.Node, Healthy: s.Connected && s.Ready && !s.StreamUnreachable && !s.Silent && s.Halted == nil, Silent: s.Silent, LastSeen: s.Time,
			Applied: s.Applied, Lag: s.Lag, Outbox: s.Outbox, StateHash: s.StateHash, StateSeq: s.StateHashSeq,
			Error: s.Error, Version: s.Version, ClockOffset: s.ClockOffset}
		if s.Node == d.f.node.Name() {
			n.Warnings = d.f.warnings()
		}
		out.Nodes = append(out.Nodes, n)
	}
	for _, r := range fleet.StreamCopies(st) {
		out.Copies = append(out.Copies, dashboard.Copy{Server: r.Server, Leader: r.Leader, Offline: r.Offline, Behind: !r.Offline && !r.Healthy()})
	}
	c := fleet.Compare(st)
	out.States, out.Diverged = c.Summary(), len(c.Diverged) > 0
	return out, err
}

// warnings are what this node warns of about the fleet: its campaign
// state differing from the others', its clock, the settings the nodes
// disagree on, its name used by another process.
func (f *fleetMember) warnings() []string {
	var ws []string
	for _, w := range []string{f.node.DivergenceWarning(), f.node.ClockWarning(), f.node.SettingsWarning(), f.node.NameWarning()} {
		if w != "" {
			ws = append(ws, w)
		}
	}
	return ws
}

// bootstrapTimeout bounds the wait for a snapshot when the store is empty.
const bootstrapTimeout = 60 * time.Second

// startFleetServer starts the embedded server (fleet.embedded.enabled)
// and, when the store directory is empty, fills it from the fleet's
// snapshot. It runs before the store is opened.
func startFleetServer(cfg *config.Config, log *slog.Logger) (*fleetMember, error) {
	f := &fleetMember{log: log}
	fc := cfg.Fleet
	for _, w := range fc.PlaintextWarnings() {
		log.Warn("fleet: " + w)
	}
	if fc.Embedded.Enabled {
		o := fc.Server(cfg.Store.Dir)
		o.Logger = log.With("component", "natsd")
		srv, err := natsd.Start(o)
		if err != nil {
			return nil, fmt.Errorf("fleet.embedded: %w", err)
		}
		f.srv = srv
		log.Info("fleet: embedded NATS server started", "url", srv.ClientURL(), "name", srv.Name(), "routes", len(o.Routes))
	}
	if empty, _ := dirEmpty(cfg.Store.Dir); empty {
		ctx, cancel := context.WithTimeout(context.Background(), bootstrapTimeout)
		defer cancel()
		opts, err := f.nodeOptions(cfg, log)
		if err == nil {
			var ok bool
			ok, err = fleet.Bootstrap(ctx, cfg.Store.Dir, StoreOptions(cfg, log), opts)
			if ok {
				log.Info("fleet: store restored from the fleet's snapshot", "dir", cfg.Store.Dir)
			}
		}
		if err != nil {
			// An empty store applies the stream from its start (or
			// reports ErrBehind once the stream is reachable).
			log.Warn("fleet: no snapshot restored", "err", err)
		}
	}
	return f, nil
}

func dirEmpty(dir string) (bool, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	return len(ents) == 0, err
}

// nodeOptions maps the fleet section to the node's options.
func (f *fleetMember) nodeOptions(cfg *config.Config, log *slog.Logger) (fleet.Options, error) {
	fc := cfg.Fleet
	embedded := ""
	if f.srv != nil {
		embedded = f.srv.ClientURL()
	}
	client := fc.Client(embedded)
	client.Logger = log
	nopts, err := client.NatsOptions()
	if err != nil {
		return fleet.Options{}, fmt.Errorf("fleet.nats: %w", err)
	}
	signer, err := natsd.ReadUserSeed(fc.Signing())
	if err != nil {
		return fleet.Options{}, fmt.Errorf("fleet.signing_seed: %w", err)
	}
	return fleet.Options{
		Signer:         signer,
		Nodes:          FleetNodes(fc),
		Unsigned:       fleet.UnsignedWindow{Nodes: fc.AcceptUnsigned.Nodes, Until: fc.AcceptUnsigned.End()},
		Node:           fc.Node,
		URLs:           client.URLs,
		NATS:           nopts,
		Stream:         fc.Stream,
		Replicas:       fc.Replicas,
		MaxAge:         max(2*cfg.Store.Expiry.D(), 7*24*time.Hour),
		HitsEvery:      fc.HitsEvery.D(),
		SnapshotEvery:  fc.SnapshotEvery.D(),
		MaxClockOffset: fc.MaxClockOffset.D(),
		Logger:         log,
		Version:        buildinfo.Get().Short(),
	}, nil
}

// FleetNodes are the fleet's node keys (fleet.nodes) as the node
// verifies events with.
func FleetNodes(fc config.Fleet) []fleet.NodeKey {
	out := make([]fleet.NodeKey, 0, len(fc.Nodes))
	for _, n := range fc.Nodes {
		out = append(out, fleet.NodeKey{Name: n.Name, Key: n.Key, Snapshots: n.Snapshots})
	}
	return out
}

// FleetSettings are what every node of a fleet must share to sign and
// apply reports alike (fleet.Options.Settings): the signature formats,
// the lexicon and model, the signing settings, and the settings applying
// an event depends on (revocation; the expiry that a node's expiry
// decisions delete by), and the stream's settings each node sets when it
// starts (its name, replicas; its age limit follows store.expiry).
func FleetSettings(cfg *config.Config, v Versions) map[string]string {
	sg, tk := cfg.Signatures, cfg.Signatures.Tokens
	pol := cfg.Policy.WithDefaults()
	return map[string]string{
		"signatures":         fmt.Sprintf("%s,evidence=%d", v.SignatureVersion, pipeline.EvidenceVersion),
		"signatures.lexicon": v.Lexicon,
		"andd.model":         v.Model,
		"signatures.imatch":  fmt.Sprintf("k=%d min_terms=%d min_ratio=%g min_unique=%d", sg.K, sg.MinTerms, sg.MinRatio, sg.MinUnique),
		"signatures.tokens":  fmt.Sprintf("min_len=%d max_digits=%d max_len=%d", tk.MinLen, tk.MaxDigits, tk.MaxLen),
		"andd.exact_cosine":  fmt.Sprintf("%g", cfg.ANDD.ExactCosine),
		"policy.revoke":      fmt.Sprintf("ham_reporters=%d ratio=%g", pol.RevokeHamReporters, pol.RevokeRatio),
		"store.expiry":       cfg.Store.Expiry.D().String(),
		"fleet.stream":       cfg.Fleet.Stream,
		"fleet.replicas":     fmt.Sprint(cfg.Fleet.Replicas),
		"fleet.nodes":        fleet.NodesDigest(FleetNodes(cfg.Fleet)),
		"fleet.accept_unsigned": fleet.UnsignedWindow{Nodes: cfg.Fleet.AcceptUnsigned.Nodes,
			Until: cfg.Fleet.AcceptUnsigned.End()}.String(),
	}
}

// start starts the node over the runtime's store and engine. A store
// older than the stream's retention (fleet.ErrBehind) is set aside and
// replaced by the fleet's snapshot, its queued events carried over: rt
// is then a new runtime.
func (f *fleetMember) start(cfg *config.Config, rt *Runtime) (*Runtime, error) {
	opts, err := f.nodeOptions(cfg, f.log)
	if err != nil {
		return rt, err
	}
	opts.Settings = FleetSettings(cfg, rt.Versions)
	f.node, err = fleet.Start(context.Background(), rt.Engine, rt.Store, opts)
	if err == nil {
		wireFleet(rt.Engine, f.node)
	}
	if !errors.Is(err, fleet.ErrBehind) {
		return rt, err
	}
	f.log.Warn("fleet: the store is older than the stream's retention; starting from the fleet's snapshot", "err", err)
	queued, _, err := rt.Store.OutboxList(context.Background(), math.MaxInt)
	if err != nil {
		return rt, err
	}
	if err := rt.Close(); err != nil {
		return rt, err
	}
	aside := cfg.Store.Dir + ".behind-" + time.Now().UTC().Format("20060102T150405")
	if err := os.Rename(cfg.Store.Dir, aside); err != nil {
		return nil, fmt.Errorf("fleet: set the old store aside: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootstrapTimeout)
	defer cancel()
	ok, err := fleet.Bootstrap(ctx, cfg.Store.Dir, StoreOptions(cfg, f.log), opts)
	if err != nil || !ok {
		return nil, fmt.Errorf("fleet: no snapshot to start from (the old store is in %s): %v", aside, err)
	}
	f.log.Info("fleet: store restored from the fleet's snapshot", "dir", cfg.Store.Dir, "old", aside, "queued", len(queued))
	if rt, err = OpenRuntime(cfg, f.log); err != nil {
		return nil, err
	}
	for _, q := range queued {
		if _, err := rt.Store.OutboxPut(context.Background(), q.Data); err != nil {
			return rt, err
		}
	}
	f.node, err = fleet.Start(context.Background(), rt.Engine, rt.Store, opts)
	if err == nil {
		wireFleet(rt.Engine, f.node)
	}
	return rt, err
}

// wireFleet makes node the write target of eng (the daemon's choice,
// made when it wires an engine): eng's Ingester hands its writes to the
// node, which publishes them and applies the fleet's stream through eng;
// eng's Checker counts its hits through the node and consults the
// node's provisional reports.
func wireFleet(eng *campaign.Engine, node *fleet.Node) {
	node.SetEngine(eng)
	eng.Ingester.SetWriter(node)
	eng.Checker.SetHitCounter(node)
	eng.Checker.SetProvisional(node.Provisional())
}

// expireLoop publishes an expiry decision every store.expire_interval
// (every node does; applying one twice deletes nothing more).
func (f *fleetMember) expireLoop(ctx context.Context, every time.Duration, rt func() *Runtime) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := rt().Engine.Ingester.Expire(ctx); err != nil {
			f.log.Warn("fleet: expiry decision not published", "err", err)
		}
	}
}

// status is the fleet's status for the API.
func (f *fleetMember) status(ctx context.Context) (any, error) {
	st, err := f.node.Fleet(ctx)
	if err != nil && len(st) > 1 {
		f.log.Warn("fleet status: the status of some nodes was not read", "err", err)
	}
	return st, err
}

// forget removes a retired node's status (fleet.Node.Forget), its errors
// marked for the API's answer.
func (f *fleetMember) forget(ctx context.Context, node string) error {
	err := f.node.Forget(ctx, node)
	switch {
	case errors.Is(err, fleet.ErrUnknownNode):
		return apiError{err, api.ErrFleetNodeUnknown}
	case errors.Is(err, fleet.ErrNodeAlive):
		return apiError{err, api.ErrFleetNodeAlive}
	}
	return err
}

// removeServer removes a server that left for good from the JetStream
// cluster of the embedded server (natsd.Server.RemoveServer), its errors
// marked for the API's answer.
func (f *fleetMember) removeServer(ctx context.Context, name string) error {
	if f.srv == nil {
		return apiError{errors.New("this daemon runs no embedded NATS server (fleet.embedded.enabled is false): on an external cluster, remove the server with `nats server raft peer-remove NAME` from its system account"), api.ErrFleetNoServer}
	}
	ctx, cancel := context.WithTimeout(ctx, removeServerTimeout)
	defer cancel()
	err := f.srv.RemoveServer(ctx, name)
	switch {
	case errors.Is(err, natsd.ErrNotMember):
		return apiError{err, api.ErrFleetServerUnknown}
	case errors.Is(err, natsd.ErrServerAlive):
		return apiError{err, api.ErrFleetServerAlive}
	case errors.Is(err, natsd.ErrNoSystemUser), errors.Is(err, natsd.ErrNotClustered):
		return apiError{err, api.ErrFleetNoServer}
	}
	return err
}

// removeServerTimeout bounds the wait for the meta leader to remove a
// server (it answers once the change is committed).
const removeServerTimeout = 20 * time.Second

// apiError is err (its message) marked with kind, an error of the API
// that chooses the answer's status.
type apiError struct{ err, kind error }

func (e apiError) Error() string   { return e.err.Error() }
func (e apiError) Unwrap() []error { return []error{e.err, e.kind} }

// readiness is the fleet's line of /readyz. NATS being unreachable is
// never a reason to be unready (checks do not depend on it); a node
// halted at an event of a newer version is (ok false): its state no
// longer follows the fleet's until it is upgraded.
func (f *fleetMember) readiness(ctx context.Context) (line string, ok bool) {
	s := f.node.Status(ctx, false)
	if s.Halted != nil {
		return fmt.Sprintf("fleet: node %s %s; applied %d, lag %d: upgrade this node (docs/FLEET.md, failure modes)", s.Node, s.Halted, s.Applied, s.Lag), false
	}
	state := "connected"
	switch {
	case !s.Connected:
		state = "NATS unreachable"
	case !s.Ready:
		state = "stream not ready"
	case s.StreamUnreachable:
		state = "stream unreachable (its server is cut off from the stream's quorum: reports queue, checks go on)"
	}
	line = fmt.Sprintf("fleet: %s, node %s, applied %d, lag %d, outbox %d", state, s.Node, s.Applied, s.Lag, s.Outbox)
	if s.Error != "" {
		line += ", last error: " + s.Error
	}
	for _, w := range f.warnings() {
		line += ", " + w
	}
	return line, true
}

// close stops the node (publishing its last hit counts) and then the
// embedded server.
func (f *fleetMember) close() {
	if f.node != nil {
		f.node.Close()
	}
	if f.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.srv.Shutdown(ctx); err != nil {
			f.log.Warn("fleet: embedded server shutdown", "err", err)
		}
	}
}

// ErrFleetOffline is returned by writes of a command-line tool that opened
// the store of a fleet node itself (the daemon is not running): in a
// fleet, writes are events of the stream, published by the running node.
var ErrFleetOffline = errors.New("this store belongs to a fleet node (fleet.enabled) and its daemon is not running: " +
	"reports, allow and delete go through the running daemon's API (start `nddmilter serve`, or use --api), never into the store alone")

// ErrFleetStore is returned by writes of a command-line tool that opened a
// fleet node's store with a standalone configuration (fleet.enabled
// false): a change made there alone would make the node's state differ
// from the fleet's.
var ErrFleetStore = errors.New("this store holds a fleet node's campaign state but the configuration is standalone (fleet.enabled false): " +
	"pass the node's configuration (--config) and go through its running daemon, or --api; a change made in the store alone would make it differ from the fleet's")

// offlineFleet is the write target (campaign.Writer, campaign.HitCounter)
// of an engine over a fleet node's store opened without its daemon: it refuses writes (with ErrFleetOffline, or
// err) and drops hits, so that the store never diverges from the fleet's.
type offlineFleet struct{ err error }

func (f offlineFleet) refuse() error {
	if f.err != nil {
		return f.err
	}
	return ErrFleetOffline
}

func (f offlineFleet) Report(context.Context, []campaign.ReportRequest) ([]campaign.ReportOutcome, error) {
	return nil, &campaign.BatchError{Index: 0, Err: f.refuse()}
}
func (f offlineFleet) SetState(context.Context, store.CampaignID, store.State) error {
	return f.refuse()
}
func (f offlineFleet) Delete(context.Context, store.CampaignID) error { return f.refuse() }
func (f offlineFleet) Expire(context.Context, time.Time) error        { return f.refuse() }
func (offlineFleet) RecordHit(store.CampaignID, string, time.Time)    {}

// offline makes f the write target of eng.
func offline(eng *campaign.Engine, f offlineFleet) {
	eng.Ingester.SetWriter(f)
	eng.Checker.SetHitCounter(f)
}
