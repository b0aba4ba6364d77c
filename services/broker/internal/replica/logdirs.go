package replica

import (
	"fmt"
	"slices"
	"strings"
)

// LogDirFailed stops the replicas whose log dir went offline (Kafka's
// handleLogDirFailure): their fetchers stop, parked requests are woken, and
// from now on they answer KAFKA_STORAGE_ERROR and are not recreated. The
// broker then tells the controller, which moves leadership and ISR
// membership away from them.
func (m *Manager) LogDirFailed(tps []TP, cause error) {
	defer m.fetchers.batch()()
	m.mu.Lock()
	for _, tp := range tps {
		m.offline[tp] = cause
	}
	m.mu.Unlock()
	var led []string
	for _, tp := range tps {
		if r, ok := m.Replica(tp); ok && r.IsLeader() {
			led = append(led, tpKey(tp))
		}
		_ = m.stopReplica(tp, -1, false)
	}
	m.log.Error("Stopped the replicas of an offline log dir", "partitions", len(tps), "leaders", strings.Join(led, ","), "err", cause)
	// An urgent event: the session reports the offline replicas at once.
	m.emit(Event{Kind: "log-dir-offline", Reason: fmt.Sprintf("%v; %d replicas stopped", cause, len(tps))})
}

// OfflineReplicas lists the partitions whose log dir is offline, sorted.
func (m *Manager) OfflineReplicas() []TP {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]TP, 0, len(m.offline))
	for tp := range m.offline {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b TP) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}
