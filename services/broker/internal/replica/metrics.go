package replica

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"tidemark.io/services/broker/internal/partition"
)

// metrics are the broker's replication metrics, named after Kafka's JMX
// beans (kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions
// is tidemark_broker_under_replicated_partitions) and documented in the
// README.
type metrics struct {
	isrShrinks  prometheus.Counter
	isrExpands  prometheus.Counter
	produceLat  *prometheus.HistogramVec
	fetchLat    *prometheus.HistogramVec
	appendToHW  prometheus.Histogram
	bytesIn     prometheus.Counter
	bytesOut    *prometheus.CounterVec
	truncations prometheus.Counter
	// configResolutions counts topic config resolutions on UpdateMetadata
	// (one per topic whose inputs changed).
	configResolutions prometheus.Counter
	// leaderAndIsrResends counts LeaderAndIsr requests identical to the
	// last one, answered without applying them again.
	leaderAndIsrResends prometheus.Counter
	// fetchInterrupts counts follower fetch round trips cut short because
	// the fetcher's partitions changed (their answers discarded).
	fetchInterrupts prometheus.Counter
	// followerFetch times a follower's fetch rounds by phase and leader,
	// so a stall of acks=all writes can be placed: in the leader's answer
	// (its own fetch latency), on the way (round_trip above that), in the
	// follower's appends (apply) or in its loop (between). A fetcher looks
	// its leader's children up once (fetchPhases).
	followerFetch *prometheus.HistogramVec
	// Children looked up once: the produce and fetch paths observe them on
	// every request.
	produceByAcks                 map[int16]prometheus.Observer
	consumerFetchLat, followerLat prometheus.Observer
	consumerOut, followerOut      prometheus.Counter

	parkedProd  atomic.Int64
	parkedFetch atomic.Int64
	refused     *prometheus.CounterVec
	// underMinISR counts writes refused because the ISR is below
	// min.insync.replicas, by topic: only a partition led here refuses
	// so, so the topics are real ones, not whatever a client named.
	underMinISR *prometheus.CounterVec
	// olderStates counts partition states refused for being older than
	// the one held (refuseOlderState).
	olderStates prometheus.Counter
	// staleController counts controller requests refused for an older
	// controller epoch than one already seen (F22).
	staleController prometheus.Counter
}

var latencyBuckets = []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newMetrics(m *Manager, reg prometheus.Registerer) *metrics {
	mt := &metrics{
		isrShrinks: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_broker_isr_shrinks_total",
			Help: "ISR shrinks proposed by this broker as leader and committed by the controller (Kafka IsrShrinksPerSec)."}),
		isrExpands: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_broker_isr_expands_total",
			Help: "ISR expansions proposed by this broker as leader and committed by the controller (Kafka IsrExpandsPerSec)."}),
		produceLat: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tidemark_broker_produce_latency_seconds",
			Help: "Produce request time on the leader, by acks.", Buckets: latencyBuckets}, []string{"acks"}),
		fetchLat: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tidemark_broker_fetch_latency_seconds",
			Help: "Fetch request time, including any wait, by kind (consumer or follower).", Buckets: latencyBuckets}, []string{"kind"}),
		appendToHW: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tidemark_broker_append_to_hw_seconds",
			Help: "Time from a leader append to the HW covering it (acks=all produces).", Buckets: latencyBuckets}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_broker_bytes_in_total",
			Help: "Record bytes appended as leader."}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_broker_bytes_out_total",
			Help: "Record bytes sent, by kind (consumer or follower)."}, []string{"kind"}),
		truncations: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_broker_truncations_total",
			Help: "Follower log truncations."}),
		configResolutions: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_broker_topic_config_resolutions_total",
			Help: "Effective topic configs resolved after a metadata update changed a topic's or the broker's dynamic configs."}),
		leaderAndIsrResends: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_broker_leader_and_isr_resends_total",
			Help: "LeaderAndIsr requests identical to the one applied last or being applied (the controller resent it after its request timeout): answered with that application's result, not applied again."}),
		fetchInterrupts: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_broker_replica_fetch_interrupts_total",
			Help: "Follower fetch round trips cut short because partitions were added to or removed from the fetcher; their answers are discarded."}),
		followerFetch: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tidemark_broker_replica_fetch_seconds",
			Help: "This broker's fetch rounds as a follower, by phase and leader (the broker fetched from): round_trip (request sent to answer received, the leader's wait for data included), apply (the answers appended or acted on), between (the last round's end to this request: the fetcher's own delay).", Buckets: latencyBuckets}, []string{"phase", "leader"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_broker_produce_refused_total",
			Help: "Produce requests refused, by error code."}, []string{"code"}),
		underMinISR: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_broker_produce_under_min_isr_total",
			Help: "Writes refused because the ISR is below min.insync.replicas (NOT_ENOUGH_REPLICAS before the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND after it), by topic and code."},
			[]string{"topic", "code"}),
		staleController: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_broker_stale_controller_requests_total",
			Help: "Controller requests refused because a controller of a newer epoch was already heard from: a deposed controller still sending (Kafka's STALE_CONTROLLER_EPOCH)."}),
		olderStates: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_broker_older_partition_states_total",
			Help: "Partition states from the controller refused because this broker holds a newer one: etcd's metadata went backwards (restored from an older snapshot?). Anything above 0 needs an operator."}),
	}
	mt.produceByAcks = map[int16]prometheus.Observer{}
	for _, acks := range []int16{-1, 0, 1} {
		mt.produceByAcks[acks] = mt.produceLat.WithLabelValues(strconv.Itoa(int(acks)))
	}
	mt.consumerFetchLat, mt.followerLat = mt.fetchLat.WithLabelValues("consumer"), mt.fetchLat.WithLabelValues("follower")
	mt.consumerOut, mt.followerOut = mt.bytesOut.WithLabelValues("consumer"), mt.bytesOut.WithLabelValues("follower")
	if reg == nil {
		return mt
	}
	reg.MustRegister(mt.isrShrinks, mt.isrExpands, mt.produceLat, mt.fetchLat, mt.appendToHW,
		mt.bytesIn, mt.bytesOut, mt.truncations, mt.configResolutions, mt.leaderAndIsrResends, mt.fetchInterrupts, mt.followerFetch, mt.refused, mt.underMinISR, mt.olderStates, mt.staleController, &stateCollector{m: m})
	return mt
}

// stateCollector computes the partition-state gauges at scrape time from
// each replica's state machine, so they can never drift from the truth.
type stateCollector struct{ m *Manager }

var (
	descUnderReplicated = prometheus.NewDesc("tidemark_broker_under_replicated_partitions",
		"Partitions led here whose ISR is smaller than their replication factor, replicas being added by a reassignment left out (Kafka UnderReplicatedPartitions).", nil, nil)
	descUnderMinISR = prometheus.NewDesc("tidemark_broker_under_min_isr_partitions",
		"Partitions led here whose ISR is below the effective min.insync.replicas, min(min.insync.replicas, replication factor) (Kafka UnderMinIsrPartitionCount).", nil, nil)
	descAtMinISR = prometheus.NewDesc("tidemark_broker_at_min_isr_partitions",
		"Partitions led here whose ISR equals the effective min.insync.replicas, min(min.insync.replicas, replication factor) (Kafka AtMinIsrPartitionCount).", nil, nil)
	descLeaders = prometheus.NewDesc("tidemark_broker_leader_partitions",
		"Partitions this broker leads (Kafka LeaderCount).", nil, nil)
	descReplicas = prometheus.NewDesc("tidemark_broker_partitions",
		"Partition replicas this broker hosts (Kafka PartitionCount).", nil, nil)
	descMaxLag = prometheus.NewDesc("tidemark_broker_replica_max_lag",
		"Largest offset lag of any follower of a partition led here (Kafka ReplicaFetcherManager MaxLag).", nil, nil)
	descFollowerLag = prometheus.NewDesc("tidemark_broker_follower_lag",
		"A follower's offset lag behind this leader.", []string{"topic", "partition", "follower"}, nil)
	descFollowerCaughtUp = prometheus.NewDesc("tidemark_broker_follower_last_caught_up_seconds",
		"Seconds since a follower was last caught up with this leader (the ISR rule's clock).", []string{"topic", "partition", "follower"}, nil)
	descPurgatory = prometheus.NewDesc("tidemark_broker_purgatory_size",
		"Requests parked waiting: acks=all produces for the HW, fetches for data.", []string{"purgatory"}, nil)
	descHWStalled = prometheus.NewDesc("tidemark_broker_hw_stalled_partitions",
		"Partitions led here whose high watermark has not moved for twice replica.lag.time.max.ms while below the log end offset, the ISR not below min.insync.replicas: an ISR shrink that cannot commit, or a stuck HW.", nil, nil)
	descHW = prometheus.NewDesc("tidemark_broker_high_watermark",
		"High watermark of each hosted replica.", []string{"topic", "partition"}, nil)
	descLEO = prometheus.NewDesc("tidemark_broker_log_end_offset",
		"Log end offset of each hosted replica.", []string{"topic", "partition"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUnderReplicated, descUnderMinISR, descAtMinISR, descLeaders, descReplicas,
		descMaxLag, descFollowerLag, descFollowerCaughtUp, descPurgatory, descHWStalled, descHW, descLEO} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.m.now()
	var under, underMin, atMin, leaders, replicas, stalled int
	var maxLag int64
	for _, r := range c.m.Replicas() {
		s := r.Snapshot(now)
		replicas++
		if r.hwStalled.Load() {
			stalled++
		}
		part := strconv.Itoa(int(r.tp.Partition))
		ch <- prometheus.MustNewConstMetric(descHW, prometheus.GaugeValue, float64(s.HighWatermark), r.tp.Topic, part)
		ch <- prometheus.MustNewConstMetric(descLEO, prometheus.GaugeValue, float64(s.LogEndOffset), r.tp.Topic, part)
		if s.Role != partition.RoleLeader {
			continue
		}
		leaders++
		// Against the replication factor, which leaves out the replicas a
		// reassignment is adding: they join the ISR only once caught up.
		if len(s.ISR) < s.ReplicationFactor {
			under++
		}
		// Kafka's isUnderMinIsr/isAtMinIsr: against the effective min ISR,
		// min(min.insync.replicas, RF), the one produce enforces (F16).
		switch {
		case len(s.ISR) < s.EffectiveMinISR:
			underMin++
		case len(s.ISR) == s.EffectiveMinISR:
			atMin++
		}
		for _, f := range s.Followers {
			follower := strconv.Itoa(int(f.ID))
			if f.OffsetLag >= 0 {
				maxLag = max(maxLag, f.OffsetLag)
				ch <- prometheus.MustNewConstMetric(descFollowerLag, prometheus.GaugeValue, float64(f.OffsetLag), r.tp.Topic, part, follower)
			}
			ch <- prometheus.MustNewConstMetric(descFollowerCaughtUp, prometheus.GaugeValue, float64(f.CaughtUpAgeMs)/1000, r.tp.Topic, part, follower)
		}
	}
	ch <- prometheus.MustNewConstMetric(descUnderReplicated, prometheus.GaugeValue, float64(under))
	ch <- prometheus.MustNewConstMetric(descUnderMinISR, prometheus.GaugeValue, float64(underMin))
	ch <- prometheus.MustNewConstMetric(descAtMinISR, prometheus.GaugeValue, float64(atMin))
	ch <- prometheus.MustNewConstMetric(descLeaders, prometheus.GaugeValue, float64(leaders))
	ch <- prometheus.MustNewConstMetric(descReplicas, prometheus.GaugeValue, float64(replicas))
	ch <- prometheus.MustNewConstMetric(descHWStalled, prometheus.GaugeValue, float64(stalled))
	ch <- prometheus.MustNewConstMetric(descMaxLag, prometheus.GaugeValue, float64(maxLag))
	ch <- prometheus.MustNewConstMetric(descPurgatory, prometheus.GaugeValue, float64(c.m.metrics.parkedProd.Load()), "produce")
	ch <- prometheus.MustNewConstMetric(descPurgatory, prometheus.GaugeValue, float64(c.m.metrics.parkedFetch.Load()), "fetch")
}

// fetchPhases is a fetcher's observers of its rounds' phases.
type fetchPhases struct{ roundTrip, apply, between prometheus.Observer }

// fetchPhases looks up the children of followerFetch for rounds against
// leader: the leader's label tells the place of a slow round (one link, one
// leader) and lets the leader's own fetch latency be taken out of it.
func (mt *metrics) fetchPhases(leader int32) fetchPhases {
	l := strconv.Itoa(int(leader))
	return fetchPhases{roundTrip: mt.followerFetch.WithLabelValues("round_trip", l),
		apply: mt.followerFetch.WithLabelValues("apply", l), between: mt.followerFetch.WithLabelValues("between", l)}
}
