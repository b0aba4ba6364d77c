package quiet

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest"
)

// A compacted partition reassigned onto two brokers that fetched its
// cleaned log, gaps and all, both flushed (flush.ms) but their recovery
// points not yet checkpointed (once a minute, or by their own cleaner's
// next pass), then both killed at once and
// restarted with nothing produced: every acknowledged record Kafka keeps is
// still there, on both replicas alike, with HW = LEO and a full ISR. Before,
// each replica's recovery cut its log at the first gap above its
// checkpointed recovery point, flushed records and all: acknowledged writes
// were lost on every replica.
func TestCompactedReplicasThatFetchedCleanedDataKeepItWhenAllAreKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a compacted log to be cleaned and copied")
	}
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: compactedSettings})
	clustertest.CreateAssigned(t, c, "moved", [][]int32{{1}}, compactedTopic(map[string]string{
		"segment.bytes": "4096", "min.insync.replicas": "1", "flush.ms": "100"}))
	w := newKeyedLog(c, "moved")
	pad := strings.Repeat("v", 200)
	for i := range 120 {
		w.put(fmt.Sprintf("k%d", i%10), fmt.Sprintf("%d-%s", i, pad))
	}
	// Broker 1's cleaner leaves gaps in its sealed segments.
	c.WaitFor(20*time.Second, "broker 1's cleaner to compact moved-0", func() bool {
		recs, _ := w.records(1)
		s, _ := w.stale(recs)
		return len(recs) > 0 && s < 60
	})

	// Their own cleaners do not run (as in the window before a pass comes
	// round): a pass checkpoints the recovery points before its swap.
	moved := []int32{2, 3}
	for _, id := range moved {
		c.CrashBroker(id)
		cfg := c.BrokerConfig(id)
		cfg.Settings = maps.Clone(cfg.Settings)
		cfg.Settings["log.cleaner.enable"] = "false"
		c.SetBrokerConfig(id, cfg)
		c.StartBroker(id)
	}
	// A restarted broker registers once its old lease is gone; until then
	// the controller refuses a target naming it.
	for _, id := range moved {
		c.WaitBrokerAlive(id)
	}
	clustertest.Reassign(t, c, "moved", map[int32][]int32{0: moved})
	c.WaitFor(30*time.Second, "moved-0 to move to brokers 2 and 3", func() bool { return clustertest.SettledOn(c, "moved", 0, moved) })
	c.WaitSettled(15*time.Second, "moved", 0, moved)
	w.judgeAll(moved...)
	leo := map[int32]int64{}
	c.WaitFor(15*time.Second, "brokers 2 and 3 to flush what they fetched", func() bool {
		for _, id := range moved {
			for _, r := range c.Broker(id).Replicas().Replicas() {
				if tp := r.TP(); tp.Topic == "moved" {
					l, ok := r.Log().(interface {
						RecoveryPoint() int64
						LogEndOffset() int64
					})
					if !ok {
						t.Fatalf("broker %d's log of moved-0 tells no recovery point", id)
					}
					leo[id] = l.LogEndOffset()
					if l.RecoveryPoint() != l.LogEndOffset() {
						return false
					}
				}
			}
		}
		return len(leo) == len(moved)
	})
	before := map[int32][]keyed{}
	for _, id := range moved {
		before[id], _ = w.records(id)
		if len(before[id]) == int(leo[id]) {
			t.Fatalf("setup: broker %d's copy has no gap: %v", id, before[id])
		}
	}

	killAllAndCheckKept(t, c, w, moved, before, leo)
}

// TestCompactedReplicasThatFetchedCleanedDataKeepItWhenAllAreKilled with
// Kafka's default flush settings (no flush.ms, no flush.messages) and
// segments the copies never roll, so nothing but the follower's own flush
// of data after a gap, before its next fetch, makes what it fetched
// durable: both replicas are killed at once as soon as the partition has
// settled on them. Every acknowledged record Kafka keeps is still there,
// on both alike, with HW = LEO and a full ISR. Before, nothing flushed the
// copies, and recovery cut each at its first gap: acknowledged writes were
// lost on every replica.
func TestCompactedReplicasKeepCleanedDataKilledWithoutAFlush(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a compacted log to be cleaned and copied")
	}
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: compactedSettings})
	clustertest.CreateAssigned(t, c, "moved", [][]int32{{1}}, compactedTopic(map[string]string{
		"segment.bytes": "4096", "min.insync.replicas": "1"}))
	w := newKeyedLog(c, "moved")
	pad := strings.Repeat("v", 200)
	for i := range 120 {
		w.put(fmt.Sprintf("k%d", i%10), fmt.Sprintf("%d-%s", i, pad))
	}
	c.WaitFor(20*time.Second, "broker 1's cleaner to compact moved-0", func() bool {
		recs, _ := w.records(1)
		s, _ := w.stale(recs)
		return len(recs) > 0 && s < 60
	})
	// The copies take it all in one segment: no roll flushes it.
	alterConfig(c, adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, "moved", "segment.bytes", "1048576")

	moved := []int32{2, 3}
	for _, id := range moved {
		c.CrashBroker(id)
		cfg := c.BrokerConfig(id)
		cfg.Settings = maps.Clone(cfg.Settings)
		cfg.Settings["log.cleaner.enable"] = "false"
		c.SetBrokerConfig(id, cfg)
		c.StartBroker(id)
	}
	// A restarted broker registers once its old lease is gone; until then
	// the controller refuses a target naming it.
	for _, id := range moved {
		c.WaitBrokerAlive(id)
	}
	clustertest.Reassign(t, c, "moved", map[int32][]int32{0: moved})
	c.WaitFor(30*time.Second, "moved-0 to move to brokers 2 and 3", func() bool { return clustertest.SettledOn(c, "moved", 0, moved) })
	c.WaitSettled(15*time.Second, "moved", 0, moved)
	w.judgeAll(moved...)
	before, leo := map[int32][]keyed{}, map[int32]int64{}
	for _, id := range moved {
		before[id], _ = w.records(id)
		_, leo[id], _ = c.Broker(id).ReplicaOffsets("moved", 0)
		if len(before[id]) == int(leo[id]) {
			t.Fatalf("setup: broker %d's copy has no gap: %v", id, before[id])
		}
	}

	killAllAndCheckKept(t, c, w, moved, before, leo)
}

// killAllAndCheckKept kills every replica of moved-0 at once, restarts them
// and checks each holds what it held before (before, leo), with HW = LEO
// and a full ISR, and that no acknowledged record Kafka keeps was lost.
func killAllAndCheckKept(t *testing.T, c *clustertest.Cluster, w *keyedLog, moved []int32, before map[int32][]keyed, leo map[int32]int64) {
	t.Helper()
	for _, id := range moved {
		c.CrashBroker(id)
	}
	for _, id := range moved {
		c.StartBroker(id)
	}
	c.WaitSettled(30*time.Second, "moved", 0, moved)
	w.judgeAll(moved...)
	for _, id := range moved {
		after, _ := w.records(id)
		if !slices.Equal(after, before[id]) {
			t.Fatalf("broker %d holds %v after the restart, %v before", id, after, before[id])
		}
		hw, end, _ := c.Broker(id).ReplicaOffsets("moved", 0)
		if end != leo[id] || hw != end {
			t.Fatalf("broker %d: HW %d, LEO %d after the restart, LEO %d before", id, hw, end, leo[id])
		}
	}
	w.judgeConsumer()
}
