package clustertest

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/testenv"
)

// etcd out for the whole cluster. Kafka's ZooKeeper mode keeps its
// sessions through a ZooKeeper restart, and tidemark's brokers keep their
// leases through an etcd restart: etcd restores them and gives each a whole
// TTL again. While etcd answers nothing the brokers cannot tell whether
// their leases lived, so past the session timeout every leader fences
// itself (DESIGN.md, "The leader fence"); what matters is what happens once
// etcd is back.

// describeAll waits for the active controller to describe topic and
// returns its partitions by number.
func (c *Cluster) describeAll(topic string, timeout time.Duration) map[int32]*adminv1.PartitionDescription {
	c.T.Helper()
	var out map[int32]*adminv1.PartitionDescription
	c.WaitFor(timeout, "the active controller to describe "+topic, func() bool {
		resp, err := c.Admin().DescribeTopics(context.Background(), &adminv1.DescribeTopicsRequest{Topics: []string{topic}})
		if err != nil || len(resp.GetTopics()) == 0 {
			return false
		}
		out = map[int32]*adminv1.PartitionDescription{}
		for _, pd := range resp.GetTopics()[0].GetPartitions() {
			out[pd.GetPartition()] = pd
		}
		return true
	})
	return out
}

// brokerEpochs are the live brokers' epochs as the active controller has them.
func (c *Cluster) brokerEpochs() map[int32]int64 {
	resp, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
	if err != nil {
		return nil
	}
	out := map[int32]int64{}
	for _, b := range resp.GetBrokers() {
		if b.GetAlive() {
			out[b.GetNode().GetId()] = b.GetBrokerEpoch()
		}
	}
	return out
}

// An etcd restart much longer than the brokers' session timeout (half a
// minute). Every broker keeps its registration (same lease, same epoch),
// and once etcd answers again the cluster is as it was within about a
// second: the same leaders in the same leader epochs, whole ISRs, and after
// a quiet moment HW = LEO everywhere. Before, each broker gave its
// registration up after a TTL of silence, revoked the lease etcd had kept
// and registered anew, so the controller saw every broker bounce; and the
// etcd clients' reconnection backoff (gRPC's default, growing to 120 s)
// had them try again 14 s after etcd was back, when the leases etcd had
// restored were gone.
func TestEtcdRestartLeavesTheClusterAsItWas(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: etcd stays down for half a minute")
	}
	// Every node reaches etcd through a bridge. A controller lease longer
	// than the time it takes to elect one shows whether the ended term's
	// lease, which the restart kept, is revoked or waited out.
	// The brokers' session timeout is 4 s: a restored lease must outlive
	// the reconnection (at most a second apart) on a loaded machine.
	const ctrlTTL = 5 * time.Second
	c := Start(t, Options{PausableControllers: true,
		Adjust:           func(cfg *broker.Config) { cfg.SessionTimeout = 4 * time.Second },
		AdjustController: func(cfg *controller.Config) { cfg.SessionTTL = ctrlTTL }})
	const topic, partitions = "er", 3
	c.CreateTopic(topic, partitions, 3, map[string]string{"min.insync.replicas": "2"})
	c.produceEach(topic, partitions, 0, 5)
	before := c.describeAll(topic, 10*time.Second)
	for p, pd := range before {
		c.waitSettled(10*time.Second, topic, p, pd.GetReplicas())
	}
	epochs := c.brokerEpochs()
	if len(epochs) != 3 {
		t.Fatalf("live brokers before the restart: %v", epochs)
	}

	ttl := c.BrokerConfig(1).SessionTimeout
	const down = 30 * time.Second
	t.Logf("etcd down for %s (broker session timeout %s)", down, ttl)
	_, oldEpoch := c.ActiveController()
	c.Etcd.Restart(t, down)
	back := time.Now()
	for id := int32(1); id <= 3; id++ {
		if !c.Broker(id).Fenced() {
			t.Errorf("broker %d unheard by etcd for %s does not fence itself", id, down)
		}
	}

	c.WaitFor(ttl, "every broker acting as leader again", func() bool {
		for id := int32(1); id <= 3; id++ {
			if c.Broker(id).Fenced() {
				return false
			}
		}
		return true
	})
	t.Logf("every broker unfenced %s after etcd was back", time.Since(back).Round(time.Millisecond))
	c.WaitFor(10*time.Second, "an active controller that knows every broker", func() bool { return len(c.brokerEpochs()) == 3 })
	if id, e := c.ActiveController(); id < 0 || e <= oldEpoch {
		t.Fatalf("active controller %d epoch %d after the restart, want a new term after epoch %d", id, e, oldEpoch)
	}
	elected := time.Since(back)
	t.Logf("a controller elected %s after etcd was back", elected.Round(time.Millisecond))
	if elected > ctrlTTL*4/5 {
		t.Errorf("a controller was elected %s after etcd was back: the ended term's lease (TTL %s) was waited out", elected, ctrlTTL)
	}
	if now := c.brokerEpochs(); !maps.Equal(now, epochs) {
		t.Errorf("broker epochs after the restart %v, want the same registrations %v", now, epochs)
	}
	after := c.describeAll(topic, 10*time.Second)
	for p, pd := range before {
		got := after[p]
		if got.GetLeader() != pd.GetLeader() || got.GetLeaderEpoch() != pd.GetLeaderEpoch() {
			t.Errorf("%s-%d after the restart: leader %d epoch %d, want leader %d epoch %d (nothing elected)",
				topic, p, got.GetLeader(), got.GetLeaderEpoch(), pd.GetLeader(), pd.GetLeaderEpoch())
		}
		if !slices.Equal(sorted(got.GetIsr()), sorted(pd.GetIsr())) {
			t.Errorf("%s-%d ISR after the restart %v, want %v", topic, p, got.GetIsr(), pd.GetIsr())
		}
	}
	// A quiet moment, then writes and every replica whole.
	time.Sleep(2 * ttl)
	for p, pd := range after {
		c.waitSettled(10*time.Second, topic, p, pd.GetReplicas())
	}
	c.produceEach(topic, partitions, 5, 5)
	for p, pd := range after {
		c.waitSettled(10*time.Second, topic, p, pd.GetReplicas())
		if got := c.consume(topic, p, 0); len(got) != 10 {
			t.Errorf("%s-%d holds %d records after the restart, want 10: %v", topic, p, len(got), got)
		}
	}
}

// etcd unreachable for every node for longer than the session timeout
// while etcd itself runs on: every lease expires, every broker registers
// anew once etcd is reachable, and the cluster must become whole again
// without a single write: leaders, full ISRs, HW = LEO, and every write
// acknowledged before the outage still there.
func TestEtcdUnreachableForEveryNodeThenBack(t *testing.T) {
	c := Start(t, Options{PausableControllers: true})
	const topic, partitions = "eu", 3
	c.CreateTopic(topic, partitions, 3, map[string]string{"min.insync.replicas": "2"})
	c.produceEach(topic, partitions, 0, 5)
	before := c.describeAll(topic, 10*time.Second)
	epochs := c.brokerEpochs()

	ttl := c.BrokerConfig(1).SessionTimeout
	for _, b := range c.etcdLinks {
		b.Pause()
	}
	for _, b := range c.ctrlEtcd {
		b.Pause()
	}
	time.Sleep(3 * ttl)
	for id := int32(1); id <= 3; id++ {
		if !c.Broker(id).Fenced() {
			t.Errorf("broker %d unheard by etcd for %s does not fence itself", id, 3*ttl)
		}
	}
	for _, b := range c.etcdLinks {
		b.Resume()
	}
	for _, b := range c.ctrlEtcd {
		b.Resume()
	}
	back := time.Now()

	c.WaitFor(ttl+10*time.Second, "every broker registered again", func() bool {
		now := c.brokerEpochs()
		if len(now) != 3 {
			return false
		}
		for id, e := range now {
			if e <= epochs[id] {
				return false
			}
		}
		return true
	})
	after := c.describeAll(topic, 10*time.Second)
	for p := range before {
		c.waitSettled(15*time.Second, topic, p, after[p].GetReplicas())
	}
	t.Logf("whole again %s after etcd was reachable", time.Since(back).Round(time.Millisecond))
	for p := range before {
		if got := c.consume(topic, p, 0); len(got) != 5 {
			t.Errorf("%s-%d holds %d records, want the 5 acknowledged before the outage: %v", topic, p, len(got), got)
		}
	}
	c.produceEach(topic, partitions, 5, 1)
}

func sorted(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
