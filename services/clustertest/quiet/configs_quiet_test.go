package quiet

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/kerr"
)

// alterConfig sets (value non-empty) or deletes (value "") one config key
// of a topic (kind TOPIC) or of the cluster-wide broker default (kind
// BROKER, name "").
func alterConfig(c *clustertest.Cluster, kind adminv1.ConfigResourceType, name, key, value string) {
	c.T.Helper()
	op := &adminv1.ConfigOp{Name: key, Value: value, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}
	if value == "" {
		op = &adminv1.ConfigOp{Name: key, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE}
	}
	resp, err := c.Admin().AlterConfigs(context.Background(), &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
		Resource: &adminv1.ConfigResource{Type: kind, Name: name}, Ops: []*adminv1.ConfigOp{op}}}})
	if err != nil {
		c.T.Fatalf("altering %s=%q of %q: %v", key, value, name, err)
	}
	for _, r := range resp.GetResults() {
		if r.GetErrorCode() != 0 {
			c.T.Fatalf("altering %s=%q of %q: %s", key, value, name, r.GetErrorMessage())
		}
	}
}

// Retention lowered on idle topics while a follower is down, one by a
// topic override and one by the cluster-wide default: with nothing
// produced after the change, every replica ends at log start = LEO, the
// one that was down included, and each partition settles.
func TestRetentionLoweredOnIdleTopicsWhileAFollowerIsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for time retention")
	}
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: map[string]string{"log.retention.check.interval.ms": "200", "replica.lag.time.max.ms": "1000"}})
	topics := []string{"override", "bydefault"}
	const n = 4
	for _, name := range topics {
		c.CreateTopic(name, 1, 3, map[string]string{"min.insync.replicas": "2"})
		for i := range n {
			if _, err := c.Produce(context.Background(), name, 0, -1, fmt.Sprintf("v%d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	reps := c.Partition("override", 0).GetReplicas()
	for _, name := range topics {
		c.WaitSettled(15*time.Second, name, 0, c.Partition(name, 0).GetReplicas())
	}
	var down int32 = -1
	for _, id := range reps {
		if id != c.Leader("override", 0) && id != c.Leader("bydefault", 0) {
			down = id
		}
	}
	if down < 0 {
		down = reps[0]
	}
	c.CrashBroker(down)
	time.Sleep(1500 * time.Millisecond) // the records are older than the retention set below
	alterConfig(c, adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, "override", "retention.ms", "1000")
	alterConfig(c, adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, "", "log.retention.ms", "1000")
	c.StartBroker(down)
	for _, name := range topics {
		r := c.Partition(name, 0).GetReplicas()
		waitReplicasAt(c, t, name, 0, r, n, "every replica of "+name+" emptied by retention, with nothing produced")
		c.WaitSettled(20*time.Second, name, 0, r)
	}
}

// min.insync.replicas raised above the ISR of an idle topic refuses the
// next acks=all write with NOT_ENOUGH_REPLICAS, leaving the log alone;
// an acks=1 write is kept below the HW until it is lowered back, which
// commits it with nothing produced; the next acks=all write succeeds, and
// the partition settles once the follower is back.
func TestMinInsyncReplicasChangedOnAnIdleTopic(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	c.CreateTopic("strict", 1, 3, map[string]string{"min.insync.replicas": "2"})
	if _, err := c.Produce(context.Background(), "strict", 0, -1, "first"); err != nil {
		t.Fatal(err)
	}
	reps := c.Partition("strict", 0).GetReplicas()
	c.WaitSettled(15*time.Second, "strict", 0, reps)
	leader := c.Leader("strict", 0)
	var down int32
	for _, id := range reps {
		if id != leader {
			down = id
			break
		}
	}
	c.CrashBroker(down)
	c.WaitFor(15*time.Second, "the follower out of the ISR", func() bool { return len(c.Partition("strict", 0).GetIsr()) == 2 })
	alterConfig(c, adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, "strict", "min.insync.replicas", "3")
	c.WaitFor(15*time.Second, "the leader at min.insync.replicas 3", func() bool { return minISR(c, leader, "strict", 0) == 3 })
	if _, err := c.Produce(context.Background(), "strict", 0, -1, "refused"); kerr.CodeOf(err) != kerr.NotEnoughReplicas {
		t.Fatalf("acks=all with 2 of min.insync.replicas 3 in sync: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	// acks=1 is appended, but the HW waits for min.insync.replicas.
	if _, err := c.Produce(context.Background(), "strict", 0, 1, "held"); err != nil {
		t.Fatalf("acks=1 under min.insync.replicas: %v", err)
	}
	if v, _ := c.View(leader, "strict", 0); v.LEO != 2 || v.HW != 1 {
		t.Fatalf("leader after an acks=1 write under min.insync.replicas: %v, want LEO 2 and HW 1", v)
	}
	alterConfig(c, adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, "strict", "min.insync.replicas", "")
	up := slices.DeleteFunc(slices.Clone(reps), func(id int32) bool { return id == down })
	c.WaitFor(15*time.Second, "HW = LEO = 2 on the running replicas, with nothing produced", func() bool {
		for _, id := range up {
			if v, ok := c.View(id, "strict", 0); !ok || v.HW != 2 || v.LEO != 2 {
				return false
			}
		}
		return true
	})
	c.WaitFor(15*time.Second, "the leader back at min.insync.replicas 1", func() bool { return minISR(c, leader, "strict", 0) == 1 })
	if _, err := c.Produce(context.Background(), "strict", 0, -1, "second"); err != nil {
		t.Fatalf("acks=all once min.insync.replicas is lowered back: %v", err)
	}
	c.StartBroker(down)
	c.WaitSettled(20*time.Second, "strict", 0, reps)
	if logs := c.SameLogs("strict", 0, reps...); !slices.Equal(logs, []string{"first", "held", "second"}) {
		t.Fatalf("replicas hold %v, want [first held second]", logs)
	}
}

// minISR is broker id's min.insync.replicas for topic-p (-1: not hosted).
func minISR(c *clustertest.Cluster, id int32, topic string, p int32) int {
	if b := c.Broker(id); b != nil {
		for _, r := range b.Replicas().Replicas() {
			if tp := r.TP(); tp.Topic == topic && tp.Partition == p {
				return r.Snapshot(time.Now()).MinInsyncReplicas
			}
		}
	}
	return -1
}

// max.compaction.lag.ms lowered on an idle compacted topic whose active
// segment holds every record (segment.ms at its 7-day default): the next
// write rolls that segment once it is older than the lag, as Kafka's
// segment.ms of a compacted log is at most max.compaction.lag.ms, and every
// replica's cleaner then removes the superseded value. Before, the segment
// waited for segment.ms or segment.bytes, and the lag bounded nothing.
func TestMaxCompactionLagLoweredRollsAnIdleCompactedTopicOnTheNextWrite(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: compactedSettings})
	c.CreateTopic("lagged", 1, 3, compactedTopic(nil))
	reps := c.Partition("lagged", 0).GetReplicas()
	w := newKeyedLog(c, "lagged")
	w.put("k", "old")
	w.put("k", "new")
	c.WaitSettled(15*time.Second, "lagged", 0, reps)

	alterConfig(c, adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, "lagged", "max.compaction.lag.ms", "500")
	time.Sleep(700 * time.Millisecond) // the idle active segment is now older than the lag
	w.put("other", "x")
	w.waitCleaned(20*time.Second, 0, 0, reps...)
	c.WaitSettled(20*time.Second, "lagged", 0, reps)
	w.judgeConsumer()
}
