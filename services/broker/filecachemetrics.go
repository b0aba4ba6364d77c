package broker

import (
	"github.com/prometheus/client_golang/prometheus"

	"tidemark.io/services/broker/internal/logstore"
)

// fileCacheCollector exports the broker's open segment files
// (log.max.open.files) at scrape time: a miss rate that stays high means
// the bound is below the set of partitions in use.
type fileCacheCollector struct {
	files *logstore.FileCache
	max   int
}

var (
	descFilesOpen = prometheus.NewDesc("tidemark_log_open_files",
		"Segment files (.log, .index, .timeindex) the broker holds open.", nil, nil)
	descFilesMax = prometheus.NewDesc("tidemark_log_max_open_files",
		"log.max.open.files: the bound on open segment files (exceeded only by files in use).", nil, nil)
	descFilesHits = prometheus.NewDesc("tidemark_log_file_cache_hits_total",
		"Segment file operations that found their file open.", nil, nil)
	descFilesMisses = prometheus.NewDesc("tidemark_log_file_cache_misses_total",
		"Segment file operations that reopened their file (closed earlier to stay within log.max.open.files).", nil, nil)
	descFilesEvictions = prometheus.NewDesc("tidemark_log_file_cache_evictions_total",
		"Idle segment files closed to stay within log.max.open.files.", nil, nil)
	descCacheDropped = prometheus.NewDesc("tidemark_log_follower_cache_dropped_bytes_total",
		"Bytes of follower segments dropped from the page cache behind their tail (log.follower.cached.bytes).", nil, nil)
	descReserved = prometheus.NewDesc("tidemark_log_preallocated_segments_total",
		"Segments started with their disk blocks reserved (preallocate).", nil, nil)
	descReserveFailed = prometheus.NewDesc("tidemark_log_preallocate_failures_total",
		"Segment block reservations the file system refused (preallocate; full or unable): those segments are allocated as written.", nil, nil)
)

func (c fileCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFilesOpen, descFilesMax, descFilesHits, descFilesMisses, descFilesEvictions, descCacheDropped, descReserved, descReserveFailed} {
		ch <- d
	}
}

func (c fileCacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.files.Stats()
	ch <- prometheus.MustNewConstMetric(descFilesOpen, prometheus.GaugeValue, float64(st.Open))
	ch <- prometheus.MustNewConstMetric(descFilesMax, prometheus.GaugeValue, float64(c.max))
	ch <- prometheus.MustNewConstMetric(descFilesHits, prometheus.CounterValue, float64(st.Hits))
	ch <- prometheus.MustNewConstMetric(descFilesMisses, prometheus.CounterValue, float64(st.Misses))
	ch <- prometheus.MustNewConstMetric(descFilesEvictions, prometheus.CounterValue, float64(st.Evictions))
	ch <- prometheus.MustNewConstMetric(descCacheDropped, prometheus.CounterValue, float64(st.CacheDroppedBytes))
	ch <- prometheus.MustNewConstMetric(descReserved, prometheus.CounterValue, float64(st.ReservedSegments))
	ch <- prometheus.MustNewConstMetric(descReserveFailed, prometheus.CounterValue, float64(st.ReserveFailures))
}
