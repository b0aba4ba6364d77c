package clustertest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/client"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/testenv"
)

// etcd out for the whole cluster. Kafka's ZooKeeper mode keeps its
// sessions through a ZooKeeper restart, and tidemark's brokers keep their
// leases through an etcd restart: etcd restores them and gives each a whole
// TTL again. While etcd answers nothing the brokers cannot tell whether
// their leases lived, so past the session timeout every leader fences
// itself (DESIGN.md, "The leader fence"); what matters is what happens once
// etcd is back.

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
	c.ProduceEach(topic, partitions, 0, 5)
	before := c.DescribeAll(topic, 10*time.Second)
	for p, pd := range before {
		c.WaitSettled(10*time.Second, topic, p, pd.GetReplicas())
	}
	epochs := c.BrokerEpochs()
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
	c.WaitFor(10*time.Second, "an active controller that knows every broker", func() bool { return len(c.BrokerEpochs()) == 3 })
	if id, e := c.ActiveController(); id < 0 || e <= oldEpoch {
		t.Fatalf("active controller %d epoch %d after the restart, want a new term after epoch %d", id, e, oldEpoch)
	}
	elected := time.Since(back)
	t.Logf("a controller elected %s after etcd was back", elected.Round(time.Millisecond))
	if elected > ctrlTTL*4/5 {
		t.Errorf("a controller was elected %s after etcd was back: the ended term's lease (TTL %s) was waited out", elected, ctrlTTL)
	}
	if now := c.BrokerEpochs(); !maps.Equal(now, epochs) {
		t.Errorf("broker epochs after the restart %v, want the same registrations %v", now, epochs)
	}
	after := c.DescribeAll(topic, 10*time.Second)
	for p, pd := range before {
		got := after[p]
		if got.GetLeader() != pd.GetLeader() || got.GetLeaderEpoch() != pd.GetLeaderEpoch() {
			t.Errorf("%s-%d after the restart: leader %d epoch %d, want leader %d epoch %d (nothing elected)",
				topic, p, got.GetLeader(), got.GetLeaderEpoch(), pd.GetLeader(), pd.GetLeaderEpoch())
		}
		if !slices.Equal(SortedIDs(got.GetIsr()), SortedIDs(pd.GetIsr())) {
			t.Errorf("%s-%d ISR after the restart %v, want %v", topic, p, got.GetIsr(), pd.GetIsr())
		}
	}
	// A quiet moment, then writes and every replica whole.
	time.Sleep(2 * ttl)
	for p, pd := range after {
		c.WaitSettled(10*time.Second, topic, p, pd.GetReplicas())
	}
	c.ProduceEach(topic, partitions, 5, 5)
	for p, pd := range after {
		c.WaitSettled(10*time.Second, topic, p, pd.GetReplicas())
		if got := c.Consume(topic, p, 0); len(got) != 10 {
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
	c.ProduceEach(topic, partitions, 0, 5)
	before := c.DescribeAll(topic, 10*time.Second)
	epochs := c.BrokerEpochs()

	ttl := c.BrokerConfig(1).SessionTimeout
	c.CutEtcdForAll(true)
	time.Sleep(3 * ttl)
	for id := int32(1); id <= 3; id++ {
		if !c.Broker(id).Fenced() {
			t.Errorf("broker %d unheard by etcd for %s does not fence itself", id, 3*ttl)
		}
	}
	c.CutEtcdForAll(false)
	back := time.Now()

	c.WaitFor(ttl+10*time.Second, "every broker registered again", func() bool {
		now := c.BrokerEpochs()
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
	after := c.DescribeAll(topic, 10*time.Second)
	for p := range before {
		c.WaitSettled(15*time.Second, topic, p, after[p].GetReplicas())
	}
	t.Logf("whole again %s after etcd was reachable", time.Since(back).Round(time.Millisecond))
	for p := range before {
		if got := c.Consume(topic, p, 0); len(got) != 5 {
			t.Errorf("%s-%d holds %d records, want the 5 acknowledged before the outage: %v", topic, p, len(got), got)
		}
	}
	c.ProduceEach(topic, partitions, 5, 1)
}

// etcd unreachable for every node, longer than the session timeout. As in
// Kafka's ZooKeeper mode the data plane goes on for acks=all: nothing can
// be elected, so each leader's in-sync followers keep fetching from it and
// vouch for it (DESIGN.md, "The leader fence"), while acks=1 writes, which
// no follower witnesses, are refused. Consumers read, and a client started
// during the outage finds the leaders and writes through them with an
// idempotent producer (each broker holds producer ids fetched ahead). Once etcd is
// reachable every lease has expired; the brokers register again, and every
// write acknowledged during the outage is on every replica.
func TestAcksAllWritesGoOnWhileEtcdIsUnreachable(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: etcd stays unreachable for three session timeouts")
	}
	c := Start(t, Options{PausableControllers: true})
	const topic, partitions = "ea", 3
	c.CreateTopic(topic, partitions, 3, map[string]string{"min.insync.replicas": "2"})
	c.ProduceEach(topic, partitions, 0, 5)
	before := c.DescribeAll(topic, 10*time.Second)
	for p, pd := range before {
		c.WaitSettled(10*time.Second, topic, p, pd.GetReplicas())
	}

	c.WaitFor(10*time.Second, "every broker holding producer ids fetched ahead", func() bool {
		for id := int32(1); id <= 3; id++ {
			if c.Broker(id).ProducerIDsHeld() == 0 {
				return false
			}
		}
		return true
	})

	ttl := c.BrokerConfig(1).SessionTimeout
	c.CutEtcdForAll(true)
	cut := time.Now()
	c.waitEveryBrokerFenced(2 * ttl)

	want := map[int32][]string{}
	for p, pd := range before {
		for i := range 5 {
			want[p] = append(want[p], fmt.Sprintf("%s-%d-%d", topic, p, i))
		}
		leader := pd.GetLeader()
		for i := range 10 {
			v := fmt.Sprintf("outage-%d-%d", p, i)
			if _, err := c.produceTo(leader, topic, p, -1, v); err != nil {
				t.Fatalf("acks=all write %d to %s-%d's leader %d with etcd unreachable: %v", i, topic, p, leader, err)
			}
			want[p] = append(want[p], v)
		}
		_, err := c.produceTo(leader, topic, p, 1, fmt.Sprintf("acks1-%d", p))
		if kerr.CodeOf(err) != kerr.NotLeaderOrFollower || !strings.Contains(err.Error(), "fenced") {
			t.Errorf("acks=1 write to %s-%d's fenced leader: %v, want NOT_LEADER_OR_FOLLOWER naming the fence", topic, p, err)
		}
		resp, err := c.BrokerClient(leader).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: topic, Partition: p, CurrentLeaderEpoch: -1})
		if err != nil || len(resp.GetRecords()) != len(want[p]) {
			t.Errorf("consumer fetch from %s-%d's leader with etcd unreachable: %d records, err %v; want %d", topic, p, len(resp.GetRecords()), err, len(want[p]))
		}
	}
	// A client that starts now bootstraps from the fenced brokers and
	// writes through an idempotent acks=all producer: its producer id comes
	// from the block its broker fetched ahead.
	pr, err := client.NewProducer(c.Client(), client.ProducerOptions{Acks: client.AcksAll, Idempotence: client.IdempotenceOn})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close(context.Background())
	for p := range int32(partitions) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v := fmt.Sprintf("new-client-%d", p)
		_, err := pr.Produce(ctx, client.Record{Topic: topic, Partition: p, ManualPartition: true, Value: []byte(v)})
		cancel()
		if err != nil {
			t.Fatalf("a client started with etcd unreachable, acks=all to %s-%d: %v", topic, p, err)
		}
		want[p] = append(want[p], v)
	}
	t.Logf("every write went through %s after the cut (session timeout %s)", time.Since(cut).Round(time.Millisecond), ttl)
	time.Sleep(time.Until(cut.Add(3 * ttl)))

	c.CutEtcdForAll(false)
	back := time.Now()
	after := c.DescribeAll(topic, 15*time.Second)
	for p := range before {
		c.WaitSettled(20*time.Second, topic, p, after[p].GetReplicas())
	}
	t.Logf("whole again %s after etcd was reachable", time.Since(back).Round(time.Millisecond))
	for p := range before {
		after = c.DescribeAll(topic, 10*time.Second)
		for _, id := range after[p].GetReplicas() {
			if got := c.Values(id, topic, p); !slices.Equal(got, want[p]) {
				t.Errorf("%s-%d replica %d holds %v, want %v", topic, p, id, got, want[p])
			}
		}
	}
	c.ProduceEach(topic, partitions, 5, 1)
}

// produceTo sends one record straight to broker id.
func (c *Cluster) produceTo(id int32, topic string, p int32, acks int32, value string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.BrokerClient(id).Produce(ctx, &brokerv1.ProduceRequest{Topic: topic, Partition: p, Acks: acks, TimeoutMs: 5000,
		Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: Record(value)}}})
	if err != nil {
		return 0, kerr.FromStatus(err)
	}
	return resp.GetBaseOffset(), nil
}

// A consumer group through an outage of etcd for every node: the
// coordinator's writes are acks=all, so where its offsets partition's
// followers vouch for its fenced leader it goes on: heartbeats, commits
// and offset fetches answer, and what was committed during the outage is
// still there once the brokers registered again.
func TestGroupCommitsGoOnWhileEtcdIsUnreachable(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: etcd stays unreachable for three session timeouts")
	}
	c := Start(t, Options{Brokers: 3, BrokerSettings: GroupSettings, AdjustController: OffsetsPartitions(3), PausableControllers: true})
	c.CreateTopic("orders", 3, 3, nil)
	g := Groups{c}
	j := g.Join("ledger", "", 30*time.Second)
	g.SyncAlone("ledger", j, "")
	want := map[int32]int64{0: 1, 1: 2, 2: 3}
	if err := g.Commit("ledger", j.GetGenerationId(), j.GetMemberId(), "", want); err != nil {
		t.Fatalf("commit: %v", err)
	}

	ttl := c.BrokerConfig(1).SessionTimeout
	c.CutEtcdForAll(true)
	cut := time.Now()
	c.waitEveryBrokerFenced(2 * ttl)
	// Well past the fence, so the coordinators have looked again at what
	// they may lead.
	time.Sleep(time.Until(cut.Add(2 * ttl)))
	if err := g.Heartbeat("ledger", j.GetGenerationId(), j.GetMemberId(), ""); err != nil {
		t.Fatalf("heartbeat with etcd unreachable: %v", err)
	}
	want = map[int32]int64{0: 11, 1: 12, 2: 13}
	if err := g.Commit("ledger", j.GetGenerationId(), j.GetMemberId(), "", want); err != nil {
		t.Fatalf("commit with etcd unreachable: %v", err)
	}
	if got := g.Fetch("ledger"); !SameOffsets(got, want) {
		t.Fatalf("fetched %v with etcd unreachable, want %v", got, want)
	}
	t.Logf("heartbeat, commit and fetch answered %s after the cut (session timeout %s)", time.Since(cut).Round(time.Millisecond), ttl)
	time.Sleep(time.Until(cut.Add(3 * ttl)))
	c.CutEtcdForAll(false)
	if got := g.Fetch("ledger"); !SameOffsets(got, want) {
		t.Fatalf("fetched %v once etcd was back, want the %v committed during the outage", got, want)
	}
}

// waitEveryBrokerFenced waits until every broker reports its lease fence up.
func (c *Cluster) waitEveryBrokerFenced(timeout time.Duration) {
	c.T.Helper()
	c.WaitFor(timeout, "every broker fenced by etcd's silence", func() bool {
		for id := int32(1); id <= 3; id++ {
			if !c.Broker(id).Fenced() {
				return false
			}
		}
		return true
	})
}
