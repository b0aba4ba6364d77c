package quiet

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/testenv"
)

// Restarts in quick succession while nothing is produced. Each test writes
// a few acks=all records, lets faults follow one another without waiting
// for the cluster to heal in between, and then, still without a write,
// expects every partition whole again (checkQuietWhole).

// quietTopic is the tests' topic: one partition led by each broker's
// preferred replica, acks=all writes that need two replicas.
const quietTopic, quietPartitions = "qr", 3

// startQuiet starts a cluster with quietTopic and writes n acks=all records
// to each partition; it returns the records by partition.
func startQuiet(t *testing.T, o clustertest.Options, n int) (*clustertest.Cluster, map[int32][]string) {
	t.Helper()
	c := clustertest.Start(t, o)
	c.CreateTopic(quietTopic, quietPartitions, 3, map[string]string{"min.insync.replicas": "2"})
	c.ProduceEach(quietTopic, quietPartitions, 0, n)
	acked := map[int32][]string{}
	for p := range int32(quietPartitions) {
		for i := range n {
			acked[p] = append(acked[p], fmt.Sprintf("%s-%d-%d", quietTopic, p, i))
		}
		c.WaitSettled(10*time.Second, quietTopic, p, c.Partition(quietTopic, p).GetReplicas())
	}
	return c, acked
}

// checkQuietWhole checks, without a write, that every partition has a
// leader, a full ISR and HW = LEO on identical replicas holding every
// acknowledged record; then that a new acks=all write to each is
// acknowledged and readable from the HW it found. It adds the new writes
// to acked.
func checkQuietWhole(c *clustertest.Cluster, acked map[int32][]string, bound time.Duration) {
	c.T.Helper()
	described := c.DescribeAll(quietTopic, bound) // once a controller is in office
	for p := range int32(quietPartitions) {
		replicas := described[p].GetReplicas()
		c.WaitSettled(bound, quietTopic, p, replicas)
		logs := c.SameLogs(quietTopic, p, replicas...)
		clustertest.AssertAllPresent(c.T, acked[p], logs)
		hw := int64(len(logs))
		v := fmt.Sprintf("%s-%d-after-%d", quietTopic, p, hw)
		var err error
		for range 50 { // a leadership moving (the automatic rebalance) answers retriably
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = c.Produce(ctx, quietTopic, p, -1, v)
			cancel()
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			c.T.Fatalf("acks=all write to %s-%d after the restarts: %v", quietTopic, p, err)
		}
		acked[p] = append(acked[p], v)
		c.WaitFor(10*time.Second, fmt.Sprintf("the new write readable from %s-%d's HW", quietTopic, p), func() bool {
			got := c.Consume(quietTopic, p, hw)
			return len(got) >= 1 && got[0] == v
		})
		c.WaitSettled(bound, quietTopic, p, replicas)
	}
}

// A leader stopped gracefully and started again at once, twice in a row
// with nothing written: the second controlled shutdown arrives while the
// controller may still be bringing the first return into the ISR.
func TestQuietGracefulRestartsInARow(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: restarts three brokers' worth of a cluster")
	}
	c, acked := startQuiet(t, clustertest.Options{}, 3)
	leader := c.Partition(quietTopic, 0).GetLeader()
	for range 2 {
		if err := c.StopBroker(leader); err != nil {
			t.Fatalf("graceful stop of broker %d: %v", leader, err)
		}
		c.StartBroker(leader)
	}
	checkQuietWhole(c, acked, 20*time.Second)
}

// A leader of idle partitions killed and started again twice while the
// active controller hears nothing from etcd (its link stalled, well within
// its lease): when it hears again, the second registration comes while it
// is still handling the first, whose lease is already gone. Nothing
// written; the preferred leaderships come back with the automatic
// rebalance.
func TestQuietCrashRestartsUnseenByTheController(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: waits out broker leases")
	}
	c, acked := startQuiet(t, clustertest.Options{PausableControllers: true,
		AdjustController: func(cfg *controller.Config) {
			cfg.SessionTTL = 15 * time.Second // outlives the stalled link
			cfg.AutoLeaderRebalance, cfg.LeaderImbalanceCheckInterval = true, time.Second
		}}, 3)
	active, epoch := c.ActiveController()
	leader := c.Partition(quietTopic, 0).GetLeader()
	c.ControllerEtcdLink(active).Pause()
	for range 2 {
		c.CrashBroker(leader)
		c.StartBroker(leader) // returns once registered anew
	}
	c.ControllerEtcdLink(active).Resume()
	checkQuietWhole(c, acked, 20*time.Second)
	waitPreferredLeaders(c, 20*time.Second)
	if id, e := c.ActiveController(); id != active || e != epoch {
		t.Errorf("controller %d epoch %d after the stall, want %d epoch %d still in office", id, e, active, epoch)
	}
}

// waitPreferredLeaders waits until every partition of quietTopic is led by
// its preferred replica, acting as leader.
func waitPreferredLeaders(c *clustertest.Cluster, timeout time.Duration) {
	c.T.Helper()
	c.WaitFor(timeout, "every partition led by its preferred replica", func() bool {
		for p := range int32(quietPartitions) {
			pd := c.Partition(quietTopic, p)
			if len(pd.GetReplicas()) == 0 || pd.GetLeader() != pd.GetReplicas()[0] || !c.Leads(pd.GetLeader(), quietTopic, p) {
				return false
			}
		}
		return true
	})
}

// Every broker stopped gracefully and started again at once, one after the
// other without waiting for the ISRs to heal in between, nothing written:
// the last broker may be the last ISR member of a partition and take it
// offline. Every partition must come back whole, and the automatic
// rebalance must hand each back to its preferred replica.
func TestQuietRollingRestartInQuickSuccession(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: restarts every broker of a cluster")
	}
	c, acked := startQuiet(t, clustertest.Options{
		AdjustController: func(cfg *controller.Config) {
			cfg.AutoLeaderRebalance, cfg.LeaderImbalanceCheckInterval = true, time.Second
		},
	}, 3)
	for id := int32(1); id <= 3; id++ {
		if err := c.StopBroker(id); err != nil {
			t.Fatalf("graceful stop of broker %d: %v", id, err)
		}
		c.StartBroker(id)
	}
	checkQuietWhole(c, acked, 20*time.Second)
	waitPreferredLeaders(c, 20*time.Second)
	checkQuietWhole(c, acked, 20*time.Second)
}

// The active controller killed, the standby taking office and the first
// started again at once; then the new active killed too; nothing written.
// controller_epoch only rises, every broker names the newest controller,
// and every partition is whole again.
func TestQuietControllerKilledTwiceInARow(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: waits out two controller leases")
	}
	c, acked := startQuiet(t, clustertest.Options{Controllers: 3, PausableControllers: true}, 3)
	first, epoch := c.ActiveController()
	second, secondEpoch := c.KillController(first, epoch)
	third, thirdEpoch := c.KillController(second, secondEpoch)
	t.Logf("controller %d (epoch %d), then %d (epoch %d), then %d (epoch %d)", first, epoch, second, secondEpoch, third, thirdEpoch)
	c.WaitFor(15*time.Second, "every broker naming the newest controller", func() bool {
		id, e := c.ActiveController()
		if id < 0 || e < thirdEpoch {
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
	if id, e := c.ActiveController(); e < thirdEpoch {
		t.Fatalf("controller %d in office with epoch %d, below %d", id, e, thirdEpoch)
	}
	checkQuietWhole(c, acked, 20*time.Second)
	// The newest controller still elects: a leader's crash moves it.
	leader := c.Partition(quietTopic, 0).GetLeader()
	c.CrashBroker(leader)
	c.WaitFor(15*time.Second, "an election by the newest controller", func() bool {
		l := c.Partition(quietTopic, 0).GetLeader()
		return l >= 0 && l != leader && c.Leads(l, quietTopic, 0)
	})
	c.StartBroker(leader)
	checkQuietWhole(c, acked, 20*time.Second)
}

// etcd stopped for a few seconds (longer than the brokers' session
// timeout) and started again while everything is idle, then at once
// stopped and started again: every broker keeps or regains its
// registration and every partition is whole again, its ISR as before.
func TestQuietEtcdStoppedTwiceInARow(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: etcd stays down for seconds")
	}
	c, acked := startQuiet(t, clustertest.Options{}, 3)
	before := c.DescribeAll(quietTopic, 10*time.Second)
	c.Etcd.Restart(t, 3*time.Second)
	c.Etcd.Restart(t, time.Second) // again before anyone has settled
	c.WaitFor(15*time.Second, "an active controller that knows every broker", func() bool { return len(c.BrokerEpochs()) == 3 })
	checkQuietWhole(c, acked, 20*time.Second)
	after := c.DescribeAll(quietTopic, 10*time.Second)
	for p, pd := range before {
		if !slices.Equal(clustertest.SortedIDs(after[p].GetIsr()), clustertest.SortedIDs(pd.GetIsr())) {
			t.Errorf("%s-%d ISR %v after the etcd stop, want %v", quietTopic, p, after[p].GetIsr(), pd.GetIsr())
		}
	}
}

// Every broker stopped gracefully, one after the other, so that each
// partition is left offline with its last ISR member; the others start
// again first and must not lead (unclean election is off), then the last
// ISR member returns and every partition is whole. Nothing written.
func TestQuietWholeClusterStopLastISRMemberBackLast(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: restarts every broker of a cluster")
	}
	c, acked := startQuiet(t, clustertest.Options{}, 3)
	for id := int32(1); id <= 3; id++ {
		if err := c.StopBroker(id); err != nil {
			t.Fatalf("graceful stop of broker %d: %v", id, err)
		}
	}
	c.WaitFor(10*time.Second, "every partition offline with ISR [3]", func() bool {
		for p := range int32(quietPartitions) {
			if pd := c.Partition(quietTopic, p); pd.GetLeader() >= 0 || !slices.Equal(pd.GetIsr(), []int32{3}) {
				return false
			}
		}
		return true
	})
	c.StartBroker(1)
	c.StartBroker(2)
	// Their first full metadata comes once the controller has written
	// what their return allowed.
	c.WaitFor(15*time.Second, "brokers 1 and 2 told the metadata", func() bool {
		for _, id := range []int32{1, 2} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			md, err := c.BrokerClient(id).Metadata(ctx, &brokerv1.MetadataRequest{})
			cancel()
			if err != nil || len(md.GetTopics()) == 0 {
				return false
			}
		}
		return true
	})
	for p := range int32(quietPartitions) {
		if l := c.Partition(quietTopic, p).GetLeader(); l >= 0 {
			t.Fatalf("%s-%d led by broker %d, outside its ISR [3]", quietTopic, p, l)
		}
	}
	c.StartBroker(3)
	checkQuietWhole(c, acked, 20*time.Second)
}

// Brokers killed and started again twice while no controller runs, then
// the controllers start: the new term's full pushes must make the returned
// broker whole. Nothing written.
func TestQuietBrokerRestartsWithoutAController(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: waits out broker leases")
	}
	c, acked := startQuiet(t, clustertest.Options{}, 3)
	leader := c.Partition(quietTopic, 0).GetLeader()
	c.StopController(2)
	c.StopController(1)
	for range 2 {
		c.CrashBroker(leader)
		c.StartBroker(leader)
	}
	c.StartController(1)
	c.StartController(2)
	checkQuietWhole(c, acked, 20*time.Second)
}

// A leader killed and the active controller killed right after, while it
// handles the broker's death; the broker starts again while the standby
// takes office. Nothing written.
func TestQuietLeaderAndControllerKilledTogether(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: waits out broker and controller leases")
	}
	c, acked := startQuiet(t, clustertest.Options{PausableControllers: true}, 3)
	active, epoch := c.ActiveController()
	leader := c.Partition(quietTopic, 0).GetLeader()
	c.CrashBroker(leader)
	c.PauseController(active)
	c.StartBroker(leader)
	var next, nextEpoch int32
	c.WaitFor(15*time.Second, "a standby in office", func() bool {
		next, nextEpoch = c.ActiveOtherThan(active)
		return next >= 0
	})
	if nextEpoch <= epoch {
		t.Fatalf("controller %d took office with epoch %d after epoch %d", next, nextEpoch, epoch)
	}
	c.ResumeController(active)
	c.StopController(active)
	c.StartController(active)
	checkQuietWhole(c, acked, 20*time.Second)
}
