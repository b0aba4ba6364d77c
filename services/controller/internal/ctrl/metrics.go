package ctrl

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the controller's Prometheus metrics, named after Kafka's
// kafka.controller:type=KafkaController and ControllerStats MBeans. One set
// serves every term of a process.
type Metrics struct {
	active          prometheus.GaugeFunc
	epoch           prometheus.Gauge
	offline         prometheus.GaugeFunc
	elections       *prometheus.CounterVec
	unclean         prometheus.Counter
	isrShrinks      *prometheus.CounterVec
	alterRefused    *prometheus.CounterVec
	electionSeconds prometheus.Histogram
	failover        prometheus.Gauge
	fastFailovers   prometheus.Counter
	yields          *prometheus.CounterVec
	olderStates     prometheus.Counter

	// The loop's own (Kafka's ControllerEventManager MBeans): how long
	// events wait and run, how many wait, and how long the one running has
	// run, so a busy or stuck controller shows before requests time out.
	eventQueueSeconds prometheus.Histogram
	eventSeconds      prometheus.Histogram
	queueSize         prometheus.GaugeFunc
	runningSeconds    prometheus.GaugeFunc
	// term is the running term (nil on a standby), read by the gauges.
	term atomic.Pointer[Active]
	// offlineCount is the running term's last count of offline
	// partitions, reported only while that term is the active controller.
	offlineCount atomic.Int64
}

// NewMetrics registers the metrics on reg (nil: not registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		epoch: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "tidemark", Subsystem: "controller",
			Name: "epoch", Help: "Controller epoch of the term this process holds or last held."}),
		elections: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tidemark", Subsystem: "controller",
			Name: "leader_elections_total", Help: "Leader changes written by the controller, by cause."}, []string{"cause"}),
		unclean: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tidemark", Subsystem: "controller",
			Name: "unclean_leader_elections_total", Help: "Leaders elected from outside the ISR (Kafka's UncleanLeaderElectionsPerSec)."}),
		isrShrinks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tidemark", Subsystem: "controller",
			Name: "isr_shrinks_total", Help: "ISR members the controller removed itself, by cause (offline: their broker is gone; controlled_shutdown; " +
				"reassignment; unclean, preferred, config_change: an election's); a leader's own shrinks count in tidemark_broker_isr_shrinks_total."},
			[]string{"cause"}),
		alterRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tidemark", Subsystem: "controller",
			Name: "alter_partition_refused_total", Help: "ISR changes refused, by code: FENCED_LEADER_EPOCH a stale leader's, STALE_BROKER_EPOCH a broker incarnation's " +
				"that is not the live one (the whole request), INVALID_UPDATE_VERSION one a newer partition state overtook."},
			[]string{"code"}),
		electionSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "tidemark", Subsystem: "controller",
			Name: "leader_election_seconds", Help: "Time to decide and write a batch of leader elections (Kafka's LeaderElectionRateAndTimeMs).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		failover: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "tidemark", Subsystem: "controller",
			Name: "last_failover_seconds", Help: "Time from the previous controller going to this one having pushed its state."}),
		fastFailovers: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tidemark", Subsystem: "controller",
			Name: "session_failovers_total", Help: "Brokers declared dead because their BrokerSession broke, before their lease expired."}),
		yields: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tidemark", Subsystem: "controller",
			Name: "leader_yields_total", Help: "YieldLeadership requests ahead of voluntary leadership moves, by outcome: " +
				"yielded, refused (the leader is at another state), timed_out (no answer within the request timeout: cut off?), departed."},
			[]string{"outcome"}),
		olderStates: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tidemark", Subsystem: "controller",
			Name: "older_partition_states_total", Help: "Partition states brokers refused because they hold newer ones: etcd's metadata is older than what the brokers have seen (restored from an older snapshot?). Anything above 0 needs an operator."}),
		eventQueueSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "tidemark", Subsystem: "controller",
			Name: "event_queue_seconds", Help: "Time an event (a request, a broker's report, a timer) waited for the controller's loop (Kafka's EventQueueTimeMs).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}),
		eventSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "tidemark", Subsystem: "controller",
			Name: "event_processing_seconds", Help: "Time the controller's loop took over one event, its etcd writes included (Kafka's EventQueueProcessingTimeMs).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}),
	}
	// Read at scrape time, as the term's requests are answered: a term
	// whose lease is not surely held any more (its loop busy when the
	// lease ran out, so it has not stepped down yet) is already a
	// standby to the cluster, and a standby's figures are 0.
	m.active = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tidemark", Subsystem: "controller",
		Name: "active_controller_count", Help: "1 on the active controller, 0 on standbys and on a term whose lease is not surely held (Kafka's ActiveControllerCount)."},
		func() float64 {
			if m.activeTerm() != nil {
				return 1
			}
			return 0
		})
	m.offline = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tidemark", Subsystem: "controller",
		Name: "offline_partitions_count", Help: "Partitions without a live leader, those of topics being deleted left out (Kafka's OfflinePartitionsCount); 0 on standbys."},
		func() float64 {
			if m.activeTerm() != nil {
				return float64(m.offlineCount.Load())
			}
			return 0
		})
	m.queueSize = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tidemark", Subsystem: "controller",
		Name: "event_queue_size", Help: "Events waiting for the active controller's loop (Kafka's EventQueueSize); 0 on standbys."},
		func() float64 {
			if a := m.term.Load(); a != nil {
				return float64(len(a.events))
			}
			return 0
		})
	m.runningSeconds = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tidemark", Subsystem: "controller",
		Name: "event_running_seconds", Help: "How long the active controller's loop has been inside the event it runs; 0 while it waits. A growing value is a stuck loop."},
		func() float64 {
			if a := m.term.Load(); a != nil {
				if since := a.runningSince.Load(); since != 0 {
					return time.Since(time.Unix(0, since)).Seconds()
				}
			}
			return 0
		})
	if reg != nil {
		reg.MustRegister(m.active, m.epoch, m.offline, m.elections, m.unclean, m.isrShrinks, m.alterRefused, m.electionSeconds, m.failover, m.fastFailovers, m.yields, m.olderStates,
			m.eventQueueSeconds, m.eventSeconds, m.queueSize, m.runningSeconds)
	}
	return m
}

// SetStandby marks this process as not the active controller. Like Kafka's
// (KafkaController.updateMetrics), the partition-state gauges are the
// active controller's alone: a standby reports 0, so sums over the
// controllers count each partition once.
func (m *Metrics) SetStandby() {
	m.offlineCount.Store(0)
}

// activeTerm is the term this process serves as the active controller:
// loaded, not ended, and its lease surely held now (Active.Held, which
// office.current asks before answering as the active controller); nil
// otherwise.
func (m *Metrics) activeTerm() *Active {
	a := m.term.Load()
	if a == nil || !a.loaded.Load() || a.Err() != nil || !a.Held(time.Now()) {
		return nil
	}
	return a
}
