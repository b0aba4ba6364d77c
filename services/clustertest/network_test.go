package clustertest

import (
	"slices"
	"testing"
	"time"
)

// Playbook 2 with the real controller: a follower behind a lossy link keeps
// up (fetches are retried); cut off entirely it leaves the ISR after
// replica.lag.time.max.ms while writes continue; healed, it catches up and
// rejoins; every replica ends with the same log and every acknowledged
// record.
func TestFollowerLossyThenPartitionedThenHealed(t *testing.T) {
	c := Start(t, Options{BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1500"}})
	c.CreateTopic("net", 1, 3, map[string]string{"min.insync.replicas": "2"})
	pd := c.Partition("net", 0)
	leader, follower := pd.GetLeader(), pd.GetReplicas()[2]
	p := startProducer(c, "net", 100000)
	c.WaitFor(10*time.Second, "first writes", func() bool { return p.count() >= 20 })

	c.Net.Drop(BrokerName(follower), BrokerName(leader), 0.2)
	n := p.count()
	c.WaitFor(15*time.Second, "writes over a lossy link", func() bool { return p.count() >= n+50 })
	c.Net.Drop(BrokerName(follower), BrokerName(leader), 0)

	c.Net.Partition(BrokerName(leader), BrokerName(follower))
	c.WaitFor(10*time.Second, "the cut-off follower to leave the ISR", func() bool {
		return !slices.Contains(c.Partition("net", 0).GetIsr(), follower)
	})
	n = p.count()
	c.WaitFor(10*time.Second, "writes without it", func() bool { return p.count() >= n+50 })
	c.Net.Heal(BrokerName(leader), BrokerName(follower))
	c.WaitFor(15*time.Second, "the follower back in the ISR", func() bool {
		return slices.Contains(c.Partition("net", 0).GetIsr(), follower)
	})
	acked := p.finish(t)
	AssertAllPresent(t, acked, c.SameLogs("net", 0, pd.GetReplicas()...))
}
