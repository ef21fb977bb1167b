// Package metrics holds nddmilter's Prometheus collectors, registered on
// their own registry (never the global default one), and the HTTP handler
// that serves them. Every method is safe on a nil *Metrics, so code under
// test can run without metrics.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the daemon's collectors.
type Metrics struct {
	Registry *prometheus.Registry

	messages      *prometheus.CounterVec
	matches       *prometheus.CounterVec
	checkDuration prometheus.Histogram
	bodyBytes     prometheus.Histogram
	parseWarnings prometheus.Counter
	errors        *prometheus.CounterVec
	failOpen      prometheus.Counter
	reports       *prometheus.CounterVec
	campaigns     prometheus.Gauge
	byState       *prometheus.GaugeVec
	indexKeys     prometheus.Gauge
	storeBytes    prometheus.Gauge
	sessions      prometheus.Gauge
	connections   *prometheus.CounterVec
	reloads       *prometheus.CounterVec
	overload      *prometheus.CounterVec
	buffered      prometheus.Gauge
	diskFull      prometheus.Gauge
	diskFree      prometheus.Gauge
	diskRefused   prometheus.Gauge
	spoolPending  prometheus.Gauge
	buildInfo     *prometheus.GaugeVec
}

// BuildInfo labels nddmilter_build_info: the binary and the signature
// formats, lexicon and model it runs with.
type BuildInfo struct {
	Version, Commit, GoVersion, SignatureVersion, Lexicon, Model string
}

// New returns the collectors registered on a fresh registry, with the Go
// runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nddmilter_messages_total",
			Help: "Messages checked by the milter, by action taken (accept, tag, quarantine, reject, tempfail).",
		}, []string{"action"}),
		matches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nddmilter_matches_total",
			Help: "Messages that matched a campaign, by signature family that matched (imatch, andd).",
		}, []string{"family"}),
		checkDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nddmilter_check_duration_seconds",
			Help:    "Time to check one message (parse, sign, look up, decide).",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}),
		bodyBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nddmilter_body_bytes",
			Help:    "Size of message bodies seen by the milter (before truncation to milter.max_body_bytes).",
			Buckets: prometheus.ExponentialBuckets(512, 4, 9), // 512 B .. 32 MiB
		}),
		parseWarnings: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nddmilter_parse_warnings_total",
			Help: "MIME parse fallbacks taken (broken boundaries, bad encodings, truncation...).",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nddmilter_errors_total",
			Help: "Errors, by stage (check, timeout, panic: a check; report, report-timeout, report-panic: a report by mail; store, reload, accept; protocol: a malformed milter packet closed its connection; spool: the spool could not be read; spool_refused: a spool entry refused).",
		}, []string{"stage"}),
		failOpen: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nddmilter_failopen_total",
			Help: "Messages given the milter.on_error treatment because checking them failed.",
		}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nddmilter_reports_total",
			Help: "Reports received through the API, by kind (spam, ham).",
		}, []string{"kind"}),
		campaigns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nddmilter_campaigns",
			Help: "Campaigns in the store.",
		}),
		byState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nddmilter_campaigns_by_state",
			Help: "Campaigns in the store, by state (active, allowed, revoked).",
		}, []string{"state"}),
		indexKeys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nddmilter_index_keys",
			Help: "Signature keys in the store's index.",
		}),
		storeBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nddmilter_store_bytes",
			Help: "Disk size of the store.",
		}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nddmilter_milter_sessions",
			Help: "Open milter connections.",
		}),
		connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nddmilter_milter_connections_total",
			Help: "Milter connections negotiated, by protocol version and streaming (true: the MTA sends a message without waiting for replies, one round trip per message).",
		}, []string{"version", "streaming"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nddmilter_reloads_total",
			Help: "Configuration reloads (SIGHUP), by result (ok, error).",
		}, []string{"result"}),
		overload: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nddmilter_overload_total",
			Help: "Work refused because a resource budget was exhausted, by reason (sessions: milter.max_sessions reached, the message passed unbuffered per milter.on_error; connections: twice milter.max_sessions reached, the connection closed; bytes: milter.max_buffered_bytes reached, the message passed per milter.on_error; api: http.max_inflight reached, 503).",
		}, []string{"reason"}),
		buffered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nddmilter_milter_buffered_bytes",
			Help: "Message and packet bytes the milter sessions hold beyond each session's small free allowance (bounded by milter.max_buffered_bytes).",
		}),
		diskFull: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nddmilter_store_disk_full",
			Help: "1 while the store refuses writes because its filesystem has less free space than store.min_free_bytes (checks go on read-only), else 0.",
		}),
		diskFree: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nddmilter_store_disk_free_bytes",
			Help: "Free space on the store's filesystem (for unprivileged users), as last measured.",
		}),
		diskRefused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nddmilter_store_writes_refused",
			Help: "Store writes refused since start because the disk was full (a counter kept by the store, sampled with the store gauges).",
		}),
		spoolPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nddmilter_spool_pending",
			Help: "Reports waiting in api.spool_dir after the daemon's last look (they pile up when it cannot store them).",
		}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nddmilter_build_info",
			Help: "Always 1; the labels name the running build (version, commit, go_version), its signature formats (signature_version) and the lexicon and model ids in use (changed by a reload).",
		}, []string{"version", "commit", "go_version", "signature_version", "lexicon", "model"}),
	}
	m.Registry.MustRegister(m.collectors()...)
	// Pre-create every documented label value so that rates exist from the start.
	vecs := map[string]*prometheus.CounterVec{
		"nddmilter_messages_total": m.messages,
		"nddmilter_matches_total":  m.matches,
		"nddmilter_errors_total":   m.errors,
		"nddmilter_reports_total":  m.reports,
		"nddmilter_overload_total": m.overload,
		"nddmilter_reloads_total":  m.reloads,
	}
	for name, v := range vecs {
		for _, vals := range LabelValues()[name] { // one label each
			for _, val := range vals {
				v.WithLabelValues(val)
			}
		}
	}
	return m
}

// SetBuildInfo sets nddmilter_build_info to the build b (replacing the
// previous labels, after a reload).
func (m *Metrics) SetBuildInfo(b BuildInfo) {
	if m == nil {
		return
	}
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(b.Version, b.Commit, b.GoVersion, b.SignatureVersion, b.Lexicon, b.Model).Set(1)
}

// Connection counts a negotiated milter connection.
func (m *Metrics) Connection(version int, streaming bool) {
	if m == nil {
		return
	}
	m.connections.WithLabelValues(strconv.Itoa(version), strconv.FormatBool(streaming)).Inc()
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// Message records one checked message: the action taken, the signature
// families that matched, the check duration, the body size and the number
// of parse warnings.
func (m *Metrics) Message(a action.Action, families []string, d time.Duration, bodyBytes int64, warnings int) {
	if m == nil {
		return
	}
	m.messages.WithLabelValues(a.String()).Inc()
	for _, f := range families {
		m.matches.WithLabelValues(f).Inc()
	}
	m.checkDuration.Observe(d.Seconds())
	m.bodyBytes.Observe(float64(bodyBytes))
	if warnings > 0 {
		m.parseWarnings.Add(float64(warnings))
	}
}

// Error counts an internal error at a stage.
func (m *Metrics) Error(stage string) {
	if m == nil {
		return
	}
	m.errors.WithLabelValues(stage).Inc()
}

// FailOpen counts a message given the on_error treatment.
func (m *Metrics) FailOpen() {
	if m == nil {
		return
	}
	m.failOpen.Inc()
}

// Report counts a report of a kind (the label is "spam" or "ham").
func (m *Metrics) Report(kind store.Kind) {
	if m == nil {
		return
	}
	name := "spam"
	if kind == store.KindHam {
		name = "ham"
	}
	m.reports.WithLabelValues(name).Inc()
}

// SpoolPending sets the number of reports waiting in the spool.
func (m *Metrics) SpoolPending(n int) {
	if m == nil {
		return
	}
	m.spoolPending.Set(float64(n))
}

// Session tracks open milter connections (+1 on open, -1 on close).
func (m *Metrics) Session(delta int) {
	if m == nil {
		return
	}
	m.sessions.Add(float64(delta))
}

// Overload counts work refused because a resource budget was exhausted
// (reason: sessions, connections, bytes, api, http).
func (m *Metrics) Overload(reason string) {
	if m == nil {
		return
	}
	m.overload.WithLabelValues(reason).Inc()
}

// Buffered tracks the bytes the milter sessions hold against
// milter.max_buffered_bytes (+n reserved, -n released).
func (m *Metrics) Buffered(delta int64) {
	if m == nil {
		return
	}
	m.buffered.Add(float64(delta))
}

// Describe sends the descriptions of every metric New registers (those
// of vectors without a series yet included), for checks of what the
// daemon exports.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// collectors returns every collector New registers.
func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.messages, m.matches, m.checkDuration, m.bodyBytes, m.parseWarnings,
		m.errors, m.failOpen, m.reports, m.campaigns, m.byState, m.indexKeys, m.storeBytes,
		m.sessions, m.connections, m.reloads, m.overload, m.buffered,
		m.diskFull, m.diskFree, m.diskRefused, m.spoolPending, m.buildInfo,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
}

// Reload counts a reload; ok tells whether it succeeded.
func (m *Metrics) Reload(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.reloads.WithLabelValues("ok").Inc()
	} else {
		m.reloads.WithLabelValues("error").Inc()
	}
}

// StoreStats is what the store gauges show.
type StoreStats struct {
	Campaigns, Keys, DiskBytes int64
	// Active, Allowed and Revoked count the campaigns by state.
	Active, Allowed, Revoked int64
	// DiskFree is the free space of the store's filesystem (-1: unknown),
	// DiskFull whether the store refuses writes for lack of it, and
	// WritesRefused how many writes it refused so far.
	DiskFree      int64
	DiskFull      bool
	WritesRefused int64
}

// SetStore sets the store gauges.
func (m *Metrics) SetStore(s StoreStats) {
	if m == nil {
		return
	}
	m.campaigns.Set(float64(s.Campaigns))
	m.byState.WithLabelValues("active").Set(float64(s.Active))
	m.byState.WithLabelValues("allowed").Set(float64(s.Allowed))
	m.byState.WithLabelValues("revoked").Set(float64(s.Revoked))
	m.indexKeys.Set(float64(s.Keys))
	m.storeBytes.Set(float64(s.DiskBytes))
	if s.DiskFree >= 0 {
		m.diskFree.Set(float64(s.DiskFree))
	}
	full := 0.0
	if s.DiskFull {
		full = 1
	}
	m.diskFull.Set(full)
	m.diskRefused.Set(float64(s.WritesRefused))
}

// RefreshStore calls stats now and then every interval until ctx ends,
// setting the store gauges; failures are logged and counted (stage
// "store").
func (m *Metrics) RefreshStore(ctx context.Context, interval time.Duration, stats func(context.Context) (StoreStats, error), log *slog.Logger) {
	if m == nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, interval)
		s, err := stats(sctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.Error("store")
			log.Warn("store stats", "err", err)
		} else {
			m.SetStore(s)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
