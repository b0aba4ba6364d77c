package replica

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tidemark.io/services/platform/kerr"
)

// underMinISRWarnEvery spaces the warnings about writes refused for want of
// in-sync replicas: producers retry such writes many times a second, and
// each refusal is counted anyway.
const underMinISRWarnEvery = 10 * time.Second

// underMinISRLog is the rate limit of those warnings: one line per interval
// for the whole broker, naming how many refusals went unlogged before it.
// Atomics, so the produce path takes no lock for it.
type underMinISRLog struct {
	lastWarn atomic.Int64 // Unix nanoseconds, 0 before the first
	unlogged atomic.Int64
}

// refusedForISR reports whether code refuses a write because the ISR is
// below min.insync.replicas.
func refusedForISR(code kerr.Code) bool {
	return code == kerr.NotEnoughReplicas || code == kerr.NotEnoughReplicasAfterAppend
}

// noteUnderMinISR counts a write refused for want of in-sync replicas under
// its topic (a partition led here, so a real topic) and warns at most once
// per underMinISRWarnEvery.
func (m *Manager) noteUnderMinISR(tp TP, code kerr.Code, err error) {
	m.metrics.underMinISR.WithLabelValues(tp.Topic, code.String()).Inc()
	now := m.now().UnixNano()
	last := m.underMinISRLog.lastWarn.Load()
	if last != 0 && now-last < int64(underMinISRWarnEvery) || !m.underMinISRLog.lastWarn.CompareAndSwap(last, now) {
		m.underMinISRLog.unlogged.Add(1)
		return
	}
	m.log.Warn("Refused a write: the ISR is below min.insync.replicas", "topic", tp.Topic, "partition", tp.Partition,
		"err", err, "unlogged_since_last_warning", m.underMinISRLog.unlogged.Swap(0))
}

// forgetTopicMetrics drops topic's per-topic series once this broker hosts
// no partition of it (deleted, or moved away), so the series stay bounded
// by the topics hosted here.
func (m *Manager) forgetTopicMetrics(topic string) {
	for _, r := range m.Replicas() {
		if r.tp.Topic == topic {
			return
		}
	}
	m.metrics.underMinISR.DeletePartialMatch(prometheus.Labels{"topic": topic})
}
