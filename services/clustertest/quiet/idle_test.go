package quiet

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
)

// waitReplicasAt waits until every replica of topic-p in reps holds
// exactly [at, at): log start and LEO both at, as retention leaves a log it
// emptied; it logs what each replica held if the test fails.
func waitReplicasAt(c *clustertest.Cluster, t *testing.T, topic string, p int32, reps []int32, at int64, what string) {
	t.Helper()
	var seen string
	defer func() {
		if t.Failed() {
			t.Logf("replicas last seen: %s", seen)
		}
	}()
	c.WaitFor(30*time.Second, what, func() bool {
		seen = ""
		ok := true
		for _, id := range reps {
			v, hosted := c.View(id, topic, p)
			seen += fmt.Sprintf("broker %d: %v; ", id, v)
			if !hosted || v.LogStart != at || v.LEO != at {
				ok = false
			}
		}
		return ok
	})
}

// runRetention applies retention to broker id's replica of topic-p below
// its HW, as the log manager's periodic check does (every 5 minutes, too
// slow for a test).
func runRetention(c *clustertest.Cluster, id int32, topic string, p int32) int {
	c.T.Helper()
	b := c.Broker(id)
	if b == nil {
		return 0
	}
	for _, r := range b.Replicas().Replicas() {
		if tp := r.TP(); tp.Topic == topic && tp.Partition == p {
			lg := r.Log().(interface{ DeleteOldSegments(hw int64) (int, error) }) // the log store's own retention pass
			n, err := lg.DeleteOldSegments(r.Snapshot(time.Now()).HighWatermark)
			if err != nil {
				c.T.Fatalf("retention on broker %d: %v", id, err)
			}
			return n
		}
	}
	return 0
}

// A preferred election on an idle partition. Broker 2 leads epoch 1 after
// the leader's crash and writes nothing in it, so its epoch cache ends with
// (1, LEO). When the preferred replica takes over (epoch 2), broker 2's
// fetches with last fetched epoch 1 draw a divergence answer that asks it
// to truncate to its own LEO. That must still drop the empty epoch, or it
// asks again for ever, never fetches, and the new leader's HW waits for it
// while nothing is produced: consumers see nothing.
func TestPreferredElectionOnIdlePartitionSettles(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.CreateTopic("idle", 1, 3, map[string]string{"min.insync.replicas": "2"})
	reps := c.Partition("idle", 0).GetReplicas()
	preferred, next := reps[0], reps[1]
	for _, v := range []string{"r0", "r1"} {
		if _, err := c.Produce(context.Background(), "idle", 0, -1, v); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	c.CrashBroker(preferred)
	c.WaitFor(10*time.Second, "the next replica to lead", func() bool {
		return c.Partition("idle", 0).GetLeader() == next && c.Leads(next, "idle", 0)
	})
	c.StartBroker(preferred)
	c.WaitFor(20*time.Second, "the old leader back in the ISR", func() bool {
		return len(c.Partition("idle", 0).GetIsr()) == 3
	})
	resp, err := c.Admin().ElectLeaders(context.Background(), &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions:   []*commonv1.TopicPartition{{Topic: "idle", Partition: 0}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("preferred election: %v %v", resp, err)
	}
	c.WaitFor(10*time.Second, "the preferred replica to lead", func() bool {
		return c.Partition("idle", 0).GetLeader() == preferred && c.Leads(preferred, "idle", 0)
	})

	// Nothing is produced from here on.
	c.WaitSettled(15*time.Second, "idle", 0, reps)
	if v, _ := c.View(next, "idle", 0); v.LatestEpoch == 1 {
		t.Fatalf("broker %d still holds the empty epoch 1 it led: %s", next, v.Epochs)
	}
	if got := c.Consume("idle", 0, 0); !slices.Equal(got, []string{"r0", "r1"}) {
		t.Fatalf("consumer read %v, want [r0 r1]", got)
	}
}

// Time retention on an idle topic after a leadership change. The new
// leader's epoch cache is trimmed from the start to its own epoch, which
// no follower has (nothing was written in it); the followers' last epoch is
// older than the leader's whole cache. Kafka's endOffsetFor answers such an
// epoch with the start of the leader's first one, and the followers fetch
// on. Refusing it (OFFSET_OUT_OF_RANGE, "resume at the LEO") left them
// asking for good: a restarted follower (its HW checkpointed at its LEO, so
// falling back to the HW cuts nothing) never rejoined the ISR, and with min
// ISR 2 every acks=all write was refused.
func TestRetentionOnIdleTopicKeepsFollowersInSync(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.CreateTopic("ret", 1, 3, map[string]string{"min.insync.replicas": "2", "retention.ms": "1000"})
	reps := c.Partition("ret", 0).GetReplicas()
	old, leader, follower := reps[0], reps[1], reps[2]
	for _, v := range []string{"r0", "r1"} {
		if _, err := c.Produce(context.Background(), "ret", 0, -1, v); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	c.WaitSettled(10*time.Second, "ret", 0, reps)
	// A leadership change without writes: the leader's controlled shutdown.
	if err := c.StopBroker(old); err != nil {
		t.Fatalf("stop broker %d: %v", old, err)
	}
	c.WaitFor(10*time.Second, "a new leader", func() bool {
		return c.Partition("ret", 0).GetLeader() == leader && c.Leads(leader, "ret", 0)
	})
	// Retention deletes every segment once the records are older than
	// retention.ms; the leader's cache keeps only its own epoch.
	var lv clustertest.ReplicaView
	defer func() {
		if t.Failed() {
			t.Logf("leader %d's replica after retention: %v", leader, lv)
		}
	}()
	c.WaitFor(10*time.Second, "retention to delete the leader's records", func() bool {
		runRetention(c, leader, "ret", 0)
		runRetention(c, follower, "ret", 0)
		lv, _ = c.View(leader, "ret", 0)
		return lv.LogStart == 2
	})
	fv, _ := c.View(follower, "ret", 0)
	if !lv.EpochsPresent || !fv.EpochsPresent || fv.LatestEpoch >= lv.FirstEpoch {
		t.Fatalf("setup: want the follower's last epoch older than the leader's whole cache; leader %s, follower %s", lv.Epochs, fv.Epochs)
	}

	// Quiet: both followers restart with their old epoch and must rejoin.
	c.StartBroker(old)
	if err := c.StopBroker(follower); err != nil {
		t.Fatalf("stop broker %d: %v", follower, err)
	}
	c.StartBroker(follower)
	c.WaitSettled(20*time.Second, "ret", 0, reps)
	if _, err := c.Produce(context.Background(), "ret", 0, -1, "r2"); err != nil {
		t.Fatalf("acks=all produce after retention: %v", err)
	}
	if got := c.SameLogs("ret", 0, reps...); !slices.Equal(got, []string{"r2"}) {
		t.Fatalf("replicas hold %v, want [r2] (r0, r1 deleted by retention)", got)
	}
	if got := c.Consume("ret", 0, 2); !slices.Equal(got, []string{"r2"}) {
		t.Fatalf("consumer read %v, want [r2]", got)
	}
}

// followerFetches reads, from broker id's /metrics, how many follower
// fetches it has served as a leader.
func followerFetches(c *clustertest.Cluster, id int32) int64 {
	return int64(c.Metric(id, `tidemark_broker_fetch_latency_seconds_count{kind="follower"}`))
}

// A follower whose truncation cannot make progress gets the same divergence
// answer on every fetch. It must back off between them, not ask again at
// once: spinning burns both brokers' CPU, and every such answer also ends
// the leader's long poll for all the partitions of that fetch. Broker 2
// leads epoch 1 without writing, then its log fails (no truncation can
// succeed) before the preferred replica takes over.
func TestFollowerWithoutTruncationProgressBacksOff(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Adjust: func(cfg *broker.Config) { cfg.Telemetry.MetricsListen = "127.0.0.1:0" }})
	c.CreateTopic("stuck", 1, 3, map[string]string{"min.insync.replicas": "2"})
	reps := c.Partition("stuck", 0).GetReplicas()
	preferred, next := reps[0], reps[1]
	for _, v := range []string{"r0", "r1"} {
		if _, err := c.Produce(context.Background(), "stuck", 0, -1, v); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	c.CrashBroker(preferred)
	c.WaitFor(10*time.Second, "the next replica to lead", func() bool {
		return c.Partition("stuck", 0).GetLeader() == next && c.Leads(next, "stuck", 0)
	})
	c.StartBroker(preferred)
	c.WaitFor(20*time.Second, "the old leader back in the ISR", func() bool {
		return len(c.Partition("stuck", 0).GetIsr()) == 3
	})
	for _, r := range c.Broker(next).Replicas().Replicas() {
		if r.TP().Topic == "stuck" {
			r.Log().(interface{ Abandon() }).Abandon() // every later write, truncations included, fails
		}
	}
	resp, err := c.Admin().ElectLeaders(context.Background(), &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions:   []*commonv1.TopicPartition{{Topic: "stuck", Partition: 0}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("preferred election: %v %v", resp, err)
	}
	c.WaitFor(10*time.Second, "the preferred replica to lead", func() bool {
		return c.Partition("stuck", 0).GetLeader() == preferred && c.Leads(preferred, "stuck", 0)
	})
	time.Sleep(time.Second) // past the first answers, which come at once
	const window = 3 * time.Second
	before := followerFetches(c, preferred)
	time.Sleep(window)
	n := followerFetches(c, preferred) - before
	// The healthy follower long-polls (500 ms), the stuck one waits a
	// backoff (1 s) between answers: about ten fetches. A spinning
	// follower makes thousands.
	if n > 40 {
		t.Fatalf("leader served %d follower fetches in %s: the stuck follower does not back off", n, window)
	}
	t.Logf("leader served %d follower fetches in %s", n, window)
}
