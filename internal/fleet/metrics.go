package fleet

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exposes a node's status to Prometheus, read at each scrape
// (without the state hash, which reads the whole store).
type collector struct {
	n *Node
	connected, ready, reachable, applied, lag, outbox, streamEvents, streamBytes,
	snapshot, published, queued, restarts *prometheus.Desc
	replicas, clockOffset, diverged, rejected, halted *prometheus.Desc
}

// Collector returns the node's Prometheus metrics (label node): whether it
// is connected, reaches the stream and applies it, its applied sequence and lag, its
// outbox, the stream's size, the snapshot's sequence, the reports it
// published and queued, the stalled consumers it recreated since it
// started, its clock's offset from the other nodes' (once measured), and
// whether its campaign state differs from the others' after the same
// events.
func (n *Node) Collector() prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("nddmilter_fleet_"+name, help, []string{"node"}, nil)
	}
	return &collector{n: n,
		connected:    d("connected", "1 when the node is connected to NATS"),
		ready:        d("ready", "1 when the node's stream is set up and it applies it"),
		reachable:    d("stream_reachable", "1 when the stream answered the node's last query and publish; 0 while connected but cut off from the stream's quorum (reports queue in the outbox)"),
		applied:      d("applied_sequence", "last stream sequence applied to the local store"),
		lag:          d("lag_events", "events of the stream the node has not applied yet"),
		outbox:       d("outbox_events", "events queued on this node, waiting to be published"),
		streamEvents: d("stream_events", "events in the fleet's stream"),
		streamBytes:  d("stream_bytes", "bytes in the fleet's stream"),
		snapshot:     d("snapshot_sequence", "stream sequence of the latest snapshot"),
		published:    d("published_total", "events this node published since it started"),
		queued:       d("queued_total", "reports this node queued (NATS unreachable) since it started"),
		restarts:     d("consumer_restarts_total", "stream consumers this node recreated because they stalled, since it started"),
		clockOffset:  d("clock_offset_seconds", "how far this host's clock is from the median of the nodes' clocks (positive: ahead), as last measured; beyond fleet.max_clock_offset the node publishes no expiry decision"),
		diverged:     d("diverged", "1 when this node's campaign state hash differs from the other live nodes' after the same event (it is the odd one out, or two nodes differ): rebuild it from the fleet"),
		halted:       d("halted", "1 while the node stopped applying the stream at an event of a newer version than its build applies: upgrade it (docs/FLEET.md, failure modes)"),
		rejected: prometheus.NewDesc("nddmilter_fleet_events_rejected_total",
			"events of the stream this node skipped since it started, by reason: unsigned, unknown_key (not one of fleet.nodes), wrong_node (another node's key), bad_signature, malformed",
			[]string{"node", "reason"}, nil),
		replicas: prometheus.NewDesc("nddmilter_fleet_stream_replicas",
			"copies of the fleet's stream as the node's server sees them, by state: current (the leader included), behind, offline",
			[]string{"node", "state"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connected, c.ready, c.reachable, c.applied, c.lag, c.outbox,
		c.streamEvents, c.streamBytes, c.snapshot, c.published, c.queued, c.restarts, c.replicas, c.clockOffset, c.diverged, c.rejected, c.halted} {
		ch <- d
	}
}

// scrapeTimeout bounds the stream query of a scrape.
const scrapeTimeout = 2 * time.Second

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	s := c.n.Status(ctx, false)
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	g := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, s.Node)
	}
	g(c.connected, b(s.Connected))
	g(c.ready, b(s.Ready))
	g(c.reachable, b(s.Connected && s.Ready && !s.StreamUnreachable))
	g(c.applied, float64(s.Applied))
	g(c.lag, float64(s.Lag))
	g(c.outbox, float64(s.Outbox))
	g(c.streamEvents, float64(s.StreamEvents))
	g(c.streamBytes, float64(s.StreamBytes))
	g(c.snapshot, float64(s.SnapshotSeq))
	g(c.diverged, b(c.n.Diverged()))
	g(c.halted, b(s.Halted != nil))
	if c.n.clockMeasured.Load() {
		g(c.clockOffset, s.ClockOffset.Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.published, prometheus.CounterValue, float64(s.Published), s.Node)
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.CounterValue, float64(s.Queued), s.Node)
	ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(s.ConsumerRestarts), s.Node)
	for _, r := range RejectReasons {
		ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(s.Rejected[r]), s.Node, r)
	}
	if len(s.Replicas) > 0 {
		var current, behind, offline float64
		for _, r := range s.Replicas {
			switch {
			case r.Healthy():
				current++
			case r.Offline:
				offline++
			default:
				behind++
			}
		}
		for state, v := range map[string]float64{"current": current, "behind": behind, "offline": offline} {
			ch <- prometheus.MustNewConstMetric(c.replicas, prometheus.GaugeValue, v, s.Node, state)
		}
	}
}
