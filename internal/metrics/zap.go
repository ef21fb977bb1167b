package metrics

import "github.com/prometheus/client_golang/prometheus"

// ZapStats are the delivery ledger's and the purge queue's counts.
type ZapStats struct {
	LedgerEntries, LedgerBytes, LedgerDropped, LedgerEvicted int64
	JobsPending                                              int
}

// Zap are the collectors of zero-hour purge (internal/zap). Its methods
// are safe on nil.
type Zap struct {
	jobs *prometheus.CounterVec
}

// Zap registers the collectors of zero-hour purge: the jobs finished by
// kind and outcome, and the ledger's and queue's counts read from stats
// at each scrape. Call it once; nil on a nil *Metrics.
func (m *Metrics) Zap(stats func() ZapStats) *Zap {
	if m == nil {
		return nil
	}
	z := &Zap{jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nddmilter_zap_jobs_total",
		Help: "Zero-hour purge jobs finished, by kind (move, undo) and outcome (moved, skipped, failed, logged).",
	}, []string{"kind", "outcome"})}
	// Every documented pair from the start, so that rates exist.
	lv := LabelValues()["nddmilter_zap_jobs_total"]
	for _, k := range lv["kind"] {
		for _, o := range lv["outcome"] {
			z.jobs.WithLabelValues(k, o)
		}
	}
	gauge := func(name, help string, f func(ZapStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(stats()) })
	}
	m.Registry.MustRegister(z.jobs,
		gauge("nddmilter_ledger_entries", "Delivered messages kept in the delivery ledger.", func(s ZapStats) float64 { return float64(s.LedgerEntries) }),
		gauge("nddmilter_ledger_bytes", "Bytes of the delivery ledger's entries.", func(s ZapStats) float64 { return float64(s.LedgerBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nddmilter_ledger_dropped_total",
			Help: "Delivered messages not recorded in the ledger (queue full, evidence too large)."}, func() float64 { return float64(stats().LedgerDropped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nddmilter_ledger_evicted_total",
			Help: "Ledger entries removed by the window or the byte bound."}, func() float64 { return float64(stats().LedgerEvicted) }),
		gauge("nddmilter_zap_jobs_pending", "Zero-hour purge jobs waiting (due or retrying).", func(s ZapStats) float64 { return float64(s.JobsPending) }),
	)
	return z
}

// Job counts a finished job.
func (z *Zap) Job(kind, outcome string) {
	if z == nil {
		return
	}
	z.jobs.WithLabelValues(kind, outcome).Inc()
}
