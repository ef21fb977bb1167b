package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/fleet"
	"github.com/nddmilter/nddmilter/internal/fleet/natsd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/cputime"
	"github.com/nddmilter/nddmilter/internal/lab/stats"
	"github.com/nddmilter/nddmilter/internal/store"
)

// FleetOptions configure `nddlab bench fleet`. Zero values select the
// defaults.
type FleetOptions struct {
	// Latency is the number of single reports timed from the report to
	// protection on every node. Default 200.
	Latency int
	// Reports are sent through the three nodes at once, in batches of
	// Batch, by Senders goroutines per node (each waits for its batch's
	// answer before the next), for the throughput. Defaults 6000, 200
	// and 1. Batch 1 with many senders is the path of reports arriving
	// one by one (the API, the report socket).
	Reports, Batch, Senders int
	// CheckFor is how long check throughput is measured, with Checkers
	// goroutines, in each mode (standalone, fleet on, NATS down) of each
	// of CheckRounds rounds. A round runs fleet on (or NATS down) and
	// standalone one after the other, in alternating order, so that
	// what drifts in the background weighs on both sides of the
	// comparison. Defaults 1s, 2 and 5.
	CheckFor    time.Duration
	Checkers    int
	CheckRounds int
	// NoSync turns off the stores' fsync per commit.
	NoSync bool
	// Dir holds the servers' and stores' directories; default a
	// temporary directory, removed afterwards.
	Dir string
	// CPUProfile is a file for a CPU profile of the throughput phase
	// (empty: none).
	CPUProfile string
	// CatchUpProfile is a file for a CPU profile of the catch-up phase:
	// one node applying the stream alone (empty: none).
	CatchUpProfile string
	// ChecksProfile is a file for a CPU profile of the check rounds
	// (standalone, fleet on and NATS down together; empty: none): what
	// besides the checks the process spends its CPU on.
	ChecksProfile string
	// Copies is the number of reports per campaign in the throughput
	// phase: randomized copies of one message, as users report a
	// campaign. Default 1: every report starts a campaign (the most
	// writes per report).
	Copies int
}

func (o *FleetOptions) defaults() {
	if o.Latency <= 0 {
		o.Latency = 200
	}
	if o.Reports <= 0 {
		o.Reports = 6000
	}
	if o.Batch <= 0 {
		o.Batch = 200
	}
	if o.Senders <= 0 {
		o.Senders = 1
	}
	if o.CheckFor <= 0 {
		o.CheckFor = time.Second
	}
	if o.CheckRounds <= 0 {
		o.CheckRounds = 5
	}
	if o.Checkers <= 0 {
		o.Checkers = 2
	}
	if o.Copies <= 0 {
		o.Copies = 1
	}
}

type fleetBenchNode struct {
	srv  *natsd.Server
	st   *store.Badger
	eng  *campaign.Engine
	node *fleet.Node
}

func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Fleet runs three embedded JetStream servers and three nodes (store,
// engine, fleet node) in this process on loopback and measures report to
// protection latency on every node, report throughput through the three
// nodes with the process's CPU per report, check throughput standalone,
// in the fleet and with NATS down, the stream's bytes per report, the
// snapshot's size per campaign and the process's memory.
func Fleet(ctx context.Context, o FleetOptions, out io.Writer) error {
	o.defaults()
	// A profile file that cannot be written fails now, not after the
	// phases before it.
	for _, p := range []struct{ path, flag string }{
		{o.CPUProfile, "--cpuprofile"}, {o.CatchUpProfile, "--catchup-cpuprofile"}, {o.ChecksProfile, "--checks-cpuprofile"},
	} {
		if p.path == "" {
			continue
		}
		f, err := os.Create(p.path)
		if err != nil {
			return fmt.Errorf("%s: %w", p.flag, err)
		}
		f.Close()
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "nddmilter-bench-fleet-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	quiet := slog.New(slog.DiscardHandler)
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		return err
	}
	model, err := andd.DefaultModel()
	if err != nil {
		return err
	}
	routes := make([]string, 3)
	for i := range routes {
		a, err := freeLoopback()
		if err != nil {
			return err
		}
		routes[i] = "nats-route://" + a
	}
	// The fleet's keys: one per node, and the catch-up node's.
	keys, err := newBenchKeys([]string{"mx0", "mx1", "mx2", "catchup"})
	if err != nil {
		return err
	}
	nodes := make([]*fleetBenchNode, 3)
	defer func() {
		for _, n := range nodes {
			if n == nil {
				continue
			}
			if n.node != nil {
				n.node.Close()
			}
			if n.st != nil {
				n.st.Close()
			}
			if n.srv != nil {
				n.srv.Shutdown(context.Background())
			}
		}
	}()
	// The servers first: each waits for the others' routes.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range nodes {
		nodes[i] = &fleetBenchNode{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			listen, err := freeLoopback()
			if err != nil {
				errs[i] = err
				return
			}
			nodes[i].srv, errs[i] = natsd.Start(natsd.Options{
				Name: fmt.Sprintf("bench%d", i), Listen: listen, ClusterListen: routes[i][len("nats-route://"):],
				Routes: routes, Dir: filepath.Join(dir, fmt.Sprintf("nats%d", i)), Users: keys.users(),
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench fleet: servers: %w", err)
	}
	for i, n := range nodes {
		n.st, err = store.Open(filepath.Join(dir, fmt.Sprintf("store%d", i)), store.Options{NoSyncWrites: o.NoSync, Expiry: -1, Logger: quiet})
		if err != nil {
			return err
		}
		n.eng, err = campaign.New(n.st, lex, model, campaign.Options{}, quiet)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("mx%d", i)
		n.node, err = fleet.Start(ctx, n.eng, n.st, fleet.Options{
			Node: name, URLs: []string{n.srv.ClientURL()}, SnapshotEvery: -1, Logger: quiet,
			ApplyTimeout: 30 * time.Second, PublishTimeout: 10 * time.Second,
			Signer: keys.kp[name], Nodes: keys.nodes, NATS: keys.nats(name),
		})
		if err != nil {
			return err
		}
		wireFleet(n.eng, n.node)
	}
	// The stream is ready once a first report is replicated.
	v, err := newVocab()
	if err != nil {
		return err
	}
	tmpl := v.templates(o.Latency + o.Reports + 1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		oc, err := nodes[0].eng.Ingester.Report(ctx, tmpl[0], store.KindSpam, "warmup")
		if err == nil && oc.Replication == campaign.Replicated {
			// Measured from when every node applies the stream.
			seq, _ := store.EventOf(oc.Campaign)
			for j, n := range nodes {
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := n.node.WaitApplied(wctx, seq)
				cancel()
				if err != nil {
					return fmt.Errorf("bench fleet: node %d did not apply the first report: %w", j, err)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench fleet: the cluster did not take a report within 30s: %+v %v", oc, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The nodes publish report events in the newest version once each
	// read the others' statuses (every fleet.Options.StatusEvery, 10s:
	// kept, as a shorter interval hashes the stores more often).
	deadline = time.Now().Add(40 * time.Second)
	for _, n := range nodes {
		for n.node.ReportVersion() != fleet.EventVersion {
			if time.Now().After(deadline) {
				return fmt.Errorf("bench fleet: the nodes did not agree on event version %d within 40s", fleet.EventVersion)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	fmt.Fprintf(out, "fleet: 3 embedded JetStream servers (R=3) and 3 nodes in one process on loopback, fsync %v, report events of version %d\n\n", !o.NoSync, fleet.EventVersion)

	// Report → protection on every node.
	per := make([][]time.Duration, 3)
	for i := 0; i < o.Latency; i++ {
		from := i % 3
		start := time.Now()
		oc, err := nodes[from].eng.Ingester.Report(ctx, tmpl[1+i], store.KindSpam, "lat")
		if err != nil {
			return err
		}
		seq, ok := store.EventOf(oc.Campaign)
		if !ok {
			return fmt.Errorf("bench fleet: report %d: no replicated campaign: %+v", i, oc)
		}
		for j, n := range nodes {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := n.node.WaitApplied(wctx, seq)
			cancel()
			if err != nil {
				return fmt.Errorf("bench fleet: node %d did not apply %d: %w", j, seq, err)
			}
			per[j] = append(per[j], time.Since(start))
		}
	}
	fmt.Fprintf(out, "report → protection (%d single reports, round robin over the nodes; time until each node applied it):\n", o.Latency)
	for j := range per {
		fmt.Fprintf(out, "  mx%d  %s\n", j, fmtLatency(per[j]))
	}

	// Throughput through the three nodes. The copies are made before
	// the clock starts: generating them is not the product's work.
	reqs := tmpl[1+o.Latency:]
	if o.Copies > 1 {
		reqs = make([][]byte, o.Reports)
		for i := range reqs {
			m, err := campaignCopy(tmpl[1+o.Latency+i/o.Copies], uint64(i), i)
			if err != nil {
				return err
			}
			reqs[i] = m.raw()
		}
	}
	stopProfile := func() {}
	if o.CPUProfile != "" {
		if stopProfile, err = startCPUProfile(o.CPUProfile, "--cpuprofile"); err != nil {
			return err
		}
	}
	cpu0, t0 := cputime.Process(), time.Now()
	var sent atomic.Int64
	var last atomic.Uint64
	errs = make([]error, 3*o.Senders)
	for g := range 3 * o.Senders {
		w := g % 3 // the node
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := g * o.Batch; b < len(reqs); b += 3 * o.Senders * o.Batch {
				batch := make([]campaign.ReportRequest, 0, o.Batch)
				for _, raw := range reqs[b:min(b+o.Batch, len(reqs))] {
					batch = append(batch, campaign.ReportRequest{Raw: raw, Kind: store.KindSpam, Reporter: fmt.Sprint("tp", w)})
				}
				outs, err := nodes[w].eng.Ingester.ReportBatch(ctx, batch)
				if err != nil {
					errs[g] = err
					return
				}
				sent.Add(int64(len(outs)))
				for _, oc := range outs {
					if seq, ok := store.EventOf(oc.Campaign); ok {
						for {
							l := last.Load()
							if seq <= l || last.CompareAndSwap(l, seq) {
								break
							}
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench fleet: throughput: %w", err)
	}
	for _, n := range nodes {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := n.node.WaitApplied(wctx, last.Load())
		cancel()
		if err != nil {
			return fmt.Errorf("bench fleet: throughput: %w", err)
		}
	}
	el, cpu := time.Since(t0), cputime.Process()-cpu0
	stopProfile()
	n := sent.Load()
	fmt.Fprintf(out, "\nthroughput: %d reports (%d per campaign) in batches of %d by %d senders per node through 3 nodes at once, applied on all 3 in %v: %.0f reports/s, process CPU %v per report (3 servers + 3 nodes; the node that takes a report signs it, every node ingests its evidence)\n",
		n, o.Copies, o.Batch, o.Senders, el.Round(time.Millisecond), float64(n)/el.Seconds(), (cpu / time.Duration(max(n, 1))).Round(time.Microsecond))
	if err := catchUp(ctx, out, dir, nodes[0].srv.ClientURL(), keys, lex, model, o, quiet); err != nil {
		return err
	}

	// Stream and snapshot sizes.
	s := nodes[0].node.Status(ctx, false)
	st, err := nodes[0].st.Stats(ctx)
	if err != nil {
		return err
	}
	reports := int64(o.Latency) + n + 1
	fmt.Fprintf(out, "stream: %d events, %d bytes: %.0f bytes per report (each report's evidence is in the event)\n",
		s.StreamEvents, s.StreamBytes, float64(s.StreamBytes)/float64(reports))
	if _, size, err := nodes[0].node.Snapshot(ctx); err != nil {
		fmt.Fprintf(out, "snapshot: %v\n", err)
	} else {
		fmt.Fprintf(out, "snapshot: %d bytes for %d campaigns with %d signatures: %.0f bytes per campaign, %.0f per signature\n",
			size, st.Campaigns, st.Keys, float64(size)/float64(max(st.Campaigns, 1)), float64(size)/float64(max(st.Keys, 1)))
	}

	// Checks: standalone (an engine without replicator over the same
	// store), fleet on, NATS down.
	rng := mrand.New(mrand.NewPCG(9, 9))
	var msgs [][]byte
	for i := range 200 {
		if i%2 == 0 {
			m, err := campaignCopy(tmpl[1+rng.IntN(len(tmpl)-1)], rng.Uint64(), i)
			if err != nil {
				return err
			}
			msgs = append(msgs, m.raw())
		} else {
			msgs = append(msgs, legitimate(v, rng, i).raw())
		}
	}
	alone, err := campaign.New(nodes[0].st, lex, model, campaign.Options{}, quiet)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nchecks (%d goroutines, half copies of reported campaigns; %d rounds of %v per mode, each beside a standalone run in the same round, order alternating):\n",
		o.Checkers, o.CheckRounds, o.CheckFor)
	settled := settle(ctx, 30*time.Second)
	if o.ChecksProfile != "" {
		stop, err := startCPUProfile(o.ChecksProfile, "--checks-cpuprofile")
		if err != nil {
			return err
		}
		defer stop()
	}
	results := map[string]*checkMode{}
	for _, name := range []string{"standalone", "fleet on", "NATS down"} {
		results[name] = &checkMode{}
	}
	run := func(name string, eng *campaign.Engine) error {
		lat, rate, err := measureChecks(ctx, eng, msgs, o.Checkers, o.CheckFor)
		if err != nil {
			return err
		}
		m := results[name]
		m.lat = append(m.lat, lat...)
		m.rates = append(m.rates, rate)
		return nil
	}
	for _, mode := range []struct {
		name string
		eng  *campaign.Engine
		down bool
	}{{"fleet on", nodes[0].eng, false}, {"NATS down", nodes[0].eng, true}} {
		if mode.down {
			for _, n := range nodes {
				n.srv.Shutdown(ctx)
			}
			settled += settle(ctx, 30*time.Second)
		}
		for r := range o.CheckRounds {
			first, second := "standalone", mode.name
			firstEng, secondEng := alone, mode.eng
			if r%2 == 1 {
				first, second, firstEng, secondEng = second, first, secondEng, firstEng
			}
			if err := run(first, firstEng); err != nil {
				return err
			}
			if err := run(second, secondEng); err != nil {
				return err
			}
			m, a := results[mode.name], results["standalone"]
			m.ratios = append(m.ratios, m.rates[len(m.rates)-1]/a.rates[len(a.rates)-1]-1)
		}
	}
	for _, name := range []string{"standalone", "fleet on", "NATS down"} {
		m := results[name]
		line := fmt.Sprintf("  %-10s  %7.0f checks/s (median of %d rounds)", name, stats.Median(m.rates), len(m.rates))
		if len(m.ratios) > 0 {
			line += fmt.Sprintf(", %+.1f %% against standalone (median of the rounds' ratios; %+.1f %% to %+.1f %%)",
				100*stats.Median(m.ratios), 100*slices.Min(m.ratios), 100*slices.Max(m.ratios))
		}
		rounds := make([]string, len(m.rates))
		for i, r := range m.rates {
			rounds[i] = fmt.Sprintf("%.0f", r)
		}
		fmt.Fprintf(out, "%s\n              %s\n              rounds: %s\n", line, fmtLatency(m.lat), strings.Join(rounds, " "))
	}
	fmt.Fprintf(out, "  (waited %v before the rounds for the process to go quiet: compactions after the throughput phase, the servers' shutdown)\n", settled.Round(100*time.Millisecond))
	rss, hwm := procMemory("self")
	fmt.Fprintf(out, "\nmemory of this process (3 servers + 3 nodes): VmRSS %s, VmHWM %s\n", rss, hwm)
	return nil
}

// catchUp measures one node alone applying the whole stream from an
// empty store: what a node of a fleet can apply when it has the machine
// to itself (the other nodes and the servers are idle meanwhile).
func catchUp(ctx context.Context, out io.Writer, dir, url string, keys *benchKeys, lex *imatchbag.Lexicon, model *andd.Model, o FleetOptions, log *slog.Logger) error {
	st, err := store.Open(filepath.Join(dir, "store-catchup"), store.Options{NoSyncWrites: o.NoSync, Expiry: -1, Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	eng, err := campaign.New(st, lex, model, campaign.Options{}, log)
	if err != nil {
		return err
	}
	if o.CatchUpProfile != "" {
		stop, err := startCPUProfile(o.CatchUpProfile, "--catchup-cpuprofile")
		if err != nil {
			return err
		}
		defer stop()
	}
	cpu0, t0 := cputime.Process(), time.Now()
	node, err := fleet.Start(ctx, eng, st, fleet.Options{Node: "catchup", URLs: []string{url}, SnapshotEvery: -1, Logger: log,
		Signer: keys.kp["catchup"], Nodes: keys.nodes, NATS: keys.nats("catchup")})
	if err != nil {
		return err
	}
	wireFleet(eng, node)
	defer node.Close()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		s := node.Status(ctx, false)
		if s.Ready && s.StreamLast > 0 && s.Applied >= s.StreamLast {
			el, cpu := time.Since(t0), cputime.Process()-cpu0
			c, err := st.Stats(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "catch-up: one node alone applied the stream (%d events, %d campaigns) from an empty store in %v: %.0f reports/s, process CPU %v per report\n",
				s.StreamEvents, c.Campaigns, el.Round(time.Millisecond), float64(c.SpamReports+c.HamReports)/el.Seconds(),
				(cpu / time.Duration(max(c.SpamReports+c.HamReports, 1))).Round(time.Microsecond))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench fleet: catch-up: applied %d of %d in 5m", s.Applied, s.StreamLast)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkMode gathers one check mode's rounds.
type checkMode struct {
	lat    []time.Duration
	rates  []float64
	ratios []float64 // rate / standalone's rate in the same round, - 1
}

// settle waits, at most limit, until the process used less than a fifth of
// one core over half a second (background work such as Badger's
// compactions done), and returns how long it waited.
func settle(ctx context.Context, limit time.Duration) time.Duration {
	const window = 500 * time.Millisecond
	start := time.Now()
	for time.Since(start) < limit && ctx.Err() == nil {
		cpu0 := cputime.Process()
		time.Sleep(window)
		if cputime.Process()-cpu0 < window/5 {
			break
		}
	}
	return time.Since(start)
}

// measureChecks runs Check with g goroutines for d and returns the
// latencies and the rate.
func measureChecks(ctx context.Context, eng *campaign.Engine, msgs [][]byte, g int, d time.Duration) ([]time.Duration, float64, error) {
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	// Every window starts from a collected heap (as testing.B does): the
	// collector's work then falls on each window alike.
	runtime.GC()
	stop := time.Now().Add(d)
	start := time.Now()
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			for i := w; time.Now().Before(stop); i++ {
				t := time.Now()
				if _, err := eng.Checker.Check(ctx, msgs[i%len(msgs)]); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return nil, 0, *e
	}
	if len(all) == 0 {
		return nil, 0, errors.New("bench fleet: no check finished")
	}
	slices.Sort(all)
	return all, float64(len(all)) / time.Since(start).Seconds(), nil
}

// benchKeys are the bench fleet's node keys, as `nddmilter fleet init`
// makes them for a real fleet: each node signs its events and logs in to
// the servers with its own nkey.
type benchKeys struct {
	kp    map[string]nkeys.KeyPair
	nodes []fleet.NodeKey
}

func newBenchKeys(names []string) (*benchKeys, error) {
	k := &benchKeys{kp: make(map[string]nkeys.KeyPair)}
	for i, name := range names {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("bench fleet: key of %s: %w", name, err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("bench fleet: key of %s: %w", name, err)
		}
		k.kp[name] = kp
		k.nodes = append(k.nodes, fleet.NodeKey{Name: name, Key: pub, Snapshots: i == 0})
	}
	return k, nil
}

// users are the servers' users: one per node.
func (k *benchKeys) users() []natsd.User {
	us := make([]natsd.User, len(k.nodes))
	for i, n := range k.nodes {
		us[i] = natsd.User{Nkey: n.Key, Node: n.Name, Snapshots: n.Snapshots}
	}
	return us
}

// nats are the client options of node name: its nkey.
func (k *benchKeys) nats(name string) []nats.Option {
	kp := k.kp[name]
	pub, _ := kp.PublicKey()
	return []nats.Option{nats.Nkey(pub, kp.Sign)}
}

// wireFleet makes node the write target of eng, as the daemon wires a
// fleet node's engine: eng's Ingester hands its writes to the node, its
// Checker counts hits through it and consults its provisional reports.
func wireFleet(eng *campaign.Engine, node *fleet.Node) {
	node.SetEngine(eng)
	eng.Ingester.SetWriter(node)
	eng.Checker.SetHitCounter(node)
	eng.Checker.SetProvisional(node.Provisional())
}
