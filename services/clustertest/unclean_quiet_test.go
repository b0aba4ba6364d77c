package clustertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/kerr"
)

// Unclean leader election and ISR changes while nothing is produced: the
// faults, the config changes and the returns all happen on an idle
// partition, so no write can carry an election or an ISR change along.
// Each test then wants the partition whole without a write (a leader, the
// full ISR, HW = LEO on identical replicas) and judges the acknowledged
// writes by F20: kept unless an unclean election took them.

// quietUnclean is the tests' broker settings: a short lag time, so the ISR
// rules act within the test.
var quietUnclean = Options{BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}}

// alterUnclean sets unclean.leader.election.enable on a topic, or as the
// cluster default when topic is "".
func (c *Cluster) alterUnclean(topic string, on bool) {
	c.T.Helper()
	res := &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: topic}
	if topic == "" {
		res = &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER}
	}
	resp, err := c.Admin().AlterConfigs(context.Background(), &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
		Resource: res,
		Ops:      []*adminv1.ConfigOp{{Name: "unclean.leader.election.enable", Value: fmt.Sprint(on), Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}},
	}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		c.T.Fatalf("set unclean.leader.election.enable=%t on %q: %v %v", on, topic, resp, err)
	}
}

// produceAll writes values one by one with acks, each acknowledged.
func (c *Cluster) produceAll(topic string, acks int32, values ...string) {
	c.T.Helper()
	for _, v := range values {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.Produce(ctx, topic, 0, acks, v)
		cancel()
		if err != nil {
			c.T.Fatalf("produce %s to %s-0 (acks %d): %v", v, topic, acks, err)
		}
	}
}

// isolateLeader leaves topic-0's leader the only ISR member of an idle
// partition: both followers crash, the controller takes them out of the ISR,
// and the leader takes acks=1 writes they never see. It returns the leader,
// the followers in assignment order and the writes only the leader holds.
func (c *Cluster) isolateLeader(topic string) (int32, []int32, []string) {
	c.T.Helper()
	c.produceAll(topic, -1, "a0")
	reps := c.Partition(topic, 0).GetReplicas()
	c.WaitSettled(15*time.Second, topic, 0, reps)
	leader := c.Leader(topic, 0)
	var followers []int32
	for _, id := range reps {
		if id != leader {
			followers = append(followers, id)
			c.CrashBroker(id)
		}
	}
	for _, id := range followers {
		c.waitBrokerGone(id)
	}
	c.WaitFor(15*time.Second, "the ISR down to the leader", func() bool {
		isr, ok := c.ReplicaISR(leader, topic, 0)
		return ok && slices.Equal(isr, []int32{leader})
	})
	tail := []string{"a1", "a2"}
	c.produceAll(topic, 1, tail...)
	c.WaitHWAtLEO(topic, 0, leader)
	return leader, followers, tail
}

// waitBrokerGone waits until the active controller no longer counts broker
// id alive: a crashed broker's lease has run out. Until then its restart
// does not register anew, and WaitBrokerAlive would see the old
// registration.
func (c *Cluster) waitBrokerGone(id int32) {
	c.T.Helper()
	c.WaitFor(15*time.Second, fmt.Sprintf("broker %d's registration gone", id), func() bool {
		dc, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
		if err != nil {
			return false
		}
		for _, b := range dc.GetBrokers() {
			if b.GetNode().GetId() == id && b.GetAlive() {
				return false
			}
		}
		return true
	})
}

// checkWhole waits, without a write, for topic-0 to be whole on every
// replica and returns the log they all hold.
func (c *Cluster) checkWhole(topic string) []string {
	c.T.Helper()
	reps := c.Partition(topic, 0).GetReplicas()
	c.WaitSettled(20*time.Second, topic, 0, reps)
	logs := c.SameLogs(topic, 0, reps...)
	c.WaitHWAtLEO(topic, 0, reps...)
	return logs
}

// Scenario: an idle partition whose ISR is its leader alone loses that
// leader, so no clean election is possible; its out-of-sync replicas are
// back and nothing else happens. Turning unclean.leader.election.enable on
// (on the topic, or as the cluster default) must elect one of them by
// itself (F20: the controller reacts to the config change), not at the
// next broker event. The old leader then returns, truncates the writes only
// it held (leader epochs) and rejoins the ISR with HW = LEO.
func TestQuietUncleanElectionOnConfigChange(t *testing.T) {
	if testing.Short() {
		t.Skip("crashes brokers past their leases")
	}
	for _, scope := range []string{"topic", "cluster default"} {
		t.Run(scope, func(t *testing.T) {
			c := Start(t, quietUnclean)
			c.CreateTopic("qu", 1, 3, map[string]string{"min.insync.replicas": "1"})
			leader, followers, _ := c.isolateLeader("qu")
			c.CrashBroker(leader)
			for _, id := range followers {
				c.StartBroker(id)
			}
			for _, id := range followers {
				c.WaitBrokerAlive(id)
			}
			c.WaitFor(10*time.Second, "the partition offline", func() bool { return c.Partition("qu", 0).GetLeader() == -1 })
			if pd := c.Partition("qu", 0); pd.GetLeader() != -1 || !slices.Equal(pd.GetIsr(), []int32{leader}) {
				t.Fatalf("unclean election off: leader %d ISR %v, want offline with ISR [%d]", pd.GetLeader(), pd.GetIsr(), leader)
			}

			target := "qu"
			if scope == "cluster default" {
				target = ""
			}
			c.alterUnclean(target, true)
			elected := followers[0] // the first live assigned replica
			c.WaitFor(15*time.Second, "an out-of-sync replica elected on the config change alone", func() bool {
				return c.Partition("qu", 0).GetLeader() == elected && c.Leads(elected, "qu", 0)
			})
			if got := c.Values(elected, "qu", 0); !slices.Equal(got, []string{"a0"}) {
				t.Fatalf("unclean leader holds %v, want what it had: [a0]", got)
			}

			// Still idle: the old leader's HW and LEO are above the new
			// leader's, and no write of the new epoch tells it so.
			c.StartBroker(leader)
			if logs := c.checkWhole("qu"); !slices.Equal(logs, []string{"a0"}) {
				t.Fatalf("replicas hold %v, want [a0]: the old leader's tail truncated", logs)
			}
			c.produceAll("qu", -1, "b0")
			if logs := c.checkWhole("qu"); !slices.Equal(logs, []string{"a0", "b0"}) {
				t.Fatalf("replicas hold %v after the last write, want [a0 b0]", logs)
			}
		})
	}
}

// Scenario: unclean.leader.election.enable is already on when the idle
// partition loses the leader that was its only ISR member, and nothing is
// live for longer than a broker session. The followers left one at a time,
// so the one that left last holds a write of a later epoch than the other.
// An out-of-sync replica that then registers leads at once (its return is
// the event); writes succeed; the old leader, back later, truncates only
// the tail the new leader never had (where their epochs part), and the
// third replica joins, all without a write to carry them.
func TestQuietUncleanElectionOnReturnAfterALongGap(t *testing.T) {
	if testing.Short() {
		t.Skip("crashes brokers past their leases")
	}
	c := Start(t, quietUnclean)
	c.CreateTopic("qr2", 1, 3, map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
	c.produceAll("qr2", -1, "a0")
	reps := c.Partition("qr2", 0).GetReplicas()
	c.WaitSettled(15*time.Second, "qr2", 0, reps)
	leader := c.Leader("qr2", 0)
	var followers []int32
	for _, id := range reps {
		if id != leader {
			followers = append(followers, id)
		}
	}
	first, last := followers[0], followers[1]
	// first leaves; a1 reaches last; last leaves; a2 stays on the leader.
	c.CrashBroker(first)
	c.waitBrokerGone(first)
	c.WaitFor(15*time.Second, "the ISR without the first follower", func() bool {
		isr, ok := c.ReplicaISR(leader, "qr2", 0)
		return ok && len(isr) == 2 && !slices.Contains(isr, first)
	})
	c.produceAll("qr2", -1, "a1")
	c.WaitHWAtLEO("qr2", 0, leader, last)
	c.CrashBroker(last)
	c.waitBrokerGone(last)
	c.WaitFor(15*time.Second, "the ISR down to the leader", func() bool {
		isr, ok := c.ReplicaISR(leader, "qr2", 0)
		return ok && slices.Equal(isr, []int32{leader})
	})
	c.produceAll("qr2", 1, "a2")
	c.WaitHWAtLEO("qr2", 0, leader)
	c.CrashBroker(leader)
	c.WaitFor(10*time.Second, "the partition offline", func() bool { return c.Partition("qr2", 0).GetLeader() == -1 })
	time.Sleep(2 * c.BrokerConfig(leader).SessionTimeout) // the quiet gap: nothing live, nothing written

	c.StartBroker(last)
	c.WaitFor(15*time.Second, "the returning out-of-sync replica elected", func() bool {
		return c.Partition("qr2", 0).GetLeader() == last && c.Leads(last, "qr2", 0)
	})
	if got := c.Values(last, "qr2", 0); !slices.Equal(got, []string{"a0", "a1"}) {
		t.Fatalf("unclean leader holds %v, want [a0 a1]", got)
	}
	c.produceAll("qr2", -1, "b0", "b1")

	c.StartBroker(leader)
	c.WaitFor(20*time.Second, "the old leader back in the ISR", func() bool {
		return slices.Contains(c.Partition("qr2", 0).GetIsr(), leader)
	})
	c.StartBroker(first)
	logs := c.checkWhole("qr2")
	if want := []string{"a0", "a1", "b0", "b1"}; !slices.Equal(logs, want) {
		t.Fatalf("replicas hold %v, want %v: only the old leader's a2 truncated", logs, want)
	}
}

// Scenario: the out-of-sync replica elected on its return never had a
// record (its followers stopped before the first write), so the new epoch
// starts at offset 0, above every epoch of the old leader's log. Back while
// nothing is written, the old leader must drop its whole log (the new
// leader's answer below its first epoch), and every replica settles at
// offset 0 with HW = LEO before the first write of the new epoch lands at
// offset 0 everywhere.
func TestQuietUncleanElectionOfAReplicaWithoutRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("crashes brokers past their leases")
	}
	c := Start(t, quietUnclean)
	c.CreateTopic("qe", 1, 3, map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
	reps := c.Partition("qe", 0).GetReplicas()
	leader := c.Leader("qe", 0)
	var followers []int32
	for _, id := range reps {
		if id != leader {
			followers = append(followers, id)
			c.CrashBroker(id)
		}
	}
	for _, id := range followers {
		c.waitBrokerGone(id)
	}
	c.produceAll("qe", -1, "a0", "a1")
	c.CrashBroker(leader)
	c.WaitFor(10*time.Second, "the partition offline", func() bool { return c.Partition("qe", 0).GetLeader() == -1 })
	c.waitBrokerGone(leader)

	back := followers[1]
	c.StartBroker(back)
	c.WaitFor(15*time.Second, "the returning replica without records elected", func() bool {
		return c.Partition("qe", 0).GetLeader() == back && c.Leads(back, "qe", 0)
	})
	c.StartBroker(leader)
	c.StartBroker(followers[0])
	if logs := c.checkWhole("qe"); len(logs) != 0 {
		t.Fatalf("replicas hold %v, want an empty log: the new leader had none", logs)
	}
	c.produceAll("qe", -1, "b0")
	if logs := c.checkWhole("qe"); !slices.Equal(logs, []string{"b0"}) {
		t.Fatalf("replicas hold %v, want [b0]", logs)
	}
}

// Scenario: min.insync.replicas 2 on an idle partition. Followers that are
// caught up and fetching stay in the ISR across several lag times with
// nothing written (F7: a follower at the leader's LEO is never out of
// sync). Then both leave it, and acks=all writes are refused: frozen past
// their leases (the controller removes them), or cut off from the leader
// while one acks=1 write puts them behind (the leader removes them after
// replica.lag.time.max.ms). Let back, they rejoin with no write to carry
// them (an idle leader's LEO is reached by their first fetch), and the
// next acks=all write is acknowledged on its first attempt.
func TestQuietISRShrinksAndExpandsUnderMinISR(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes brokers past their leases")
	}
	for _, how := range []string{"frozen", "cut off behind"} {
		t.Run(how, func(t *testing.T) {
			c := Start(t, quietUnclean)
			c.CreateTopic("qm", 1, 3, map[string]string{"min.insync.replicas": "2"})
			want := []string{"a0", "a1"}
			c.produceAll("qm", -1, want...)
			reps := c.Partition("qm", 0).GetReplicas()
			c.WaitSettled(15*time.Second, "qm", 0, reps)
			leader := c.Leader("qm", 0)

			// Idle and healthy: nobody leaves the ISR over four lag times.
			for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				isr, ok := c.ReplicaISR(leader, "qm", 0)
				if cisr := c.Partition("qm", 0).GetIsr(); !ok || len(isr) != 3 || len(cisr) != 3 {
					t.Fatalf("idle partition with healthy followers: leader's ISR %v, controller's %v; want all 3", isr, cisr)
				}
			}

			var followers []int32
			for _, id := range reps {
				if id != leader {
					followers = append(followers, id)
				}
			}
			for _, id := range followers {
				if how == "frozen" {
					c.EtcdLink(id).Pause()
					c.Net.Pause(BrokerName(id))
				} else {
					c.Net.Partition(BrokerName(leader), BrokerName(id))
				}
			}
			if how != "frozen" {
				c.produceAll("qm", 1, "behind")
				want = append(want, "behind")
			}
			c.WaitFor(15*time.Second, "the followers out of the leader's ISR", func() bool {
				isr, ok := c.ReplicaISR(leader, "qm", 0)
				return ok && slices.Equal(isr, []int32{leader}) && slices.Equal(c.Partition("qm", 0).GetIsr(), []int32{leader})
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := c.Produce(ctx, "qm", 0, -1, "refused")
			cancel()
			if kerr.CodeOf(err) != kerr.NotEnoughReplicas {
				t.Fatalf("acks=all write with ISR [%d] under min.insync.replicas 2: %v, want NOT_ENOUGH_REPLICAS", leader, err)
			}
			time.Sleep(time.Second) // out a while longer, nothing produced
			for _, id := range followers {
				c.Net.Resume(BrokerName(id))
				c.EtcdLink(id).Resume()
			}
			c.Net.HealAll()
			c.WaitSettled(30*time.Second, "qm", 0, reps)
			c.WaitFor(10*time.Second, "the controller's ISR full", func() bool { return len(c.Partition("qm", 0).GetIsr()) == 3 })
			if logs := c.checkWhole("qm"); !slices.Equal(logs, want) {
				t.Fatalf("replicas hold %v, want %v", logs, want)
			}
			c.produceAll("qm", -1, "b0")
			if logs := c.checkWhole("qm"); !slices.Equal(logs, append(want, "b0")) {
				t.Fatalf("replicas hold %v, want %v", logs, append(want, "b0"))
			}
		})
	}
}

// Scenario: unclean.leader.election.enable turned on and off again while
// the partition is idle, offline for only part of that time. Turned on and
// off while it still has a leader, and again while it is offline with no
// replica alive, it must leave nothing behind: once off, neither the loss
// of the last ISR member with an out-of-sync replica alive nor the return
// of the out-of-sync replicas elects anyone. The partition waits for the
// old leader, which returns with every acknowledged write.
func TestQuietUncleanElectionOnThenOff(t *testing.T) {
	if testing.Short() {
		t.Skip("crashes brokers past their leases")
	}
	c := Start(t, quietUnclean)
	c.CreateTopic("qo", 1, 3, map[string]string{"min.insync.replicas": "1"})
	leader, followers, tail := c.isolateLeader("qo")
	acked := append([]string{"a0"}, tail...)
	// One follower back but cut off from the leader: registered, out of
	// sync. The leader is alive, so the flag has nobody to elect.
	c.Net.Partition(BrokerName(leader), BrokerName(followers[0]))
	c.StartBroker(followers[0])
	c.WaitBrokerAlive(followers[0])
	epoch := c.Partition("qo", 0).GetLeaderEpoch()
	c.alterUnclean("qo", true)
	c.alterUnclean("qo", false)
	if pd := c.Partition("qo", 0); pd.GetLeader() != leader || pd.GetLeaderEpoch() != epoch || !slices.Equal(pd.GetIsr(), []int32{leader}) {
		t.Fatalf("after on and off with a leader: leader %d epoch %d ISR %v, want %d, %d, [%d]",
			pd.GetLeader(), pd.GetLeaderEpoch(), pd.GetIsr(), leader, epoch, leader)
	}

	// The last ISR member dies with the out-of-sync replica alive.
	c.CrashBroker(leader)
	c.WaitFor(10*time.Second, "the partition offline", func() bool { return c.Partition("qo", 0).GetLeader() == -1 })
	// Nothing alive: on and off again.
	c.CrashBroker(followers[0])
	c.Net.HealAll()
	for _, id := range []int32{leader, followers[0]} {
		c.waitBrokerGone(id)
	}
	c.alterUnclean("qo", true)
	c.alterUnclean("qo", false)
	for _, id := range followers {
		c.StartBroker(id)
	}
	for _, id := range followers {
		c.WaitBrokerAlive(id)
	}
	time.Sleep(time.Second) // nothing may happen: give a wrong election the time to show
	if pd := c.Partition("qo", 0); pd.GetLeader() != -1 || !slices.Equal(pd.GetIsr(), []int32{leader}) {
		t.Fatalf("unclean election turned off: leader %d ISR %v, want offline with ISR [%d]", pd.GetLeader(), pd.GetIsr(), leader)
	}
	for _, id := range followers {
		if c.Leads(id, "qo", 0) {
			t.Fatalf("out-of-sync broker %d leads with unclean election off", id)
		}
	}

	c.StartBroker(leader)
	c.WaitFor(15*time.Second, "the old leader elected again", func() bool {
		return c.Partition("qo", 0).GetLeader() == leader && c.Leads(leader, "qo", 0)
	})
	if logs := c.checkWhole("qo"); !slices.Equal(logs, acked) {
		t.Fatalf("replicas hold %v, want every acknowledged write %v", logs, acked)
	}
	c.produceAll("qo", -1, "b0")
	if logs := c.checkWhole("qo"); !slices.Equal(logs, append(acked, "b0")) {
		t.Fatalf("replicas hold %v after the last write", logs)
	}
}
