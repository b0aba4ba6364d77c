package etcdfollow

import "github.com/prometheus/client_golang/prometheus"

// Metrics exports, by followed state, how current a process's copy is: a
// follower that cannot load (etcd unreachable, a role that may not read
// the prefix) counts its reloads while its last-applied time stands still.
type Metrics struct {
	lastApplied *prometheus.GaugeVec
	reloads     *prometheus.CounterVec
	entries     *prometheus.GaugeVec
}

// NewMetrics registers the followers' metrics with reg. A process makes
// one and hands it to each of its followers, which label it by state.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lastApplied: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_etcd_follow_last_applied_timestamp_seconds",
			Help: "Unix time at which this process last applied a full load or a watched change of the state from etcd (0: never loaded)."},
			[]string{"state"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_etcd_follow_reloads_total",
			Help: "Full loads of the state from etcd started after a failed load or a watch that failed or was compacted."},
			[]string{"state"}),
		entries: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_etcd_follow_entries",
			Help: "Entries of the state this process holds as last loaded or changed from etcd."},
			[]string{"state"}),
	}
	reg.MustRegister(m.lastApplied, m.reloads, m.entries)
	return m
}

// stateMetrics are one state's series; the zero value exports nothing.
type stateMetrics struct {
	lastApplied prometheus.Gauge
	reloads     prometheus.Counter
	entries     prometheus.Gauge
}

// of creates state's series, so that a follower that never loads shows
// as such rather than not at all.
func (m *Metrics) of(state string) stateMetrics {
	if m == nil {
		return stateMetrics{}
	}
	return stateMetrics{
		lastApplied: m.lastApplied.WithLabelValues(state),
		reloads:     m.reloads.WithLabelValues(state),
		entries:     m.entries.WithLabelValues(state),
	}
}

func (s stateMetrics) applied(entries int) {
	if s.lastApplied == nil {
		return
	}
	s.lastApplied.SetToCurrentTime()
	s.entries.Set(float64(entries))
}

func (s stateMetrics) reloading() {
	if s.reloads != nil {
		s.reloads.Inc()
	}
}
