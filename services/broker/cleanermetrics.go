package broker

import (
	"github.com/prometheus/client_golang/prometheus"

	"tidemark.io/services/broker/internal/logstore"
)

// cleanerCollector exports the log cleaner's counters (Kafka's
// kafka.log:type=LogCleaner beans) at scrape time.
type cleanerCollector struct {
	logs interface{ CleanerStats() logstore.CleanerStats }
}

var (
	descCleanerPasses = prometheus.NewDesc("tidemark_log_cleaner_passes_total",
		"Cleaning passes that rewrote a compacted log.", nil, nil)
	descCleanerAborted = prometheus.NewDesc("tidemark_log_cleaner_aborted_total",
		"Cleaning passes abandoned because truncation, retention or a close changed the log.", nil, nil)
	descCleanerFailures = prometheus.NewDesc("tidemark_log_cleaner_failures_total",
		"Cleaning passes that failed (see the broker log).", nil, nil)
	descCleanerRead = prometheus.NewDesc("tidemark_log_cleaner_bytes_read_total",
		"Bytes the cleaner read.", nil, nil)
	descCleanerWritten = prometheus.NewDesc("tidemark_log_cleaner_bytes_written_total",
		"Bytes the cleaner wrote into cleaned segments.", nil, nil)
	descCleanerRemoved = prometheus.NewDesc("tidemark_log_cleaner_records_removed_total",
		"Records removed by compaction (superseded values and expired tombstones).", nil, nil)
	descCleanerTombstones = prometheus.NewDesc("tidemark_log_cleaner_tombstones_removed_total",
		"Tombstones removed after delete.retention.ms.", nil, nil)
	descCleanerDuration = prometheus.NewDesc("tidemark_log_cleaner_last_run_duration_seconds",
		"Duration of the last cleaning pass.", nil, nil)
	descCleanerDirty = prometheus.NewDesc("tidemark_log_cleaner_max_dirty_ratio",
		"Largest dirty ratio among compacted logs at the last check (Kafka max-dirty-percent / 100).", nil, nil)
)

func (c cleanerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCleanerPasses, descCleanerAborted, descCleanerFailures, descCleanerRead,
		descCleanerWritten, descCleanerRemoved, descCleanerTombstones, descCleanerDuration, descCleanerDirty} {
		ch <- d
	}
}

func (c cleanerCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.logs.CleanerStats()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(descCleanerPasses, st.Passes)
	counter(descCleanerAborted, st.Aborted)
	counter(descCleanerFailures, st.Failures)
	counter(descCleanerRead, st.BytesRead)
	counter(descCleanerWritten, st.BytesWritten)
	counter(descCleanerRemoved, st.RecordsRemoved)
	counter(descCleanerTombstones, st.TombstonesRemoved)
	ch <- prometheus.MustNewConstMetric(descCleanerDuration, prometheus.GaugeValue, st.LastDuration.Seconds())
	ch <- prometheus.MustNewConstMetric(descCleanerDirty, prometheus.GaugeValue, st.MaxDirtyRatio)
}
