package quiet

import (
	"context"
	"maps"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/services/topicconfig"
)

// lapseCompacted is the compacted topic of the lease-lapse test.
const lapseCompacted = "lapse-compacted"

// Every lease lapses at once: etcd stops hearing from every broker and
// controller (it runs on, so it expires the brokers' sessions and the
// controller's lease alike) for three times the longer of the two, while
// topics of replication factor 3 hold acknowledged writes (acks=all with
// min.insync.replicas 2, a compacted one, and __consumer_offsets with the
// commits of an idle group). Then etcd is reachable again and nothing is
// produced for as long again. With no write to carry it, the cluster must
// be whole again: one active controller in a new term that every broker
// names, every broker registered anew, every partition led with its full
// ISR and HW = LEO on every replica, the group's commits there and its
// member in its generation (or rejoined and Stable); then an acks=all
// write is acknowledged and readable, and no acknowledged record is lost.
func TestEveryLeaseLapsesAtOnceThenNothingIsProduced(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: etcd unreachable for three lease TTLs, then idle for three more")
	}
	// The controller's lease lapses before the brokers' sessions (2 s)
	// or after them.
	for _, ctrlTTL := range []time.Duration{time.Second, 5 * time.Second} {
		t.Run("controller lease "+ctrlTTL.String(), func(t *testing.T) { everyLeaseLapses(t, ctrlTTL) })
	}
}

func everyLeaseLapses(t *testing.T, ctrlTTL time.Duration) {
	const offsetsPartitions = 3
	c, acked := startQuiet(t, clustertest.Options{PausableControllers: true, BrokerSettings: clustertest.GroupSettings,
		AdjustController: func(cfg *controller.Config) {
			cfg.SessionTTL = ctrlTTL
			cfg.OffsetsTopicNumPartitions = offsetsPartitions
		}}, 3)
	c.CreateTopic(lapseCompacted, 1, 3, compactedTopic(nil))
	kl := newKeyedLog(c, lapseCompacted)
	for _, kv := range [][2]string{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}, {"c", "c1"}, {"b", ""}} {
		kl.put(kv[0], kv[1])
	}
	m, committed := idleMember(c, "lapsers")
	gen := m.Consumer().Generation()
	c.WaitOffsetsWhole(offsetsPartitions)

	epochs := c.BrokerEpochs()
	_, ctlEpoch := c.ActiveController()
	lapse := 3 * max(c.BrokerConfig(1).SessionTimeout, ctrlTTL)
	c.CutEtcdForAll(true)
	time.Sleep(lapse) // past every broker's session and the controller's lease
	for id := int32(1); id <= 3; id++ {
		if !c.Broker(id).Fenced() {
			t.Errorf("broker %d unheard by etcd for %s does not fence itself", id, lapse)
		}
	}
	c.CutEtcdForAll(false)
	time.Sleep(lapse) // quiet: not a write anywhere

	waitOneController(c, 30*time.Second)
	c.WaitFor(30*time.Second, "every broker registered anew", func() bool {
		now := c.BrokerEpochs()
		for id, e := range epochs {
			if now[id] <= e {
				return false
			}
		}
		return len(now) == len(epochs)
	})
	id, epoch := c.ActiveController()
	if epoch <= ctlEpoch {
		t.Errorf("controller %d in office at epoch %d after its lease lapsed, want a term after epoch %d", id, epoch, ctlEpoch)
	}
	t.Logf("controller %d in office at epoch %d (was %d); broker epochs %v (were %v)", id, epoch, ctlEpoch, c.BrokerEpochs(), epochs)
	for _, topic := range []string{quietTopic, lapseCompacted, topicconfig.OffsetsTopic} {
		for p, pd := range c.DescribeAll(topic, 10*time.Second) {
			c.WaitSettled(30*time.Second, topic, p, pd.GetReplicas())
		}
	}
	kl.judgeAll(c.Partition(lapseCompacted, 0).GetReplicas()...)
	kl.judgeConsumer()
	checkIdleMember(c, m, "lapsers", gen, committed)

	checkQuietWhole(c, acked, 30*time.Second)
	kl.put("d", "d1")
	kl.judgeConsumer()
	c.WaitSettled(30*time.Second, lapseCompacted, 0, c.Partition(lapseCompacted, 0).GetReplicas())
	kl.judgeAll(c.Partition(lapseCompacted, 0).GetReplicas()...)
	next := maps.Clone(committed)
	for tp := range next {
		next[tp] = int64(len(acked[tp.Partition]))
	}
	c.WaitFor(30*time.Second, "the member reading and committing the new writes", func() bool {
		return sameCommits(m, next)
	})
}

// idleMember starts a member of group reading quietTopic, waits until it
// has committed the end of every partition and returns it with those
// commits.
func idleMember(c *clustertest.Cluster, group string) (*clustertest.Member, map[client.TopicPartition]int64) {
	c.T.Helper()
	o := clustertest.GroupOpts(group, quietTopic)
	o.SessionTimeout = 3 * time.Second
	m := c.StartMember(o)
	want := map[client.TopicPartition]int64{}
	for p := range int32(quietPartitions) {
		v, _ := c.View(c.Partition(quietTopic, p).GetLeader(), quietTopic, p)
		want[client.TopicPartition{Topic: quietTopic, Partition: p}] = v.LEO
	}
	c.WaitFor(time.Minute, "the member's commits at the end of every partition", func() bool { return sameCommits(m, want) })
	return m, want
}

// sameCommits reports whether the member's group has committed exactly want.
func sameCommits(m *clustertest.Member, want map[client.TopicPartition]int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := m.Consumer().Committed(ctx)
	return err == nil && maps.Equal(got, want)
}

// checkIdleMember checks, without a write, that an idle member's group
// kept its commits and the member: in generation gen, or rejoined in a
// newer one with the group Stable around it alone.
func checkIdleMember(c *clustertest.Cluster, m *clustertest.Member, group string, gen int32, committed map[client.TopicPartition]int64) {
	c.T.Helper()
	c.WaitFor(30*time.Second, "the group's commits as they were", func() bool { return sameCommits(m, committed) })
	c.WaitFor(30*time.Second, group+" Stable with its member", func() bool {
		d := c.DescribeGroup(group)
		g := m.Consumer().Generation()
		return d.GetGroupState() == "Stable" && len(d.GetMembers()) == 1 && d.GetGenerationId() == g &&
			d.GetMembers()[0].GetMemberId() == m.Consumer().MemberID() && g >= gen
	})
	if err := m.Failure(); err != nil {
		c.T.Fatalf("the member of %s failed: %v", group, err)
	}
	if g := m.Consumer().Generation(); g != gen {
		c.T.Logf("the member of %s rejoined: generation %d, was %d", group, g, gen)
	}
}

// waitOneController waits until exactly one controller holds office and
// every broker names it.
func waitOneController(c *clustertest.Cluster, bound time.Duration) {
	c.T.Helper()
	c.WaitFor(bound, "one active controller every broker names", func() bool {
		id, _ := c.ActiveController()
		if id < 0 {
			return false
		}
		if other, _ := c.ActiveOtherThan(id); other >= 0 {
			return false
		}
		for b := int32(1); b <= 3; b++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			md, err := c.BrokerClient(b).Metadata(ctx, &brokerv1.MetadataRequest{})
			cancel()
			if err != nil || md.GetController().GetId() != id {
				return false
			}
		}
		return true
	})
}
