package broker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tidemark.io/services/broker/internal/aiofsync"
	"tidemark.io/services/broker/internal/parkedfs"
)

// diskMetrics times the writes of the logs that can stall: each append's
// write to its segment (leader and follower alike) and each offset
// checkpoint written durably. An append that waits on the disk holds up
// acks=all for every partition behind it; a checkpoint's fsync waits behind
// the writeback the segments queued on the same device (and, on ext4's
// default data=ordered, for a journal commit that appends can wait on).
type diskMetrics struct {
	appendWrite prometheus.Histogram
	checkpoint  *prometheus.HistogramVec
}

// diskBuckets run from a page-cache write to a disk stalled for seconds.
var diskBuckets = []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5}

func newDiskMetrics(reg prometheus.Registerer) diskMetrics {
	m := diskMetrics{
		appendWrite: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tidemark_log_append_write_seconds",
			Help: "Time of each append's write to its active segment (leader and follower appends).", Buckets: diskBuckets}),
		checkpoint: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tidemark_log_checkpoint_write_seconds",
			Help: "Time to write an offset checkpoint file durably (write, fsync, rename, directory fsync).", Buckets: diskBuckets},
			[]string{"file"}),
	}
	reg.MustRegister(m.appendWrite, m.checkpoint, fsyncCollector{}, fileOpsCollector{})
	return m
}

// fsyncCollector exports how the process's fsyncs ran: parked (the kernel
// flushed asynchronously while the goroutine waited in the poller) or
// plain (the kernel refused that, and each fsync held a P while the device
// worked, stalling a GOMAXPROCS-1 broker meanwhile).
type fsyncCollector struct{}

var descFsyncs = prometheus.NewDesc("tidemark_log_fsyncs_total",
	"Fsyncs of log, index and checkpoint files and their directories by this process, by how they waited: parked (asynchronous, the broker ran on) or plain (a blocking system call; the kernel refused the asynchronous one).",
	[]string{"mode"}, nil)

func (fsyncCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descFsyncs }

func (fsyncCollector) Collect(ch chan<- prometheus.Metric) {
	parked, plain := aiofsync.Counts()
	ch <- prometheus.MustNewConstMetric(descFsyncs, prometheus.CounterValue, float64(parked), "parked")
	ch <- prometheus.MustNewConstMetric(descFsyncs, prometheus.CounterValue, float64(plain), "plain")
}

// fileOpsCollector exports how the process's removals, renames and
// truncations of log files ran: parked (on the kernel's io_uring workers
// while the goroutine waited in the poller) or plain (the kernel refused
// io_uring, and each held a P while the file system freed blocks).
type fileOpsCollector struct{}

var descFileOps = prometheus.NewDesc("tidemark_log_file_ops_total",
	"Removals, renames and truncations of log, index, snapshot and checkpoint files by this process, by how they waited: parked (io_uring, the broker ran on) or plain (a blocking system call; the kernel refused io_uring or lacks the operation).",
	[]string{"mode"}, nil)

func (fileOpsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descFileOps }

func (fileOpsCollector) Collect(ch chan<- prometheus.Metric) {
	parked, plain := parkedfs.Counts()
	ch <- prometheus.MustNewConstMetric(descFileOps, prometheus.CounterValue, float64(parked), "parked")
	ch <- prometheus.MustNewConstMetric(descFileOps, prometheus.CounterValue, float64(plain), "plain")
}

func (m diskMetrics) observeAppendWrite(d time.Duration) { m.appendWrite.Observe(d.Seconds()) }

func (m diskMetrics) observeCheckpoint(file string, d time.Duration) {
	m.checkpoint.WithLabelValues(file).Observe(d.Seconds())
}
