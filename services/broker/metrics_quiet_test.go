package broker_test

import (
	"testing"

	"tidemark.io/services/broker"
)

// A partition whose replication factor is below min.insync.replicas has an
// effective min ISR of RF (F16: min(minISR, RF)); acks=all writes to it
// succeed. Kafka's UnderMinIsrPartitionCount / AtMinIsrPartitionCount use
// that effective min ISR (Partition.isUnderMinIsr / isAtMinIsr), so a healthy,
// idle RF=1 topic under a min.insync.replicas=2 default counts at-min, never
// under-min.
func TestUnderMinISRUsesTheEffectiveMinISR(t *testing.T) {
	c := newClusterFn(t, 1, map[string]string{"min.insync.replicas": "2"}, func(cfg *broker.Config) {
		cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	})
	c.ctrl.createTopic("rf1", 1, 1, map[string]string{"min.insync.replicas": "2"})
	if _, err := c.produce("rf1", 0, -1, "a"); err != nil {
		t.Fatalf("acks=all write to a healthy RF=1 partition: %v", err)
	}
	body := scrape(t, c.brokers[1].MetricsAddr())
	under := metricValue(t, body, "tidemark_broker_under_min_isr_partitions")
	at := metricValue(t, body, "tidemark_broker_at_min_isr_partitions")
	if under != 0 || at != 1 {
		t.Fatalf("healthy RF=1 partition with min.insync.replicas=2 (acks=all writes accepted): under_min_isr=%v at_min_isr=%v; want 0 and 1", under, at)
	}
}
